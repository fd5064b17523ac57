"""Pictures of prefix caching (notebook 07): block tables drawn above the pool, and one block's life.

Builds on `block_map` (the pool, its colours and its stepper); notebook 08 reuses the tables picture.
    manager_frames(num_blocks, block_size, ops)   a BlockManager script, frame by frame (TablesFrame)
    block_state(manager, block)                    free | allocated | shared | released
    draw_tables_figure(fig, frame)                 one frame: each table's logical blocks, arrows to the pool
    TablesStepper(frames)                          block_map.BlockMapStepper with the tables drawn too
    plot_block_lifecycle(ax, frames, block)        one block's state, frame after frame
A script is a list of ops: ("allocate", name, token_ids), ("deallocate", name), ("append", name, token_id)
(postprocess appends the token, then may_append makes room for it). Owner keys: a request's key is its order
of first appearance; SHARED marks a block with ref_count > 1, RELEASED a free block whose hash can still hit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from matplotlib.figure import Figure
from matplotlib.patches import ConnectionPatch, Rectangle

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.viz.block_map import (
    BlockMapStepper,
    Frame,
    bench_cycle,
    draw_block_map,
    owner_colors,
    step_forward,
)

SHARED, RELEASED = 9, 7                       # owner keys (tab10: cyan, grey) for shared / released blocks
STATES = ("free", "allocated", "shared", "released")
POOL_RECT, TABLES_RECT = (0.01, 0.02, 0.98, 0.42), (0.01, 0.52, 0.98, 0.46)    # the stepper's layout
STATIC_POOL_RECT, STATIC_TABLES_RECT = (0.01, 0.02, 0.78, 0.4), (0.01, 0.5, 0.78, 0.38)  # room: title, legend


@dataclass
class TablesFrame(Frame):
    """A block_map Frame plus what the tables picture needs."""

    event: str = ""                                           # a short name for a lifecycle axis
    table_labels: dict = field(default_factory=dict)          # name -> text of each logical block
    table_hits: dict = field(default_factory=dict)            # name -> leading blocks that were cache hits
    states: list = field(default_factory=list)                # [num_blocks] one of STATES
    ref_counts: list = field(default_factory=list)            # [num_blocks]


def block_state(manager: BlockManager, block_id: int) -> str:
    """shared (ref > 1), allocated (ref 1), released (ref 0, its hash still finds it), free."""
    block = manager.blocks[block_id]
    if block.ref_count > 1:
        return "shared"
    if block.ref_count == 1:
        return "allocated"
    found = block.hash != -1 and manager.hash_to_block_id.get(block.hash) == block_id
    return "released" if found else "free"


def token_range(token_ids: list[int]) -> str:
    return str(token_ids[0]) if len(token_ids) == 1 else f"{token_ids[0]}..{token_ids[-1]}"


def manager_frames(num_blocks: int, block_size: int, ops) -> list[TablesFrame]:
    """Replay a script on a fresh BlockManager; one frame before it and one after each op."""
    manager = BlockManager(num_blocks, block_size)
    seqs = {}
    keys = {}
    frames = [_frame(manager, seqs, keys, f"{num_blocks} blocks of {block_size} tokens, all free", "start")]
    for op in ops:
        kind, name = op[0], op[1]
        if kind == "allocate":
            keys.setdefault(name, len(keys))
            if len(keys) > RELEASED:
                raise ValueError(f"ops: at most {RELEASED} requests per script, got {list(keys)}")
            seq = Sequence(list(op[2]), block_size, seq_id=keys[name])
            if manager.can_allocate(seq):
                manager.allocate(seq)
                seqs[name] = seq
                what = (f"{name} arrives ({seq.num_tokens} tokens): table {seq.block_table}, "
                        f"{seq.num_cached_tokens} tokens cached")
            else:
                what = f"{name} arrives ({seq.num_tokens} tokens): can_allocate is False, it waits"
            event = f"{name} arrives"
        elif kind == "deallocate":
            seq = seqs.pop(name)
            freed = seq.block_table[::-1]
            manager.deallocate(seq)
            what = f"{name} finishes: its blocks {freed} lose a reference, last block first"
            event = f"{name} done"
        elif kind == "append":
            seq = seqs[name]
            seq.append_token(op[2])
            manager.may_append(seq)
            what = f"{name} appends token {op[2]}: {len(seq)} tokens, table {seq.block_table}"
            event = f"{name} +1"
        else:
            raise ValueError(f"ops: expected allocate / deallocate / append, got {op!r}")
        frames.append(_frame(manager, seqs, keys, what, event))
    return frames


def _frame(manager: BlockManager, seqs: dict, keys: dict, description: str, event: str) -> TablesFrame:
    n = len(manager.blocks)
    owners, labels = [None] * n, [""] * n
    states = [block_state(manager, b) for b in range(n)]
    holder = {b: (name, i) for name, s in seqs.items() for i, b in enumerate(s.block_table)}
    queue = list(manager.free_block_ids)
    for b, block in enumerate(manager.blocks):
        if states[b] == "shared":
            owners[b], labels[b] = SHARED, f"ref {block.ref_count}"
        elif states[b] == "allocated":
            name, i = holder[b]
            owners[b], labels[b] = keys[name], f"{name}[{i}]"
        else:
            owners[b], labels[b] = (RELEASED if states[b] == "released" else None), f"q{queue.index(b)}"
        if block.hash != -1:
            labels[b] += f"\n#{block.hash:016x}"[:6]
    names = {keys[name]: name for name in keys}
    names.update({SHARED: "shared", RELEASED: "released"})
    return TablesFrame(
        description, owners, labels, queue, {k: list(s.block_table) for k, s in seqs.items()}, names,
        event=event,
        table_labels={k: [token_range(s.block(i)) for i in range(s.num_blocks)] for k, s in seqs.items()},
        table_hits={k: s.num_cached_blocks for k, s in seqs.items()},
        states=states, ref_counts=[blk.ref_count for blk in manager.blocks])


def draw_tables(tables_ax, pool_ax, frame: TablesFrame, keys: dict | None = None) -> list:
    """Each table of `frame` as a row of logical blocks in `tables_ax` (cleared first), an arrow from each
    to its physical block in `pool_ax` (drawn first by `draw_block_map`), passing under the boxes. Returns
    the arrows. keys: table name -> owner key (default: from frame.names)."""
    keys = keys or {name: k for k, name in frame.names.items()}
    arrows = []
    tables_ax.clear()
    tables_ax.axis("off")
    rows = max(len(frame.tables), 1)
    width = max([len(pool_ax.patches)] + [len(t) for t in frame.tables.values()])
    tables_ax.set_xlim(-1.0, min(width, 16))
    tables_ax.set_ylim(-0.35, rows)
    for r, (name, table) in enumerate(frame.tables.items()):
        y = rows - 1 - r
        color = owner_colors([keys.get(name, 0)])[0]
        tables_ax.text(-0.15, y + 0.3, name, ha="right", va="center", fontsize=9, fontweight="bold")
        texts = frame.table_labels.get(name, [""] * len(table))
        for i, (blk, text) in enumerate(zip(table, texts)):
            hit = i < frame.table_hits.get(name, 0)
            tables_ax.add_patch(Rectangle((i, y), 0.92, 0.6, facecolor=(*color[:3], 0.35), edgecolor="black",
                                          lw=2.0 if hit else 0.6))
            tables_ax.text(i + 0.46, y + 0.3, text, ha="center", va="center", fontsize=7,
                           fontweight="bold" if hit else "normal")
            target = pool_ax.patches[blk]
            x0, y0 = target.get_xy()
            arrow = ConnectionPatch((i + 0.46, y), (x0 + target.get_width() / 2, y0 + target.get_height()),
                                    coordsA=tables_ax.transData, coordsB=pool_ax.transData, arrowstyle="-|>",
                                    mutation_scale=8, color=color, lw=0.9, zorder=0.5, clip_on=False)
            tables_ax.add_artist(arrow)
            arrows.append(arrow)
    return arrows


def draw_tables_figure(fig: Figure, frame: TablesFrame, title: str | None = None) -> Figure:
    """One frame on `fig` (e.g. plt.figure(figsize=(8, 2.8), dpi=80)): the block tables on top (bold = a
    prefix-cache hit), arrows into the pool below, a legend on the right."""
    pool_ax, tables_ax = fig.add_axes(STATIC_POOL_RECT), fig.add_axes(STATIC_TABLES_RECT)
    draw_block_map(pool_ax, frame.owners, labels=frame.labels, names={**frame.names, None: "free"})
    draw_tables(tables_ax, pool_ax, frame)
    tables_ax.set_title(title or frame.description, fontsize=9, loc="left")
    return fig


class TablesStepper(BlockMapStepper):
    """block_map's stepper ("back" / "step" over frames) with each frame's block tables above the pool.

    CSS classes: BlockMapStepper's (pagedkv-step, pagedkv-back, pagedkv-step-description, pagedkv-block-map).
    """

    def __init__(self, frames: list[TablesFrame], figsize=(8, 2.8), dpi=80):
        super().__init__(frames, figsize=figsize, dpi=dpi)

    def show(self, i: int) -> None:
        if not hasattr(self, "tables_ax"):                # first call, from BlockMapStepper.__init__
            self.ax.set_position(POOL_RECT)
            self.tables_ax = self.fig.add_axes(TABLES_RECT)
        frame = self.frames[max(0, min(i, len(self.frames) - 1))]
        draw_block_map(self.ax, frame.owners, labels=frame.labels)   # the arrows need the blocks' places
        self.arrows = draw_tables(self.tables_ax, self.ax, frame)
        super().show(i)


def plot_block_lifecycle(ax, frames: list[TablesFrame], block: int):
    """Physical block `block`'s state in each frame (free, allocated, shared, released) and ref count, on
    `ax` (e.g. plt.subplots(figsize=(8, 2.4), dpi=80)); the point's colour is the block's owner colour."""
    xs = range(len(frames))
    ys = [STATES.index(f.states[block]) for f in frames]
    ax.plot(xs, ys, color="black", lw=1, zorder=1)
    colors = owner_colors([f.owners[block] for f in frames])
    ax.scatter(xs, ys, c=colors, s=160, edgecolors="black", zorder=2)
    for x, y, f in zip(xs, ys, frames):
        ax.annotate(f"ref {f.ref_counts[block]}", (x, y), textcoords="offset points", xytext=(0, 9),
                    ha="center", fontsize=7)
    ax.set_yticks(range(len(STATES)), STATES, fontsize=8)
    ax.set_ylim(len(STATES) - 0.4, -0.6)
    ax.set_xticks(list(xs), [f.event for f in frames], rotation=25, ha="right", fontsize=7)
    ax.set_xlim(-0.5, len(frames) - 0.5)
    ax.set_title(f"the life of physical block {block}", fontsize=9, loc="left")
    return colors


SYSTEM_PROMPT = list(range(100, 108))          # 8 tokens: two full blocks at block size 4
STORY = [("allocate", "A", SYSTEM_PROMPT + [201, 202, 203]), ("allocate", "B", SYSTEM_PROMPT + [301, 302]),
         ("deallocate", "A"), ("deallocate", "B"), ("allocate", "C", SYSTEM_PROMPT + [401]),
         ("deallocate", "C"), ("allocate", "D", list(range(500, 530))), ("deallocate", "D")]

BENCH_CALLBACKS = {"prefix_cache.TablesStepper.step": bench_cycle(
    lambda: TablesStepper(manager_frames(8, 4, STORY)), step_forward)}
