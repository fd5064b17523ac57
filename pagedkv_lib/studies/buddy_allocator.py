"""A binary buddy allocator over `capacity` token slots: the allocator the paper assumes for Orca.

Exports: `BuddyAllocator`.

The paper (§6.1 p. 10): "We assume Orca uses the buddy allocation algorithm to determine the memory address to
store KV cache." A buddy allocator hands out blocks of 2^k slots; a free block of 2^j > 2^k is split in halves
("buddies") until one has the size asked for, and a freed block merges with its buddy whenever both are free.
A capacity that is not a power of two (15,728 slots: 12 GB of OPT-13B KV at 800 KiB per token, Table 1 p. 9)
is cut into power-of-two regions, largest first (8192 + 4096 + 2048 + 1024 + 256 + 64 + 32 + 16); blocks never
merge across regions. Every region starts at a multiple of its size, so a block's buddy is offset ^ size.
Allocation takes the lowest address among the smallest free blocks that fit; each operation is
O(log capacity).
"""
from __future__ import annotations

import heapq
from bisect import bisect_right

from pagedkv_lib.core.validation import check_positive_int


class BuddyAllocator:
    """alloc(size) -> offset or None; free(offset). Sizes are rounded up to a power of two."""

    def __init__(self, capacity: int):
        check_positive_int("capacity", capacity)
        self.capacity = capacity
        self.free_sets: dict[int, set[int]] = {}      # order -> offsets of free blocks of 2^order slots
        self.free_heaps: dict[int, list[int]] = {}    # order -> the same offsets, a heap with stale entries
        self.order_of: dict[int, int] = {}            # offset of an allocated block -> its order
        self.region_base: list[int] = []              # [R] start of each region, ascending
        self.region_order: list[int] = []             # [R] log2 of its size
        base = 0
        for order in range(capacity.bit_length() - 1, -1, -1):
            if capacity >> order & 1:
                self.region_base.append(base)
                self.region_order.append(order)
                self._push(order, base)
                base += 1 << order
        self.num_free = capacity

    def _push(self, order: int, offset: int) -> None:
        self.free_sets.setdefault(order, set()).add(offset)
        heapq.heappush(self.free_heaps.setdefault(order, []), offset)

    def _pop_lowest(self, order: int) -> int | None:
        heap, live = self.free_heaps.get(order), self.free_sets.get(order)
        while heap:
            offset = heapq.heappop(heap)
            if offset in live:
                live.remove(offset)
                return offset
        return None

    def largest_free(self) -> int:
        """Slots of the largest free block: the largest request that would fit now."""
        orders = [k for k, s in self.free_sets.items() if s]
        return 1 << max(orders) if orders else 0

    def alloc(self, size: int) -> int | None:
        """Offset of a free block of next_pow2(size) slots, or None when no free block is large enough."""
        check_positive_int("size", size)
        want = (size - 1).bit_length()                 # order of next_pow2(size)
        for order in range(want, max(self.region_order) + 1):
            offset = self._pop_lowest(order)
            if offset is None:
                continue
            while order > want:                        # split: keep the lower half, free the upper
                order -= 1
                self._push(order, offset + (1 << order))
            self.order_of[offset] = want
            self.num_free -= 1 << want
            return offset
        return None

    def free(self, offset: int) -> None:
        """Release the block at `offset`, merging it with its free buddies inside its region."""
        if offset not in self.order_of:
            raise ValueError(f"offset: expected the offset of an allocated block, got {offset}")
        order = self.order_of.pop(offset)
        self.num_free += 1 << order
        top = self.region_order[bisect_right(self.region_base, offset) - 1]
        while order < top:
            buddy = offset ^ (1 << order)
            live = self.free_sets.get(order)
            if not live or buddy not in live:
                break
            live.remove(buddy)                         # its heap entry goes stale
            offset, order = min(offset, buddy), order + 1
        self._push(order, offset)
