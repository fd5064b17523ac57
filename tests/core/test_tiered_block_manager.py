"""TieredBlockManager: evicted prefix blocks written out to the CPU tier, CPU hits loaded back; the same
decisions, op for op, as TwoTierCache (the hash-level model of exercise 141), and its rules one by one."""
from __future__ import annotations

import random

import pytest

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.core.tiered_block_manager import TieredBlockManager
from pagedkv_lib.core.two_tier_cache import TwoTierCache


def block_hashes(tokens: list[int], block_size: int) -> list[int | None]:
    """The chained hash of every full block, None for the partial last one."""
    out, h = [], -1
    for i in range(-(-len(tokens) // block_size)):
        block = tokens[i * block_size:(i + 1) * block_size]
        h = BlockManager.compute_hash(block, h) if len(block) == block_size else -1
        out.append(h if h != -1 else None)
    return out


def prompt(rng: random.Random, prefixes, block_size: int) -> list[int]:
    """A shared prefix (whole blocks), then a tail that ends inside a block (so every full block may hit)."""
    tail = [rng.randrange(50) for _ in range(rng.randint(0, 2) * block_size + rng.randint(1, block_size - 1))]
    return list(rng.choice(prefixes)) + tail


@pytest.mark.parametrize("seed", range(8))
def test_tiered_block_manager_matches_the_two_tier_model(seed):
    rng = random.Random(seed)
    bs, num_gpu, num_cpu = rng.choice([2, 3, 4]), rng.randint(4, 10), rng.randint(1, 6)
    prefixes = [[rng.randrange(50) for _ in range(bs * rng.randint(1, 3))] for _ in range(4)]
    bm, model = TieredBlockManager(num_gpu, bs, num_cpu), TwoTierCache(num_gpu, num_cpu)
    live = {}
    for step in range(120):
        if live and rng.random() < 0.45:
            seq_id = rng.choice(sorted(live))
            seq, table = live.pop(seq_id)
            bm.deallocate(seq)
            model.free(table)
        else:
            tokens = prompt(rng, prefixes, bs)
            if len(tokens) > num_gpu * bs:
                continue
            seq = Sequence(tokens, bs, seq_id=step)
            hashes = block_hashes(tokens, bs)
            assert [t for t, _ in bm.cached_prefix(seq)] == model.lookup(hashes)
            can = bm.can_allocate(seq)
            table = model.allocate(hashes)
            assert can == (table is not None)
            if can:
                bm.allocate(seq)
                assert seq.block_table == table
                live[step] = (seq, table)
        if rng.random() < 0.5:
            assert bm.take_transfers() == model.take_transfers()
        assert list(bm.free_block_ids) == list(model.gpu_free)
        assert bm.pool.ref_counts == model.gpu_ref_counts
        assert list(bm.cpu.hash_to_slot.items()) == list(model.cpu_lru.items())
        assert {h: b for h, b in bm.hash_to_block_id.items() if bm.blocks[b].hash == h} == \
            model.gpu_hash_to_block


def seq_of(tokens, bs=2, seq_id=0):
    return Sequence(list(tokens), bs, seq_id=seq_id)


def test_an_evicted_prefix_block_is_written_out_and_loaded_back():
    bm = TieredBlockManager(num_blocks=3, block_size=2, num_cpu_blocks=4)
    a = seq_of([1, 2, 3, 4, 5])                          # blocks [1, 2] [3, 4] [5]
    bm.allocate(a)
    bm.deallocate(a)                                     # free queue [2, 1, 0]: the tail first
    b = seq_of([9, 9, 9, 9, 9], seq_id=1)
    bm.allocate(b)                                       # reuses all three: [3, 4] and [1, 2] evicted
    saves, loads = bm.take_transfers()
    assert saves == [(1, 0), (0, 1)] and loads == []
    bm.deallocate(b)
    c = seq_of([1, 2, 3, 4, 7], seq_id=2)
    assert [t for t, _ in bm.cached_prefix(c)] == ["cpu", "cpu"]
    bm.allocate(c)
    assert c.num_cached_tokens == 4
    saves, loads = bm.take_transfers()
    assert [slot for slot, _ in loads] == [1, 0] and [g for _, g in loads] == c.block_table[:2]


def test_a_block_already_on_the_cpu_is_not_written_out_again():
    bm = TieredBlockManager(num_blocks=2, block_size=2, num_cpu_blocks=4)
    for seq_id, tokens in enumerate(([1, 2, 3], [8, 8, 8], [1, 2, 5], [8, 8, 8])):
        seq = seq_of(tokens, seq_id=seq_id)
        bm.allocate(seq)
        bm.deallocate(seq)
    assert bm.num_saved_blocks == 2                      # [1, 2] once, [8, 8] once; [1, 2] loaded back once
    assert bm.num_loaded_blocks == 2 and len(bm.cpu) == 2


def test_the_lookup_stops_at_the_first_block_neither_tier_holds():
    bm = TieredBlockManager(num_blocks=8, block_size=2, num_cpu_blocks=4)
    a = seq_of([1, 2, 3, 4, 5, 6, 7])
    bm.allocate(a)
    bm.deallocate(a)
    assert len(bm.cached_prefix(seq_of([1, 2, 3, 4, 5, 6, 7]))) == 3
    assert len(bm.cached_prefix(seq_of([1, 2, 0, 0, 5, 6, 7]))) == 1


def test_a_slot_a_queued_load_reads_is_not_evicted():
    bm = TieredBlockManager(num_blocks=2, block_size=2, num_cpu_blocks=1)
    a = seq_of([1, 2, 3])
    bm.allocate(a)
    bm.deallocate(a)
    b = seq_of([4, 4, 4], seq_id=1)
    bm.allocate(b)                                       # evicts [1, 2] to slot 0
    bm.deallocate(b)
    c = seq_of([1, 2, 5], seq_id=2)
    bm.allocate(c)                                       # loads slot 0 and evicts [4, 4]: no slot for it
    saves, loads = bm.take_transfers()
    assert loads == [(0, c.block_table[0])] and saves == [(0, 0)]     # b's save only, queued first
    assert list(bm.cpu.hash_to_slot) == [bm.blocks[c.block_table[0]].hash]
