"""CpuBlockStore against a brute-force LRU: a list of (hash, slot, last use) scanned for the oldest."""
from __future__ import annotations

import random

import pytest

from pagedkv_lib.core.cpu_block_store import CpuBlockStore


class BruteForceStore:
    def __init__(self, n: int):
        self.n, self.entries, self.clock, self.pins = n, [], 0, [0] * n   # entries: [hash, slot, last use]
        self.never_used = list(range(n))

    def lookup(self, h):
        return next((e[1] for e in self.entries if e[0] == h), None)

    def touch(self, slot):
        self.clock += 1
        next(e for e in self.entries if e[1] == slot)[2] = self.clock

    def store(self, h):
        self.clock += 1
        if self.never_used:
            slot = self.never_used.pop(0)
        else:
            unpinned = [e for e in self.entries if self.pins[e[1]] == 0]
            if not unpinned:
                return None
            oldest = min(unpinned, key=lambda e: e[2])
            self.entries.remove(oldest)
            slot = oldest[1]
        self.entries.append([h, slot, self.clock])
        return slot

    def order(self):
        return [(e[0], e[1]) for e in sorted(self.entries, key=lambda e: e[2])]


@pytest.mark.parametrize("seed", range(6))
def test_cpu_block_store_matches_a_brute_force_lru(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 6)
    store, ref = CpuBlockStore(n), BruteForceStore(n)
    for _ in range(300):
        h = rng.randrange(12)
        op = rng.choice(["store", "store", "touch", "pin", "unpin"])
        slot = ref.lookup(h)
        assert store.lookup(h, [h]) == slot
        if op == "store" and slot is None:
            assert store.store(h, [h]) == ref.store(h)
        elif op == "touch" and slot is not None:
            store.touch(slot)
            ref.touch(slot)
        elif op == "pin" and slot is not None:
            store.pin(slot)
            ref.pins[slot] += 1
        elif op == "unpin" and slot is not None and ref.pins[slot]:
            store.unpin(slot)
            ref.pins[slot] -= 1
        assert list(store.hash_to_slot.items()) == ref.order()


def test_cpu_block_store_hit_needs_the_token_ids():
    store = CpuBlockStore(2)
    slot = store.store(7, [1, 2])
    assert store.lookup(7, [1, 2]) == slot and store.lookup(7, [1, 3]) is None


def test_cpu_block_store_refuses_a_second_copy_and_an_unpin_without_a_pin():
    store = CpuBlockStore(2)
    slot = store.store(7, [1])
    with pytest.raises(ValueError, match="already in slot"):
        store.store(7, [1])
    with pytest.raises(ValueError, match="no load in flight"):
        store.unpin(slot)


def test_cpu_block_store_never_evicts_a_pinned_slot():
    store = CpuBlockStore(1)
    store.pin(store.store(1, [1]))
    assert store.store(2, [2]) is None and store.lookup(1, [1]) == 0
