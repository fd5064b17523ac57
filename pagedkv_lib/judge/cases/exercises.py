"""The course's exercises, one card each: what the judge needs to know of an exercise besides its cases.

card(id, slug, title, difficulty, notebook, oracle, **more): `notebook` is "NN title" of the notebook that
teaches it; `oracle` maps each graded name to the "module:attr" of the library object its cases compare with;
`more` are the other fields of registry.Exercise (forbidden library objects, limits, devices, the reference
that show_reference prints, the `speed` bar of a kernel's --bench on a GPU: (benchmark shape, "copy" or
"matmul", the fraction of that ceiling the learner's kernel must reach; judge/speed.py)). `closed`: more
library modules that could do the graded work, never in the exercise's sandbox (judge/harness.py; the
modules of the oracle and the forbidden objects never are either).
Plain data: the registry makes the Exercise objects.
"""
from __future__ import annotations


def card(id, slug, title, difficulty, notebook, oracle, **more) -> dict:
    return dict(id=id, slug=slug, title=title, difficulty=difficulty, notebook=notebook, oracle=oracle,
                **more)


_M = "pagedkv_lib.studies.memory"
_ATTN = "pagedkv_lib.core.paged_attention"
_KQ = "pagedkv_lib.core.kv_quant"
_KS = "pagedkv_lib.kernels.triton_store_kvcache"                     # Triton kernels
_KD = "pagedkv_lib.kernels.triton_decode_attention"
_KP = "pagedkv_lib.kernels.triton_prefill_attention"
_KT = "pagedkv_lib.kernels.triton_primer"
_PUZZLES = ("gather_rows", "scale_columns", "row_softmax", "scores")
_K = "pagedkv_lib.kernels."
_ATTENTION_KERNELS = (f"{_K}triton_decode_attention", f"{_K}triton_prefill_attention",   # `closed`: they
                      f"{_K}triton_decode_merge", f"{_K}triton_cascade_attention",       # do attention too
                      "pagedkv_lib.core.cascade_attention", "pagedkv_lib.engine.attention_layer",
                      "pagedkv_lib.engine.kernel_choice")
