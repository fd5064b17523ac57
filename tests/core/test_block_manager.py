"""BlockManager prefix caching: chained hashes, full blocks only, token check, the hit cap, stale entries."""
import ast
import random
from pathlib import Path

import numpy as np
import pytest
import xxhash

from pagedkv_lib import BlockManager, Sequence
from pagedkv_lib.core.block_manager import num_new_blocks


def seq_of(tokens, bs=4):
    return Sequence(list(tokens), bs)


def test_hash_is_xxh64_chained_over_the_parent_hash():
    h0 = BlockManager.compute_hash([1, 2, 3, 4])
    assert h0 == xxhash.xxh64(np.array([1, 2, 3, 4], dtype=np.int64).tobytes()).intdigest()
    h1 = BlockManager.compute_hash([5, 6, 7, 8], h0)
    manual = xxhash.xxh64(h0.to_bytes(8, "little") + np.array([5, 6, 7, 8], dtype=np.int64).tobytes())
    assert h1 == manual.intdigest() and h1 != BlockManager.compute_hash([5, 6, 7, 8])


def test_shared_prefix_hits_full_blocks_only_and_shares_them():
    bm = BlockManager(10, 4)
    a, b = seq_of(range(10)), seq_of(list(range(9)) + [99])
    bm.allocate(a)
    bm.allocate(b)
    assert b.num_cached_tokens == 8 and b.block_table[:2] == a.block_table[:2]
    assert b.block_table[2] != a.block_table[2]                      # partial block: never shared
    assert [bm.blocks[i].ref_count for i in a.block_table] == [2, 2, 1]
    assert bm.blocks[a.block_table[2]].hash == -1


def test_a_full_prompt_hit_leaves_one_token_to_compute():
    bm = BlockManager(10, 4)
    a = seq_of(range(8))
    bm.allocate(a)
    b = seq_of(range(8))
    bm.allocate(b)
    assert b.num_cached_tokens == 4 and b.num_tokens - b.num_cached_tokens >= 1


def test_a_hit_also_compares_token_ids():
    bm = BlockManager(10, 4)
    a = seq_of(range(6))
    bm.allocate(a)
    h = BlockManager.compute_hash([9, 9, 9, 9])
    bm.hash_to_block_id[h] = a.block_table[0]                       # pretend [9,9,9,9] collides
    b = seq_of([9, 9, 9, 9, 1])
    bm.allocate(b)
    assert b.num_cached_tokens == 0 and b.block_table[0] != a.block_table[0]


def test_freed_blocks_stay_hits_until_reused():
    bm = BlockManager(4, 4)
    a = seq_of([1, 1, 1, 1, 7, 7, 7, 7, 0])
    bm.allocate(a)
    first = a.block_table[0]
    bm.deallocate(a)
    again = seq_of([1, 1, 1, 1, 5])
    bm.allocate(again)
    assert again.num_cached_tokens == 4 and again.block_table[0] == first


def test_reuse_drops_the_stale_hash_entry():
    """nano-vllm #163: block 1 is reused for the same tokens X after ANOTHER prefix; P1 + X must miss."""
    bm = BlockManager(3, 4)
    p1, p2, x = [1, 1, 1, 1], [2, 2, 2, 2], [7, 7, 7, 7]
    a = seq_of(p1 + x)
    bm.allocate(a)
    assert a.block_table == [0, 1]
    bm.deallocate(a)
    c = seq_of(p2 + x)
    bm.allocate(c)
    assert c.block_table == [2, 1]                                 # block 1 now holds X after P2
    bm.deallocate(c)
    d = seq_of(p1 + x + [3])
    bm.allocate(d)
    assert d.num_cached_tokens == 4 and d.block_table[0] == 0
    for h, block_id in bm.hash_to_block_id.items():
        assert bm.blocks[block_id].hash == h


def test_a_block_taken_straight_from_the_pool_loses_its_entry_too():
    """The pool drops the stale entry itself (its on_evict hook), so a caller that takes blocks past the
    manager (fork / copy-on-write work on the pool) cannot leave one behind."""
    bm = BlockManager(2, 4)
    a = seq_of([1, 1, 1, 1, 2])
    bm.allocate(a)
    bm.deallocate(a)                                               # free queue [1, 0]; block 0 cached
    assert bm.pool.allocate(2) == [1, 0]
    assert bm.hash_to_block_id == {} and bm.blocks[0].hash == -1


def test_deallocate_frees_in_reverse_and_keeps_hashes():
    bm = BlockManager(6, 4)
    a = seq_of(range(12))
    bm.allocate(a)
    table = list(a.block_table)
    bm.deallocate(a)
    assert list(bm.free_block_ids)[-3:] == table[::-1] and a.block_table == []
    assert all(bm.blocks[b].hash != -1 for b in table[:2])


def test_can_allocate_counts_hits_on_running_blocks_as_free():
    bm = BlockManager(4, 4)
    a = seq_of(range(13))                 # 4 blocks, pool full
    bm.allocate(a)
    assert bm.num_free_blocks == 0
    assert not bm.can_allocate(seq_of(range(100, 105)))
    b = seq_of(range(9))                  # 2 hits on used blocks + 1 new block: still needs one
    assert not bm.can_allocate(b)
    bm.deallocate(a)
    assert bm.can_allocate(b)


