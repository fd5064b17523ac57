"""StateManager: the KV cache group of state layers (Mamba, linear attention: Jamba, Qwen3-Next).

A state layer keeps no per-token keys and values: one fixed-size state per request, overwritten at every step.
vLLM serves it from the same block pool as the attention layers (its `MambaManager`), one block per request,
the state padded to the page size (vllm-project/vllm@1153c0c:docs/design/hybrid_kv_cache_manager.md, "Case 4":
the attention block_size grows until one page holds a state; studies/hybrid_memory.py computes it). Prefix
caching of states came later and differently (states checkpointed at block boundaries); this course's group
keeps the design doc's rule, "prefix caching support of the mamba model is WIP": no hit, so a model with state
layers gets no prefix hit from the coordinator.
"""
from __future__ import annotations

from .single_type_manager import SingleTypeManager


class StateManager(SingleTypeManager):
    """One block per request, however long: the state after its latest token."""

    def num_required_blocks(self, num_tokens: int) -> int:
        return 1

    def cache_blocks(self, request_id: str, block_hashes: list[int], num_tokens: int) -> None:
        """A state is overwritten each step: nothing to register."""

    def find_longest_cache_hit(self, block_hashes: list[int], max_length: int) -> list[int]:
        return []
