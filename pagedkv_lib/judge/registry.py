"""The exercises the judge knows: one `Exercise` per id, the single key for its files, cases and oracle.

Importing this module imports no torch, so `judge.py --list` answers at once.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]          # the repository: practice/, solutions/, notebooks/
LIBRARY_DIR = ROOT / "pagedkv_lib"
PRACTICE_DIR = ROOT / "practice"
SOLUTIONS_DIR = ROOT / "solutions"


@dataclass(frozen=True)
class Exercise:
    id: int
    slug: str
    title: str
    difficulty: str                   # easy | medium | hard
    notebook: str                     # "NN title" of the notebook that teaches it
    oracle: dict                      # graded name -> "module:attr" of the library object checked against
    forbidden: tuple = ()             # more "module:attr" a submission may not call (they would do the work)
    time_limit_s: float = 2.0         # per case
    memory_limit_mb: int | None = 2048  # address space the child may add to the judge's; None: no cap (CUDA)
    devices: tuple = ("cpu",)         # case sets: cases.exNNN.build(seed, device) for each of these
    triton: bool = False              # a Triton exercise: the interpreter on "cpu", native on "cuda"
    reference: tuple = ()             # "module:attr" that show_reference prints once passed (default: oracle)

    @property
    def functions(self) -> tuple:
        """The graded names: each must be a top-level def or class of the submitted file."""
        return tuple(self.oracle)

    @property
    def filename(self) -> str:
        return f"{self.id}_{self.slug}.py"

    @property
    def practice_path(self) -> Path:
        return PRACTICE_DIR / self.filename

    @property
    def solution_path(self) -> Path:
        return SOLUTIONS_DIR / self.filename

    def cases(self):
        """The case module `pagedkv_lib.judge.cases.ex<id>` (imports torch)."""
        return importlib.import_module(f"pagedkv_lib.judge.cases.ex{self.id}")

    def oracle_namespace(self) -> dict:
        return {name: resolve(target) for name, target in self.oracle.items()}

    def reference_targets(self) -> tuple:
        return self.reference or tuple(self.oracle.values())

    def notebook_path(self) -> Path | None:
        found = sorted((ROOT / "notebooks").glob(f"{self.notebook[:2]}_*.ipynb"))
        return found[0] if found else None


def resolve(target: str):
    """"pagedkv_lib.studies.memory:kv_bytes_per_token" -> the object."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


