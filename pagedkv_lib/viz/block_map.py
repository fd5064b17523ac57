"""The physical blocks of a pool, coloured by owner: a picture function and a stepper widget.

Reusable by every notebook that shows blocks (02 block pool, 07 prefix caching, 08 copy-on-write):
    draw_block_map(ax, owners, labels=..., names=..., title=...)  one picture; owners[b]: a key or None
    pool_frames(num_blocks, ops)                                    a BlockPool script, frame by frame
    BlockMapStepper(frames)                                         "back" / "step" buttons over frames
An owner key is any int (a request, or a ref count); None means free (light grey). Colours come from
`owner_colors`; `figure_png` turns a figure into the PNG a widget shows. Widgets draw on a
`matplotlib.figure.Figure` (no pyplot), so nothing pops up on its own in a notebook.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

import matplotlib as mpl
from matplotlib.colors import to_hex, to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pagedkv_lib.core.block_pool import BlockPool

FREE_COLOR = to_rgba("#e4e4e4")
PALETTE = [to_rgba(c) for c in mpl.colormaps["tab10"].colors]


def owner_colors(owners) -> list[tuple]:
    """One RGBA per entry: PALETTE[key % 10] for an owner key, FREE_COLOR for None (or -1)."""
    return [FREE_COLOR if o is None or o < 0 else PALETTE[o % len(PALETTE)] for o in owners]


def figure_png(fig: Figure) -> bytes:
    """The PNG bytes of a figure at its own dpi (what an ipywidgets.Image shows)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, pil_kwargs={"compress_level": 1})  # fast over small
    return buf.getvalue()


def picture_widget():
    """An ipywidgets.Image for `figure_png` bytes, shown at its own size: in a VBox (a flex column) a plain
    Image is stretched to the output's width and blurred; `align_self` keeps it at the figure's pixels."""
    import ipywidgets as widgets

    return widgets.Image(format="png", layout=widgets.Layout(align_self="flex-start"))


def legend_html(names, keys=None) -> str:
    """A legend for a widget's HTML line: a coloured square and a name per owner key (default 0, 1, ...)."""
    keys = range(len(names)) if keys is None else keys
    return " ".join(
        f'<span style="background:{to_hex(c)};border:1px solid #333;padding:0 7px">&nbsp;</span> {name}'
        for name, c in zip(names, owner_colors(keys), strict=True))