CARDS = (
    card(121, "kv_memory_budget", "KV memory budget", "easy", "01 Why paging",
         {n: f"{_M}:{n}" for n in ("kv_bytes_per_token", "paged_concurrency", "reserved_concurrency")}),
    card(122, "slot_mapping", "Slot mapping", "easy", "03 Slot mapping and store_kvcache",
         {"slot_mapping_for": "pagedkv_lib.core.slot_mapping:slot_mapping_for"},
         forbidden=("pagedkv_lib.core.slot_mapping:compute_slot_mapping",),
         closed=("pagedkv_lib.core.model_inputs",)),
    card(123, "slot_ranges", "Slot ranges per block", "medium", "03 Slot mapping and store_kvcache",
         {"compute_slot_mapping": "pagedkv_lib.core.slot_mapping:compute_slot_mapping"},
         forbidden=("pagedkv_lib.core.slot_mapping:slot_mapping_for",),
         closed=("pagedkv_lib.core.model_inputs",)),
    card(124, "store_kvcache", "store_kvcache", "easy", "03 Slot mapping and store_kvcache",
         {"store_kvcache": "pagedkv_lib.core.store_kvcache:store_kvcache"}, closed=(_KS,)),
    card(125, "paged_decode_attention", "Paged decode attention", "medium", "04 Paged decode attention",
         {"paged_attention_decode": f"{_ATTN}:paged_attention_decode"},
         forbidden=(f"{_ATTN}:paged_attention_varlen", "pagedkv_lib.core.kv_cache:gather_kv"),
         closed=_ATTENTION_KERNELS),
    card(126, "varlen_paged_attention", "Varlen paged attention", "medium", "05 Varlen attention",
         {"paged_attention_varlen": f"{_ATTN}:paged_attention_varlen"},
         forbidden=(f"{_ATTN}:paged_attention_decode", "pagedkv_lib.core.kv_cache:gather_kv"),
         closed=_ATTENTION_KERNELS),
    card(127, "block_pool_cow", "Block pool, fork and copy-on-write", "medium",
         "08 Fork and copy-on-write",
         {"BlockPool": "pagedkv_lib.core.block_pool:BlockPool",
          "append_slot": "pagedkv_lib.core.copy_on_write:append_slot"},
         forbidden=("pagedkv_lib.core.copy_on_write:copy_block",),
         closed=("pagedkv_lib.core.block_manager", "pagedkv_lib.core.radix_block_manager")),
    card(128, "kernel_inputs", "Kernel inputs", "medium", "06 From scheduler to kernel inputs",
         {"prepare_prefill": "pagedkv_lib.core.model_inputs:prepare_prefill",
          "prepare_decode": "pagedkv_lib.core.model_inputs:prepare_decode"},
         forbidden=("pagedkv_lib.core.model_inputs:pad_block_tables",      # prepare_verify is prepare_prefill
                    "pagedkv_lib.core.model_inputs:prepare_verify"),       # with the drafts appended
         reference=tuple(f"pagedkv_lib.core.model_inputs:{n}"
                         for n in ("_varlen_inputs", "prepare_prefill", "prepare_decode"))),
    card(129, "prefix_caching", "Prefix-caching block manager", "hard", "07 Prefix caching",
         {"BlockManager": "pagedkv_lib.core.block_manager:BlockManager"},
         closed=("pagedkv_lib.core.radix_block_manager",)),
    card(130, "triton_store_kvcache", "Triton store_kvcache", "medium", "10 Triton: store_kvcache",
         {"store_kvcache_triton": "pagedkv_lib.core.store_kvcache:store_kvcache"},
         forbidden=tuple(f"{_KS}:{n}" for n in ("store_kvcache_triton", "launch_store_kvcache",
                                                 "_store_kvcache_kernel")),
         time_limit_s=20.0, devices=("cpu", "cuda"), triton=True,
         reference=(f"{_KS}:_store_kvcache_kernel", f"{_KS}:store_kvcache_triton")),
    card(131, "triton_paged_decode", "Triton paged decode", "hard", "11 Triton: paged decode attention",
         {"paged_attention_decode_triton": f"{_ATTN}:paged_attention_decode"},
         forbidden=(f"{_ATTN}:paged_attention_varlen", "pagedkv_lib.core.kv_cache:gather_kv",
                    *(f"{_KD}:{n}" for n in ("paged_attention_decode_triton", "launch_decode_attention",
                                             "launch_decode_partials", "paged_decode_kernel",
                                             "split_kv_decode_kernel", "chunked_decode_kernel",
                                             "attend_range")),
                    "pagedkv_lib.kernels.triton_decode_merge:reduce_splits"),
         closed=tuple(m for m in _ATTENTION_KERNELS if m != _KD),
         time_limit_s=20.0, devices=("cpu", "cuda"), triton=True,
         speed=("B=64 x 4096 tokens", "copy", 0.5),      # decode streams the cache: half the copy rate
         reference=(f"{_KD}:paged_decode_kernel", f"{_KD}:chunked_decode_kernel",   # the answer, the tuned
                    f"{_KD}:paged_attention_decode_triton")),
    card(132, "scheduler_step", "Scheduler with preemption", "hard", "14 Capstone: a mini engine",
         {"schedule": "pagedkv_lib.engine.scheduler:schedule"},
         forbidden=("pagedkv_lib.engine.scheduler:preempt", "pagedkv_lib.engine.scheduler:Scheduler"),
         closed=("pagedkv_lib.engine.llm_engine",)),
    card(133, "triton_paged_prefill", "Triton paged prefill", "hard",
         "12 Triton: paged prefill attention",
         {"paged_attention_varlen_triton": f"{_ATTN}:paged_attention_varlen"},
         forbidden=(f"{_ATTN}:paged_attention_decode", "pagedkv_lib.core.kv_cache:gather_kv",
                    *(f"{_KP}:{n}" for n in ("paged_attention_varlen_triton", "launch_prefill_attention",
                                             "_prefill_attention_kernel"))),
         closed=tuple(m for m in _ATTENTION_KERNELS if m != _KP),
         time_limit_s=30.0, devices=("cpu", "cuda"), triton=True,
         speed=("cold 4 x 2048", "matmul", 0.25),        # prefill is arithmetic: a quarter of the matmul rate
         reference=(f"{_KP}:_prefill_attention_kernel", f"{_KP}:paged_attention_varlen_triton")),
    card(134, "fp8_kv_cache", "FP8 KV cache", "medium", "13 FP8 KV cache",
         {"store_kvcache_fp8": "pagedkv_lib.core.store_kvcache:store_kvcache",
          "gather_kv_dequant": f"{_KQ}:gather_kv_dequant"},
         forbidden=(f"{_KQ}:quantize_fp8", f"{_KQ}:dequantize_fp8",
                    "pagedkv_lib.core.kv_cache:gather_kv"),
         closed=("pagedkv_lib.testing.paged_batch",)),
    card(135, "triton_primer_puzzles", "Triton primer puzzles", "medium", "09 Triton primer",
         {f"{p}_triton": f"{_KT}:{p}_reference" for p in _PUZZLES},
         forbidden=tuple(f"{_KT}:{n}" for p in _PUZZLES
                         for n in (f"{p}_triton", f"_{p}_kernel", f"{p}_spec")),
         statement=tuple(f"{_KT}:{p}_spec" for p in _PUZZLES),
         time_limit_s=20.0, devices=("cpu", "cuda"), triton=True,
         reference=tuple(f"{_KT}:{n}" for p in _PUZZLES for n in (f"_{p}_kernel", f"{p}_triton"))),
    card(136, "radix_cache", "Radix cache", "hard", "15 RadixAttention",
         {"RadixCache": "pagedkv_lib.core.radix_cache:RadixCache"},
         forbidden=("pagedkv_lib.core.radix_block_manager:RadixBlockManager",)),
    card(137, "kv_transfer", "KV transfer between instances", "medium", "17 The KV cache across GPUs",
         {"transfer_kv": "pagedkv_lib.distributed.kv_transfer:transfer_kv"},
         forbidden=tuple(f"pagedkv_lib.distributed.kv_transfer:{n}"
                         for n in ("gather_blocks", "scatter_blocks", "receive_blocks")),
         closed=("pagedkv_lib.distributed.disaggregation", "pagedkv_lib.distributed.serving_instance")),
    card(138, "mla_decode", "Paged MLA decode, absorbed", "hard", "18 MLA: a cache of latents",
         {"mla_decode_absorbed": "pagedkv_lib.core.mla_attention:mla_decode_multihead"},
         forbidden=tuple(f"pagedkv_lib.core.mla_attention:{n}" for n in (
             "mla_decode_absorbed", "split_query", "absorb_query", "mla_scale", "mla_latent_attention",
             "gather_latents")),
         reference=tuple(f"pagedkv_lib.core.mla_attention:{n}" for n in (    # what a learner writes, in
             "split_query", "absorb_query", "mla_scale", "gather_latents",       # order: RoPE, absorption,
             "mla_latent_attention", "mla_decode_absorbed"))),                   # scale, gather, attention
    card(139, "sliding_window_manager", "Sliding-window KV cache group", "hard", "19 Hybrid models",
         {"SlidingWindowManager": "pagedkv_lib.core.sliding_window_manager:SlidingWindowManager"},
         forbidden=("pagedkv_lib.core.kv_cache_coordinator:KVCacheCoordinator",
                    "pagedkv_lib.core.single_type_manager:SingleTypeManager")),
    card(140, "speculative_rollback", "Rollback after speculative decoding", "medium",
         "20 Speculative decoding and the cache", {"truncate": "pagedkv_lib.core.rollback:truncate"}),
    card(141, "two_tier_cache", "Two-tier prefix cache, GPU and CPU", "medium",
         "22 A second tier: KV blocks in CPU memory",
         {"TwoTierCache": "pagedkv_lib.core.two_tier_cache:TwoTierCache"},
         closed=("pagedkv_lib.core.tiered_block_manager", "pagedkv_lib.core.cpu_block_store")),
)
