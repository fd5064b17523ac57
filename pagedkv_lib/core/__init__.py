"""The engine's concepts, one per module: what a real serving engine (nano-vllm, vLLM) holds.

block_pool (physical blocks, free queue, ref counts), block_manager (prefix cache over a BlockPool),
radix_cache and radix_block_manager (SGLang's radix-tree prefix cache over a BlockPool), copy_on_write,
sequence and sampling_params (what a request asks for, which it carries), slot_mapping, kv_cache, kv_quant
(the FP8 cache's quantize/dequantize and scales), store_kvcache and paged_attention (PyTorch references of the
kernels), partial_softmax (split-KV's partial results and their merge), cascade_attention (a shared prefix
attended once), model_inputs (prepare_prefill / prepare_decode / prepare_verify), validation (argument
checks); the KV cache of hybrid models, as vLLM splits it: block_hash_index (full blocks per group),
single_type_manager (one group; full attention), sliding_window_manager, state_manager, kv_cache_coordinator
(the groups over one BlockPool); for speculative decoding, rollback (a block table cut back to its verified
tokens) and tree_attention (a draft tree's mask); a CPU tier under the pool: cpu_block_store (the CPU slots in
LRU order), tiered_block_manager (BlockManager writing evicted blocks out and loading CPU hits back) and
two_tier_cache (the same rules over block hashes alone); multi-head latent attention over a paged latent
cache: mla_attention, and rotary (its interleaved RoPE).
Shapes and symbols: docs/conventions.md.
"""