def draw_block_map(ax, owners, labels=None, names=None, title=None, ncols=None) -> list[tuple]:
    """Draw physical blocks 0..len(owners)-1 as squares in rows of `ncols`, coloured by owner; block b shows
    its id and labels[b]. names maps an owner key to its legend text. Called again on the same axes with as
    many blocks, it recolours in place (fast enough for a stepper). Returns the face colour of every block."""
    n = len(owners)
    colors = owner_colors(owners)
    text = [str(b) if labels is None or not labels[b] else f"{b}\n{labels[b]}" for b in range(n)]
    if len(ax.patches) == n and len(ax.texts) == n:
        for patch, t, color, s in zip(ax.patches, ax.texts, colors, text, strict=True):
            patch.set_facecolor(color)
            t.set_text(s)
    else:
        ax.clear()
        ncols = ncols or min(max(n, 1), 16)
        nrows = -(-n // ncols)
        for b, (color, s) in enumerate(zip(colors, text, strict=True)):
            r, c = divmod(b, ncols)
            y = nrows - 1 - r
            ax.add_patch(Rectangle((c, y), 0.92, 0.85, facecolor=color, edgecolor="black", lw=0.8))
            ax.text(c + 0.46, y + 0.42, s, ha="center", va="center", fontsize=8, linespacing=1.6)
        ax.set_xlim(-0.1, ncols)
        ax.set_ylim(-0.1, nrows)
        ax.set_aspect("equal")
        ax.axis("off")
    if names:
        handles = [Rectangle((0, 0), 1, 1, facecolor=owner_colors([k])[0], edgecolor="black", lw=0.5)
                   for k in names]
        ax.legend(handles, list(names.values()), loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize=8, frameon=False)
    ax.set_title(title or "", fontsize=9, loc="left")
    return colors


@dataclass
class Frame:
    """One moment of a block pool: what just happened, who owns each block, the free queue."""

    description: str
    owners: list            # [num_blocks] owner key or None
    labels: list            # [num_blocks] text inside each block
    free_queue: list[int]   # block ids, front first
    tables: dict = field(default_factory=dict)  # name -> block table
    names: dict = field(default_factory=dict)   # owner key -> name, for the legend


def pool_frames(num_blocks: int, ops) -> list[Frame]:
    """Replay ops on a fresh `BlockPool`: ("allocate", name, n) gives `name` n blocks, ("free", name)
    frees its table. Owner keys are names in order of first appearance; free blocks are labelled with
    their place in the free queue (q0 is allocated next)."""
    pool = BlockPool(num_blocks)
    tables = {}
    keys = {}
    frames = [_frame(pool, tables, keys, f"{num_blocks} blocks, all free")]
    for op in ops:
        kind, name = op[0], op[1]
        keys.setdefault(name, len(keys))
        if kind == "allocate":
            got = pool.allocate(op[2])
            if got is not None:
                tables[name] = got
            what = f"{name}: allocate({op[2]}) -> {got}" + (
                "" if got is not None else f" ({pool.num_free()} free, nothing changes)")
        elif kind == "free":
            pool.free(tables[name])
            what = f"{name}: free({tables.pop(name)})"
        else:
            raise ValueError(f"ops: expected ('allocate', name, n) or ('free', name), got {op!r}")
        frames.append(_frame(pool, tables, keys, what))
    return frames


def _frame(pool: BlockPool, tables: dict, keys: dict, description: str) -> Frame:
    owners, labels = [None] * pool.num_blocks, [""] * pool.num_blocks
    for name, table in tables.items():
        for i, b in enumerate(table):
            owners[b], labels[b] = keys[name], f"{name}[{i}]"
    queue = list(pool.free_block_ids)
    for q, b in enumerate(queue):
        labels[b] = f"q{q}"
    return Frame(description, owners, labels, queue, {k: list(v) for k, v in tables.items()},
                 {key: name for name, key in keys.items()})


class BlockMapStepper:
    """Buttons "back" and "step" over a list of Frames; the picture is an Image, the text an HTML.

    CSS classes for browser tests: pagedkv-step, pagedkv-back, pagedkv-step-description, pagedkv-block-map.
    """

    def __init__(self, frames: list[Frame], figsize=(8, 1.3), dpi=80):
        import ipywidgets as widgets

        self.frames = frames
        self.index = 0
        self.fig = Figure(figsize=figsize, dpi=dpi)
        self.ax = self.fig.add_axes((0.01, 0.02, 0.98, 0.96))
        self.step_button = widgets.Button(description="step", icon="step-forward")
        self.back_button = widgets.Button(description="back", icon="step-backward")
        self.text = widgets.HTML()
        self.image = picture_widget()
        self.step_button.add_class("pagedkv-step")
        self.back_button.add_class("pagedkv-back")
        self.text.add_class("pagedkv-step-description")
        self.image.add_class("pagedkv-block-map")
        self.step_button.on_click(lambda _: self.step())
        self.back_button.on_click(lambda _: self.back())
        buttons = widgets.HBox([self.back_button, self.step_button])
        self.widget = widgets.VBox([buttons, self.text, self.image])
        self.colors: list[tuple] = []
        self.show(0)

    @property
    def owners(self) -> list:
        return self.frames[self.index].owners

    def describe(self, i: int | None = None) -> str:
        i = self.index if i is None else i
        f = self.frames[i]
        tables = ", ".join(f"{k}={v}" for k, v in f.tables.items()) or "none"
        return (f"step {i}/{len(self.frames) - 1}: {f.description} | free queue {f.free_queue} | "
                f"tables {tables}")

    def show(self, i: int) -> None:
        self.index = max(0, min(i, len(self.frames) - 1))
        f = self.frames[self.index]
        self.colors = draw_block_map(self.ax, f.owners, labels=f.labels)
        legend = legend_html(list(f.names.values()) + ["free"], list(f.names) + [None])
        self.text.value = f"<code>{self.describe()}</code><br>{legend}"
        self.image.value = figure_png(self.fig)
        self.step_button.disabled = self.index == len(self.frames) - 1
        self.back_button.disabled = self.index == 0

    def step(self) -> None:
        self.show(self.index + 1)

    def back(self) -> None:
        self.show(self.index - 1)


WORKED_EXAMPLE = [("allocate", "A", 3), ("allocate", "B", 2), ("free", "A"), ("allocate", "C", 4),
                  ("allocate", "D", 3), ("free", "B")]


def bench_cycle(make, apply, values=(None,)):
    """A zero-argument callable for benchmarks/bench_notebooks.py: builds its widget with `make()` on the
    first call, then each call does `apply(widget, value)` with the next of `values` (cycling)."""
    state = {"i": 0}

    def call():
        if "x" not in state:
            state["x"] = make()
        state["i"] = (state["i"] + 1) % len(values)
        apply(state["x"], values[state["i"]])

    return call


def step_forward(stepper, _value=None) -> None:
    """Show a stepper's next frame, wrapping around (the `apply` of a stepper's bench_cycle)."""
    stepper.show((stepper.index + 1) % len(stepper.frames))


BENCH_CALLBACKS = {"block_map.BlockMapStepper.step": bench_cycle(
    lambda: BlockMapStepper(pool_frames(8, WORKED_EXAMPLE)), step_forward)}
