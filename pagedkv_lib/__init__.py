"""pagedkv_lib: the reference library of the paged KV cache course.

Conventions (COURSE.md): one layer's cache is k_cache, v_cache [num_blocks, block_size, H_kv, D]; a whole
model's is kv_cache [2, num_layers, num_blocks, block_size, H_kv, D]; -1 pads slots and block tables;
metadata tensors are int32.
"""
from .attention import paged_attention_decode, paged_attention_varlen
from .block_manager import Block, BlockManager
from .block_pool import BlockPool
from .copy_on_write import append_slot, copy_block
from .kv_cache import allocate_kv_cache, gather_kv, layer_caches, map_to_kernel_blocks
from .model_inputs import ModelInputs, prepare_decode, prepare_prefill
from .paged_batch import PagedBatch, make_paged_batch, pad_block_tables, round_robin_tables
from .reference import sdpa_batch, sdpa_contiguous
from .sequence import Sequence, SequenceStatus
from .slot_mapping import compute_slot_mapping, slot_mapping_for
from .store_kvcache import store_kvcache

__all__ = [
    "Block", "BlockManager", "BlockPool", "ModelInputs", "PagedBatch", "Sequence", "SequenceStatus",
    "allocate_kv_cache", "append_slot", "compute_slot_mapping", "copy_block", "gather_kv", "layer_caches",
    "make_paged_batch", "map_to_kernel_blocks", "pad_block_tables", "paged_attention_decode",
    "paged_attention_varlen", "prepare_decode", "prepare_prefill", "round_robin_tables", "sdpa_batch",
    "sdpa_contiguous", "slot_mapping_for", "store_kvcache",
]
