"""Pictures of fork and copy-on-write (notebook 08): a BlockPool script replayed frame by frame.

    cow_frames(num_blocks, block_size, ops)   the script on a BlockPool and a small kv_cache, as TablesFrames
Draw a frame with `prefix_cache.draw_tables_figure`, step through them with `prefix_cache.TablesStepper`.
A script is a list of ops: ("allocate", name, num_tokens) a prompt's blocks; ("fork", parent, child) a child
sharing the parent's table; ("append", name) make room for one more token with `append_slot` (a new block,
a copy-on-write, or neither); ("free", name) drop the table's references. Logical blocks are labelled with
the positions they hold.
"""
from __future__ import annotations

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.copy_on_write import append_slot
from pagedkv_lib.core.kv_cache import allocate_kv_cache
from pagedkv_lib.viz.block_map import bench_cycle, step_forward
from pagedkv_lib.viz.prefix_cache import SHARED, TablesFrame, TablesStepper


def cow_frames(num_blocks: int, block_size: int, ops) -> list[TablesFrame]:
    """Replay a fork / copy-on-write script; one frame before it and one after each op."""
    pool = BlockPool(num_blocks)
    kv_cache = allocate_kv_cache(1, num_blocks, block_size, 1, 1, fill=0.0)   # [2, 1, N, S, 1, 1]
    tables = {}
    lens = {}
    keys = {}
    start = f"{num_blocks} free blocks of {block_size} tokens"
    frames = [_frame(pool, tables, lens, keys, block_size, start, "start")]
    for op in ops:
        kind, name = op[0], op[1]
        if kind == "allocate":
            keys.setdefault(name, len(keys))
            got = pool.allocate(-(-op[2] // block_size))
            if got is None:
                raise ValueError(f"ops: {op!r} needs more than the {pool.num_free()} free blocks")
            tables[name], lens[name] = got, op[2]
            what, event = f"{name}: a {op[2]}-token prompt in blocks {got}", f"{name} prompt"
        elif kind == "fork":
            child = op[2]
            keys.setdefault(child, len(keys))
            tables[child], lens[child] = pool.fork(tables[name]), lens[name]
            refs = [pool.ref_count(b) for b in tables[child]]
            what = f"fork {name} -> {child}: the same blocks {tables[child]}, one reference more (now {refs})"
            event = f"fork {child}"
        elif kind == "append":
            table, n = tables[name], lens[name]
            before, shared = list(table), table[-1] if table else None
            ref = pool.ref_count(shared) if shared is not None and n % block_size else 0
            slot = append_slot(pool, kv_cache, table, n, block_size)
            if slot is None:
                what = f"{name}: no free block for position {n}, nothing changes"
            else:
                lens[name] = n + 1
                if len(table) > len(before):
                    how = f"position {n} starts a block: new block {table[-1]}"
                elif table != before:
                    how = (f"position {n} is in shared block {shared} (ref {ref}): copy it to new block "
                           f"{table[-1]}, write there, block {shared} drops to ref {pool.ref_count(shared)}")
                else:
                    how = f"position {n} is in block {table[-1]}, which only {name} holds: write in place"
                what = f"{name} appends: {how}; slot {slot}"
            event = f"{name} +1"
        elif kind == "free":
            pool.free(tables.pop(name))
            del lens[name]
            what, event = f"{name} finishes: its blocks lose one reference each", f"{name} done"
        else:
            raise ValueError(f"ops: expected allocate / fork / append / free, got {op!r}")
        frames.append(_frame(pool, tables, lens, keys, block_size, what, event))
    return frames


def _frame(pool: BlockPool, tables: dict, lens: dict, keys: dict, block_size: int, description: str,
           event: str) -> TablesFrame:
    n = pool.num_blocks
    owners, labels, states = [None] * n, [""] * n, ["free"] * n
    holder = {b: (name, i) for name, t in tables.items() for i, b in enumerate(t)}
    queue = list(pool.free_block_ids)
    for b in range(n):
        ref = pool.ref_count(b)
        if ref > 1:
            owners[b], labels[b], states[b] = SHARED, f"ref {ref}", "shared"
        elif ref == 1:
            name, i = holder[b]
            owners[b], labels[b], states[b] = keys[name], f"{name}[{i}]", "allocated"
        else:
            labels[b] = f"q{queue.index(b)}"
    names = {keys[name]: name for name in keys}
    names[SHARED] = "shared"
    table_labels = {}
    for name, t in tables.items():
        spans = [(i * block_size, min(lens[name], (i + 1) * block_size) - 1) for i in range(len(t))]
        table_labels[name] = [f"{lo}..{hi}" if hi > lo else str(lo) for lo, hi in spans]
    return TablesFrame(description, owners, labels, queue, {k: list(v) for k, v in tables.items()}, names,
                       event=event, table_labels=table_labels, states=states,
                       ref_counts=[pool.ref_count(b) for b in range(n)])


PARALLEL_SAMPLING = [("allocate", "P", 10), ("fork", "P", "S1"), ("fork", "P", "S2"),
                     ("append", "S1"), ("append", "S2"), ("append", "P"),
                     ("append", "S1"), ("append", "S1"), ("free", "S2")]


BENCH_CALLBACKS = {"sharing.TablesStepper.step": bench_cycle(
    lambda: TablesStepper(cow_frames(8, 4, PARALLEL_SAMPLING)), step_forward)}
