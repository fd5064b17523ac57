"""The hybrid memory arithmetic against the coordinator that actually holds the blocks, and vLLM's grouping
against its design doc's worked examples."""
from __future__ import annotations

import random

import pytest

from pagedkv_lib.core.kv_cache_coordinator import KVCacheCoordinator
from pagedkv_lib.studies import hybrid_memory as hm
from pagedkv_lib.studies.memory import ModelShape


@pytest.mark.parametrize("name", list(hm.HYBRID_MODELS))
@pytest.mark.parametrize("block_size", [1, 16, 64])
def test_blocks_per_sequence_is_what_the_coordinator_holds(name, block_size):
    model = hm.HYBRID_MODELS[name]
    _, groups = hm.layer_groups(model)
    rng = random.Random(f"{name}/{block_size}")
    for n in [1, 127, 128, 129, 1023, 1024, 1025, *(rng.randint(1, 5000) for _ in range(5))]:
        coord = KVCacheCoordinator(len(groups) * (n // block_size + 2) + 1, block_size, groups)
        assert coord.allocate_slots("r", n)
        coord.remove_skipped_blocks("r", n)
        assert sum(coord.num_blocks_held("r")) == hm.blocks_per_sequence(model, n, block_size), n


def test_grouping_follows_the_design_doc():
    """Gemma-3-27B: 52 sliding-window and 10 full-attention layers make 1 + 6 groups of 10 (the doc's
    "Case 3"); 20 sliding and 10 full make 1 + 2 groups of 10 ("Case 2")."""
    gemma = hm.HybridModel("g", ("sliding_window",) * 52 + ("full_attention",) * 10, 16, 128, 2, 1024)
    per_group, groups = hm.layer_groups(gemma)
    assert per_group == 10 and [g.kind for g in groups].count("sliding_window") == 6 and len(groups) == 7
    case2 = hm.HybridModel("c", ("sliding_window",) * 20 + ("full_attention",) * 10, 8, 128, 2, 32)
    assert hm.layer_groups(case2)[0] == 10 and len(hm.layer_groups(case2)[1]) == 3


def test_full_attention_bytes_match_the_plain_formula():
    model = hm.HYBRID_MODELS["full attention"]
    shape = ModelShape("same", 48, model.num_kv_heads, model.head_dim, model.dtype_bytes)
    for n in (1, 16, 17, 4096):
        assert hm.kv_bytes_per_sequence(model, n, 16) == -(-n // 16) * 16 * shape.bytes_per_token


def test_sliding_window_layers_stop_growing_past_the_window():
    model = hm.HYBRID_MODELS["5:1 local:global, W 1024"]
    full = hm.HYBRID_MODELS["full attention"]
    assert hm.kv_bytes_per_sequence(model, 1024) == hm.kv_bytes_per_sequence(full, 1024)
    growth = hm.kv_bytes_per_sequence(model, 65536) - hm.kv_bytes_per_sequence(model, 32768)
    assert growth == hm.kv_bytes_per_sequence(full, 32768) // 6          # only the 8 global layers grow


def test_state_padding_gives_the_smallest_page_that_holds_a_state():
    model = hm.HybridModel("s", ("state",) * 3 + ("full_attention",), 2, 256, 2, state_bytes=1_097_728)
    bs = hm.state_block_size(model)
    assert bs % 16 == 0 and bs * model.token_bytes_per_layer >= model.state_bytes
    assert (bs - 16) * model.token_bytes_per_layer < model.state_bytes
    hm.page_bytes(model, bs)
    with pytest.raises(ValueError, match="holds a state"):
        hm.page_bytes(model, bs - 16)


def test_capacity_table_counts_whole_sequences_of_whole_blocks():
    for row in hm.capacity_table(budget_bytes=2**34):
        model = hm.HYBRID_MODELS[row["model"]]
        per_seq = hm.kv_bytes_per_sequence(model, row["context_len"])
        assert row["fit"] * per_seq <= 2**34 < (row["fit"] + 1) * per_seq + hm.page_bytes(model, 16)