@pytest.mark.parametrize("block_size", [1, 2, 4])
def test_may_append_adds_a_block_when_needed_and_hashes_full_blocks(block_size):
    bm = BlockManager(40, block_size)
    seq = Sequence([3], block_size)
    bm.allocate(seq)
    for t in range(4 * block_size + 1):
        seq.append_token(10 + t)
        assert bm.can_append(seq)
        bm.may_append(seq)
        assert len(seq.block_table) == seq.num_blocks
        full = seq.num_tokens // block_size
        h = -1
        for i in range(full):
            h = BlockManager.compute_hash(seq.block(i), h)
            assert bm.blocks[seq.block_table[i]].hash == h


def test_random_workload_keeps_refs_consistent_and_ends_all_free():
    rng = random.Random(0)
    bm = BlockManager(24, 4)
    prefixes = [[rng.randrange(50) for _ in range(rng.randint(0, 12))] for _ in range(4)]
    live = []
    for _ in range(400):
        if live and rng.random() < 0.35:
            bm.deallocate(live.pop(rng.randrange(len(live))))
        elif live and rng.random() < 0.5:
            seq = rng.choice(live)
            seq.append_token(rng.randrange(50))
            if bm.can_append(seq):
                bm.may_append(seq)
            else:
                seq.token_ids.pop()
        else:
            seq = seq_of(rng.choice(prefixes) + [rng.randrange(50) for _ in range(rng.randint(1, 6))])
            if bm.can_allocate(seq):
                bm.allocate(seq)
                live.append(seq)
        holders = [b for s in live for b in s.block_table]
        assert [holders.count(b.block_id) for b in bm.blocks] == [b.ref_count for b in bm.blocks]
        assert sorted(bm.free_block_ids) == [b.block_id for b in bm.blocks if b.ref_count == 0]
        for s in live:                    # every cached block really holds the sequence's tokens
            for i in range(s.num_cached_blocks):
                assert bm.blocks[s.block_table[i]].token_ids == s.block(i)
    for s in live:
        bm.deallocate(s)
    assert bm.num_free_blocks == 24 and not bm.used_block_ids


def test_bad_arguments():
    with pytest.raises(ValueError, match="block_size"):
        BlockManager(4, 0)
    bm = BlockManager(4, 4)
    s = seq_of([1, 2])
    bm.allocate(s)
    with pytest.raises(ValueError, match="already has a block table"):
        bm.allocate(s)


def test_num_new_blocks_is_one_exactly_when_the_new_token_opens_a_block():
    """The one "does this token start a new block" test (block managers, serving instance), block_size 1
    included, where nano-vllm's `len(seq) % block_size == 1` never holds."""
    for block_size in (1, 2, 3, 16):
        got = [num_new_blocks(n, block_size) for n in range(1, 40)]
        assert got == [int(p % block_size == 0) for p in range(0, 39)], block_size


LIB = Path(__file__).resolve().parents[2] / "pagedkv_lib"
# the indexes themselves: BlockManager's hash_to_block_id, and the hybrid groups' BlockHashIndex (its own
# insert and drop; the groups register through insert, the pool drops through on_evict)
INDEXES = {"core/block_manager.py", "core/block_hash_index.py"}
# exercise 141's oracle: a hash-level model (no tokens, no Sequence) with a GPU index of its own, graded
# against the learner's version; test_tiered_block_manager holds it equal to TieredBlockManager
OWN_INDEX = {"core/two_tier_cache.py"}


def index_writes(root: Path) -> dict[str, list[str]]:
    """Per module of core/ and engine/: each call of compute_hash or of an index's drop, and each assignment
    to or deletion of an entry of a hash -> block map, as "line: what"."""
    found = {}
    for path in sorted([*root.glob("core/*.py"), *root.glob("engine/*.py")]):
        hits = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("compute_hash", "drop"):
                hits.append(f"{node.lineno}: {node.func.attr}(")
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else []
            for target in targets:
                if isinstance(target, ast.Subscript) and "hash_to_block" in ast.unparse(target.value):
                    hits.append(f"{node.lineno}: {ast.unparse(target)} {type(node).__name__.lower()}")
        found[path.relative_to(root).as_posix()] = hits
    return found


def test_the_index_rules_are_written_once_in_block_manager():
    """A block is hashed and indexed only by BlockManager.register_block and loses its entry only in
    BlockManager._evict (or BlockHashIndex.drop), which the pool calls (BlockPool.on_evict): no other module
    of core/ or engine/ hashes a block, writes an index entry or drops one."""
    writes = index_writes(LIB)
    elsewhere = {m: hits for m, hits in writes.items() if hits and m not in INDEXES | OWN_INDEX}
    assert elsewhere == {}
    assert writes["core/block_manager.py"], "the scan finds nothing: it no longer reads the code"
