"""Moving a sequence between two pools (exercise 137's oracle and the pieces around it), in one process.

Every check reads the sequence back through each side's own table against the sender's copy, on awkward
block sizes, ragged lengths, -1 padding, prefixes the receiver already holds, and scrambled free queues; and a
sequence moved between two mini-engine instances decodes exactly as where it was prefilled.
"""
from __future__ import annotations

import random

import pytest
import torch

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.kv_cache import gather_kv
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.distributed.block_layout import convert_layout, head_runs
from pagedkv_lib.distributed.kv_transfer import (
    gather_blocks,
    num_blocks_to_send,
    receive_blocks,
    scatter_blocks,
    transfer_kv,
)
from pagedkv_lib.distributed.serving_instance import ServingInstance
from pagedkv_lib.distributed.transfer_message import TransferHeader, check_header, header_for
from pagedkv_lib.engine import ModelConfig, Qwen3ForCausalLM, greedy_reference


def scenario(seed: int, S: int, num_tokens: int, k: int, L: int = 2, H_kv: int = 2, D: int = 3, padding=2):
    """A sender holding one sequence, a receiver with a scrambled pool already holding its first k blocks."""
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    n = -(-num_tokens // S)
    src = torch.full((2, L, n + 3, S, H_kv, D), float("nan"))                    # [2, L, N_src, S, H_kv, D]
    table = rng.sample(range(n + 3), n)
    src[:, :, table] = torch.randn(2, L, n, S, H_kv, D, generator=g)
    pool = BlockPool(n + 6)
    held = pool.allocate(n + 6)
    freed = rng.sample([b for b in held], n + 6 - k - 1)
    pool.free(freed)
    prefix = [b for b in held if b not in freed][:k]
    dst = torch.randn(2, L, n + 6, S, H_kv, D, generator=g)                     # [2, L, N_dst, S, H_kv, D]
    dst[:, :, prefix] = src[:, :, table[:k]]
    return src, table + [-1] * padding, pool, dst, prefix


def reads(cache, table, num_tokens):
    """K and V of every layer, read through `table`: [2, L, num_tokens, H_kv, D]."""
    return torch.stack([torch.stack([gather_kv(cache[i, layer], table, num_tokens)
                                     for layer in range(cache.shape[1])]) for i in range(2)])


@pytest.mark.parametrize("S, num_tokens, k", [(1, 5, 0), (1, 5, 3), (4, 10, 1), (4, 8, 2), (5, 23, 2),
                                              (16, 37, 0), (16, 129, 4), (3, 2, 0)])
def test_137_the_receiver_reads_the_senders_tokens_through_its_own_table(S, num_tokens, k):
    src, table, pool, dst, prefix = scenario(S * 1000 + num_tokens, S, num_tokens, k)
    queue = list(pool.free_block_ids)
    new_table = transfer_kv(src, torch.tensor(table, dtype=torch.int32), num_tokens, pool, dst, prefix)
    n = num_blocks_to_send(num_tokens, S, k)
    assert new_table == prefix + queue[:n]                         # the receiver's own ids, in queue order
    assert torch.equal(reads(dst, new_table, num_tokens), reads(src, table, num_tokens))
    assert all(pool.ref_count(b) == 2 for b in prefix) and all(pool.ref_count(b) == 1 for b in queue[:n])


def test_137_a_pool_too_small_refuses_and_changes_nothing():
    src, table, pool, dst, prefix = scenario(1, 4, 13, 1)
    pool.allocate(pool.num_free() - 2)                             # 2 free, 3 needed
    refs = [pool.ref_count(b) for b in range(pool.num_blocks)]
    queue, before = list(pool.free_block_ids), dst.clone()
    assert transfer_kv(src, table, 13, pool, dst, prefix) is None
    assert [pool.ref_count(b) for b in range(pool.num_blocks)] == refs and list(pool.free_block_ids) == queue
    assert torch.equal(dst, before)


def test_137_a_fully_held_prompt_moves_nothing_and_takes_references():
    src, table, pool, dst, prefix = scenario(2, 4, 8, 2)
    pool.allocate(pool.num_free())                                 # nothing free: nothing needed either
    assert transfer_kv(src, table, 8, pool, dst, prefix) == prefix
    assert [pool.ref_count(b) for b in prefix] == [2, 2]


def test_gather_blocks_follows_the_table_and_drops_padding():
    src, table, *_ = scenario(3, 4, 10, 0)
    blocks = gather_blocks(src, table, 10, first_block=1)           # [2, L, 2, S, H_kv, D]
    assert blocks.shape[2] == 2 and torch.equal(blocks, src[:, :, table[1:3]])


def test_scatter_checks_the_payload_and_receive_leaves_the_pool_as_it_was():
    _, _, pool, dst, _ = scenario(4, 4, 10, 0)
    queue = list(pool.free_block_ids)
    with pytest.raises(ValueError, match=r"blocks: expected shape \[2, 2, 2, 4, 2, 3\]"):
        receive_blocks(pool, dst, torch.zeros(2, 2, 2, 8, 2, 3), [])       # another block size
    with pytest.raises(TypeError, match="expected dtype torch.float32"):
        scatter_blocks(dst, torch.zeros(2, 2, 1, 4, 2, 3, dtype=torch.float16), [queue[0]])
    assert list(pool.free_block_ids) == queue


def test_receive_refuses_a_prefix_block_the_receiver_does_not_hold():
    _, _, pool, dst, _ = scenario(5, 4, 10, 0)
    free = pool.free_block_ids[0]
    with pytest.raises(ValueError, match=f"block {free} is free"):
        receive_blocks(pool, dst, torch.zeros(2, 2, 1, 4, 2, 3), [free])


def test_num_blocks_to_send_counts_the_partial_block_and_checks_the_prefix():
    assert num_blocks_to_send(10, 4, 1) == 2 and num_blocks_to_send(8, 4, 2) == 0
    with pytest.raises(ValueError, match="full blocks within the 9 tokens"):
        num_blocks_to_send(9, 4, 3)


def test_layouts_round_trip_and_hnd_keeps_a_head_contiguous():
    blocks = torch.randn(2, 3, 5, 4, 6, 2)                           # [2, L, n, S, H_kv, D]
    hnd = convert_layout(blocks, "NHD", "HND")                        # [2, L, n, H_kv, S, D]
    assert hnd.shape == (2, 3, 5, 6, 4, 2) and torch.equal(hnd[..., 1, :, :], blocks[..., :, 1, :])
    assert torch.equal(convert_layout(hnd, "HND", "NHD"), blocks)
    assert head_runs("NHD", 16, 8, [4, 5, 6, 7]) == 16 and head_runs("HND", 16, 8, [4, 5, 6, 7]) == 1
    assert head_runs("NHD", 16, 8, list(range(8))) == 1
    with pytest.raises(ValueError, match="consecutive ids"):
        head_runs("HND", 16, 8, [1, 3])


def test_a_header_from_another_cache_shape_is_refused_naming_both():
    mine = torch.zeros(2, 4, 3, 8, 2, 32)
    check_header(header_for(1, 45, mine), mine)
    other = TransferHeader(1, 45, 4, 16, 2, 32, 0)
    with pytest.raises(ValueError, match="'block_size': 16.*'block_size': 8"):
        check_header(other, mine)


def test_137_decoding_after_a_transfer_equals_decoding_where_the_prompt_was_computed():
    config, S = ModelConfig(seed=0), 8
    rng = random.Random(7)
    prompt = [rng.randrange(config.vocab_size) for _ in range(29)]
    sender, receiver = ServingInstance(config, 12, S), ServingInstance(config, 12, S)
    sender.pool.allocate(3)                                         # other requests: the ids differ
    receiver.pool.allocate(5)
    seq = sender.admit(prompt)
    first = sender.prefill(seq)
    table = transfer_kv(sender.kv_cache, seq.block_table, len(prompt), receiver.pool, receiver.kv_cache, [])
    assert table is not None and table != seq.block_table
    moved = Sequence(prompt, S)
    moved.block_table = table
    on_receiver = receiver.decode(moved, first, 6)
    reference = greedy_reference(Qwen3ForCausalLM(config), prompt, 6)
    assert on_receiver == sender.decode(seq, first, 6) == reference