_M = "pagedkv_lib.studies.memory"
_ATTN = "pagedkv_lib.core.paged_attention"
_KQ = "pagedkv_lib.core.kv_quant"
_KS = "pagedkv_lib.kernels.triton_store_kvcache"                     # Triton kernels
_KD = "pagedkv_lib.kernels.triton_decode_attention"
_KP = "pagedkv_lib.kernels.triton_prefill_attention"
EXERCISES: dict[int, Exercise] = {e.id: e for e in (
    Exercise(121, "kv_memory_budget", "KV memory budget", "easy", "01 Why paging",
             {n: f"{_M}:{n}" for n in ("kv_bytes_per_token", "paged_concurrency", "reserved_concurrency")}),
    Exercise(122, "slot_mapping", "Slot mapping", "easy", "03 Slot mapping and store_kvcache",
             {"slot_mapping_for": "pagedkv_lib.core.slot_mapping:slot_mapping_for"},
             forbidden=("pagedkv_lib.core.slot_mapping:compute_slot_mapping",)),
    Exercise(123, "slot_ranges", "Slot ranges per block", "medium", "03 Slot mapping and store_kvcache",
             {"compute_slot_mapping": "pagedkv_lib.core.slot_mapping:compute_slot_mapping"},
             forbidden=("pagedkv_lib.core.slot_mapping:slot_mapping_for",)),
    Exercise(124, "store_kvcache", "store_kvcache", "easy", "03 Slot mapping and store_kvcache",
             {"store_kvcache": "pagedkv_lib.core.store_kvcache:store_kvcache"}),
    Exercise(125, "paged_decode_attention", "Paged decode attention", "medium", "04 Paged decode attention",
             {"paged_attention_decode": f"{_ATTN}:paged_attention_decode"},
             forbidden=(f"{_ATTN}:paged_attention_varlen", "pagedkv_lib.core.kv_cache:gather_kv")),
    Exercise(126, "varlen_paged_attention", "Varlen paged attention", "medium", "05 Varlen attention",
             {"paged_attention_varlen": f"{_ATTN}:paged_attention_varlen"},
             forbidden=(f"{_ATTN}:paged_attention_decode", "pagedkv_lib.core.kv_cache:gather_kv")),
    Exercise(127, "block_pool_cow", "Block pool, fork and copy-on-write", "medium",
             "08 Fork and copy-on-write",
             {"BlockPool": "pagedkv_lib.core.block_pool:BlockPool",
              "append_slot": "pagedkv_lib.core.copy_on_write:append_slot"},
             forbidden=("pagedkv_lib.core.copy_on_write:copy_block",)),
    Exercise(128, "kernel_inputs", "Kernel inputs", "medium", "06 From scheduler to kernel inputs",
             {"prepare_prefill": "pagedkv_lib.core.model_inputs:prepare_prefill",
              "prepare_decode": "pagedkv_lib.core.model_inputs:prepare_decode"},
             forbidden=("pagedkv_lib.core.model_inputs:pad_block_tables",)),
    Exercise(129, "prefix_caching", "Prefix-caching block manager", "hard", "07 Prefix caching",
             {"BlockManager": "pagedkv_lib.core.block_manager:BlockManager"}),
    Exercise(130, "triton_store_kvcache", "Triton store_kvcache", "medium", "10 Triton: store_kvcache",
             {"store_kvcache_triton": "pagedkv_lib.core.store_kvcache:store_kvcache"},
             forbidden=tuple(f"{_KS}:{n}" for n in ("store_kvcache_triton", "launch_store_kvcache",
                                                     "_store_kvcache_kernel")),
             time_limit_s=20.0, memory_limit_mb=None, devices=("cpu", "cuda"), triton=True,
             reference=(f"{_KS}:_store_kvcache_kernel", f"{_KS}:store_kvcache_triton")),
    Exercise(131, "triton_paged_decode", "Triton paged decode", "hard", "11 Triton: paged decode attention",
             {"paged_attention_decode_triton": f"{_ATTN}:paged_attention_decode"},
             forbidden=(f"{_ATTN}:paged_attention_varlen", "pagedkv_lib.core.kv_cache:gather_kv",
                        *(f"{_KD}:{n}" for n in ("paged_attention_decode_triton", "launch_decode_attention",
                                                 "_decode_attention_kernel", "_reduce_splits_kernel"))),
             time_limit_s=20.0, memory_limit_mb=None, devices=("cpu", "cuda"), triton=True,
             reference=(f"{_KD}:_decode_attention_kernel", f"{_KD}:paged_attention_decode_triton")),
    Exercise(132, "scheduler_step", "Scheduler with preemption", "hard", "14 Capstone: a mini engine",
             {"schedule": "pagedkv_lib.engine.scheduler:schedule"},
             forbidden=("pagedkv_lib.engine.scheduler:preempt", "pagedkv_lib.engine.scheduler:Scheduler")),
    Exercise(133, "triton_paged_prefill", "Triton paged prefill", "hard",
             "12 Triton: paged prefill attention",
             {"paged_attention_varlen_triton": f"{_ATTN}:paged_attention_varlen"},
             forbidden=(f"{_ATTN}:paged_attention_decode", "pagedkv_lib.core.kv_cache:gather_kv",
                        *(f"{_KP}:{n}" for n in ("paged_attention_varlen_triton", "launch_prefill_attention",
                                                 "_prefill_attention_kernel"))),
             time_limit_s=30.0, memory_limit_mb=None, devices=("cpu", "cuda"), triton=True,
             reference=(f"{_KP}:_prefill_attention_kernel", f"{_KP}:paged_attention_varlen_triton")),
    Exercise(134, "fp8_kv_cache", "FP8 KV cache", "medium", "13 FP8 KV cache",
             {"store_kvcache_fp8": "pagedkv_lib.core.store_kvcache:store_kvcache",
              "gather_kv_dequant": f"{_KQ}:gather_kv_dequant"},
             forbidden=(f"{_KQ}:quantize_fp8", f"{_KQ}:dequantize_fp8",
                        "pagedkv_lib.core.kv_cache:gather_kv")),
)}


def get(exercise_id) -> Exercise:
    try:
        return EXERCISES[int(exercise_id)]
    except (KeyError, ValueError):
        known = ", ".join(str(i) for i in EXERCISES)
        raise KeyError(f"exercise {exercise_id!r}: expected one of {known}") from None
