"""Notebook 15's pictures: a radix cache step by step (splits, locks, evictions), and two prefix caches' hit
rates against the memory they get.

    radix_frames(ops, num_blocks, block_size)    replay a script on a RadixCache, one RadixFrame per op
    draw_radix_tree(ax, frame)                   the tree of one frame: a box per node, what the op did
    draw_radix_story(fig, frames, picks)         a row of frames in a figure
    plot_hit_rate_sweep(ax, pools, sweep)        hit rate against pool size, one line per manager
An op is ("insert", token_ids), ("match", token_ids, name), ("lock", name), ("unlock", name) or ("evict",
num_blocks), as in exercise 136's scripts; an insert takes its blocks from the pool and gives back those the
tree did not adopt, as a request does. Every number comes from `pagedkv_lib.core.radix_cache` and
`pagedkv_lib.studies.prefix_cache_comparison`; this module only draws.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.radix_cache import RadixCache, TreeNode

MARK_COLORS = {"new": "#6aa84f", "split": "#f6b26b", "hit": "#6fa8dc", "evicted": "#e06666", "": "#eeeeee"}
LOCKED_EDGE = "#1f4e79"
MANAGER_STYLES = {"hash/16": ("#d62728", "o", "-"), "radix/16": ("#9467bd", "s", "--"),
                  "radix/1": ("#2ca02c", "^", "-"), "radix/1 trim": ("#17becf", "v", ":")}

# the story of notebook 15, block size 1: a system prompt, two requests, a split, a lock, evictions
STORY = [
    ("insert", [7, 8, 9, 1, 2]),            # request A: system prompt 7 8 9, then 1 2
    ("insert", [7, 8, 9, 3, 4, 5]),         # request B shares 7 8 9: the node splits
    ("match", [7, 8, 9, 1, 6], "c"),        # request C: hit on 7 8 9 1 (another split), then 6 is new
    ("lock", "c"),                          # C runs: its path is locked
    ("evict", 3),                           # the pool is short: least recently used unlocked leaves go
    ("unlock", "c"),                        # C finished
    ("evict", 3),
]


@dataclass(frozen=True)
class NodeView:
    node_id: int
    parent_id: int                  # -1 for a child of the root
    key: tuple[int, ...]
    value: tuple[int, ...]
    lock_ref: int
    last_access_time: int


@dataclass(frozen=True)
class RadixFrame:
    label: str                      # the op, as code
    nodes: tuple[NodeView, ...]     # the tree after the op (for an eviction: before it, to show what went)
    marks: dict = field(default_factory=dict)   # node_id -> "new", "split", "hit" or "evicted"
    returned: object = None
    num_free: int = 0


def _views(cache: RadixCache, ids: dict[int, int]) -> tuple[NodeView, ...]:
    def ident(node: TreeNode) -> int:
        return ids.setdefault(id(node), len(ids))

    out = []
    for _, node in cache.nodes():
        parent = -1 if node.parent is cache.root_node else ident(node.parent)
        out.append(NodeView(ident(node), parent, tuple(node.key), tuple(node.value), node.lock_ref,
                            node.last_access_time))
    return tuple(out)


def radix_frames(ops, num_blocks: int = 16, block_size: int = 1) -> list[RadixFrame]:
    """Replay `ops` on RadixCache(BlockPool(num_blocks), block_size); a frame after each op (module
    docstring), the first one empty."""
    pool = BlockPool(num_blocks)
    cache = RadixCache(pool, block_size)
    ids = {}
    names = {}
    keep = []
    frames = [RadixFrame("RadixCache(pool, block_size)", (), {}, None, pool.num_free())]
    for op in ops:
        before = _views(cache, ids)
        old = {v.node_id for v in before}
        kind = op[0]
        marks = {}
        ret = None
        if kind == "insert":
            blocks = pool.allocate(len(op[1]) // block_size)
            ret = cache.insert(list(op[1]), blocks)
            pool.free(blocks[: ret // block_size])
            label = f"insert({list(op[1])})  -> {ret} cached"
        elif kind == "match":
            blocks, node = cache.match_prefix(list(op[1]))
            names[op[2]] = node
            keep.append(node)
            ret, label = blocks, f"{op[2]} = match_prefix({list(op[1])})  -> blocks {blocks}"
        elif kind in ("lock", "unlock"):
            (cache.inc_lock_ref if kind == "lock" else cache.dec_lock_ref)(names[op[1]])
            label = f"{'inc' if kind == 'lock' else 'dec'}_lock_ref({op[1]})"
        elif kind == "evict":
            ret = cache.evict(op[1])
            label = f"evict({op[1]})  -> {ret} blocks freed"
        else:
            raise ValueError(f"op: expected insert, match, lock, unlock or evict, got {op!r}")
        after = _views(cache, ids)
        now = {v.node_id for v in after}
        if kind == "evict":
            marks = {i: "evicted" for i in old - now}
            frames.append(RadixFrame(label, before, marks, ret, pool.num_free()))
            continue
        for v in after:
            if v.node_id not in old:
                heads = [c for c in after if c.parent_id == v.node_id and c.node_id in old]
                marks[v.node_id] = "split" if heads else "new"
            elif kind == "match" and v.last_access_time == cache.clock:
                marks[v.node_id] = "hit"
        frames.append(RadixFrame(label, after, marks, ret, pool.num_free()))
    return frames


def _layout(nodes) -> dict[int, tuple[float, int]]:
    """node_id -> (x, depth): leaves side by side in depth-first order, a parent above its children."""
    children: dict[int, list[int]] = {}
    for v in nodes:
        children.setdefault(v.parent_id, []).append(v.node_id)
    pos = {}
    next_x = [0.0]

    def place(i: int, depth: int) -> float:
        kids = children.get(i, [])
        x = sum(place(k, depth + 1) for k in kids) / len(kids) if kids else next_x[0]
        if not kids:
            next_x[0] += 1
        pos[i] = (x, depth)
        return x

    for root_child in children.get(-1, []):
        place(root_child, 1)
    return pos


def _key_text(key: tuple[int, ...]) -> str:
    return " ".join(map(str, key)) if len(key) <= 6 else f"{key[0]} {key[1]} .. {key[-1]} ({len(key)})"


def draw_radix_tree(ax, frame: RadixFrame, title: str | None = None) -> None:
    """Boxes: key on top, blocks and lock count below; fill = what the op did (MARK_COLORS), a thick blue
    edge = locked. The root is the dot at the top."""
    ax.clear()
    ax.set_axis_off()
    pos = _layout(frame.nodes)
    width = max([x for x, _ in pos.values()] + [0]) + 1
    depth = max([d for _, d in pos.values()] + [0]) + 1
    ax.set_xlim(-0.7, max(width, 2) - 0.3)
    ax.set_ylim(depth + 0.5, -0.4)
    root_x = (width - 1) / 2
    ax.plot([root_x], [0], "o", color="black", ms=5)
    for v in frame.nodes:
        x, d = pos[v.node_id]
        px, pd = (root_x, 0) if v.parent_id == -1 else pos[v.parent_id]
        ax.plot([px, x], [pd + (0.22 if pd else 0), d - 0.25], color="#888888", lw=0.8, zorder=1)
    for v in frame.nodes:
        x, d = pos[v.node_id]
        mark = frame.marks.get(v.node_id, "")
        locked = v.lock_ref > 0
        ax.add_patch(FancyBboxPatch((x - 0.44, d - 0.25), 0.88, 0.5, boxstyle="round,pad=0.02",
                                    facecolor=MARK_COLORS[mark], hatch="//" if mark == "evicted" else None,
                                    edgecolor=LOCKED_EDGE if locked else "#555555", lw=2.2 if locked else 0.8,
                                    zorder=2))
        blocks = list(v.value) if len(v.value) <= 5 else f"{len(v.value)} blocks"
        ax.text(x, d - 0.08, _key_text(v.key), ha="center", va="center", fontsize=7, zorder=3)
        ax.text(x, d + 0.12, f"{blocks}" + (f"  lock {v.lock_ref}" if locked else ""), ha="center",
                va="center", fontsize=6, color="#333333", zorder=3)
    ax.set_title(title if title is not None else frame.label, fontsize=8)


def draw_radix_story(fig: Figure, frames: list[RadixFrame], picks) -> None:
    """One panel per index of `picks`, side by side in `fig`, each titled by its op; a legend below."""
    picks = list(picks)
    for i, p in enumerate(picks):
        draw_radix_tree(fig.add_subplot(1, len(picks), i + 1), frames[p],
                        f"{p}. {frames[p].label}".replace("  -> ", "\n-> "))
    handles = [FancyBboxPatch((0, 0), 1, 1, facecolor=c, edgecolor="#555555", label=m)
               for m, c in MARK_COLORS.items() if m]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.subplots_adjust(left=0.01, right=0.99, top=0.8, bottom=0.1, wspace=0.05)


def plot_hit_rate_sweep(ax, pools, sweep: dict[str, list[float]], title: str = "") -> None:
    """Hit rate (%) against the pool size in tokens, one line per manager of `sweep` ({name: [rate]})."""
    for name, rates in sweep.items():
        color, marker, style = MANAGER_STYLES.get(name, ("#333333", "o", "-"))
        ax.plot(list(pools), [100 * r for r in rates], style, color=color, marker=marker, ms=4, label=name)
    ax.set_xlabel("KV pool (tokens)", fontsize=8)
    ax.set_ylabel("hit rate (%)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)
