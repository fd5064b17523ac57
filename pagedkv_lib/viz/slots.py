"""Pictures of cache rows (slots): which a step writes (notebook 03), which a decode step reads (04).

A slot is a row of `k_cache.view(num_blocks * block_size, H_kv * D)`; slot s lives in physical block
s // block_size. `draw_cache_rows` paints every slot: dark = marked (written / read this step), light =
holds a token, pale = allocated to a sequence but empty (the last block's tail), grey = free block.
    walk_example(block_size)          notebook 03's prefill + two decode steps, as WalkSteps
    SlotWalkExplorer                  block-size and step selectors over that walk
    DecodeReadExplorer                block-size selector: the rows one decode step reads
Slots always come from `pagedkv_lib.core.slot_mapping`; colours from `block_map.owner_colors`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from pagedkv_lib.core.block_manager import num_new_blocks
from pagedkv_lib.core.slot_mapping import compute_slot_mapping, slot_mapping_for
from pagedkv_lib.testing.paged_batch import make_paged_batch
from pagedkv_lib.viz.block_map import (
    FREE_COLOR,
    bench_cycle,
    figure_png,
    legend_html,
    owner_colors,
    picture_widget,
)

MAX_CELL_LINES = 512                                # thin lines between cells up to this many cells
FREE, ALLOCATED, FILLED, MARKED = 0, 1, 2, 3       # slot states, darkest last
ALPHA = np.array([0.0, 0.12, 0.4, 1.0])           # share of the owner's colour over white, per state


def slot_states(tables, lens, num_blocks: int, block_size: int, marked=()):
    """Owner of each block (index of its table, -1 free) [N], and the state of each slot [N * S]."""
    block_owner = np.full(num_blocks, -1)                                       # [N]
    state = np.full(num_blocks * block_size, FREE)                              # [N * S]
    for k, (table, n) in enumerate(zip(tables, lens, strict=True)):
        for b in table:
            block_owner[b] = k
            state[b * block_size:(b + 1) * block_size] = ALLOCATED
        state[slot_mapping_for(table, list(range(n)), block_size)] = FILLED
    state[list(marked)] = MARKED
    return block_owner, state


def cache_rows_image(block_owner, state, block_size: int, width: int) -> np.ndarray:
    """RGB of every slot, row-major with `width` slots per row: [rows, width, 3] (white past the end)."""
    num_slots = len(state)
    owner = np.repeat(np.asarray(block_owner), block_size)                      # [N * S]
    palette = np.array([c[:3] for c in owner_colors(range(10))])                # [10, 3]
    shade = 1 - ALPHA[np.asarray(state)][:, None] * (1 - palette[owner % 10])   # [N * S, 3]
    rgb = np.ones((-(-num_slots // width) * width, 3))                          # [rows * width, 3]
    rgb[:num_slots] = np.where(owner[:, None] < 0, np.array(FREE_COLOR[:3]), shade)
    return rgb.reshape(-1, width, 3)                                            # [rows, width, 3]


def block_edges(num_slots: int, block_size: int, width: int) -> list:
    """Line segments between cells of different blocks, in imshow coordinates (cell centres on integers)."""
    rows = -(-num_slots // width)
    blk = np.full(rows * width, -1)
    blk[:num_slots] = np.arange(num_slots) // block_size
    blk = blk.reshape(rows, width)                                              # [rows, width]
    r, c = np.nonzero(blk[:, 1:] != blk[:, :-1])                                # edges inside a row
    segs = [[(x + 0.5, y - 0.5), (x + 0.5, y + 0.5)] for y, x in zip(r, c, strict=True)]
    r, c = np.nonzero(blk[1:, :] != blk[:-1, :])                                # edges between rows
    return segs + [[(x - 0.5, y + 0.5), (x + 0.5, y + 0.5)] for y, x in zip(r, c, strict=True)]


def draw_cache_rows(ax, block_owner, state, block_size: int, width: int | None = None, names=None,
                    title=None, annotate: str | None = "all") -> np.ndarray:
    """Paint slots row-major, `width` per row (default: one physical block per row), black lines between
    blocks; write the slot number in every cell (annotate="all"), in dark cells only ("marked"), or none.
    Called again on the same axes it updates its artists in place (fast enough for a slider).
    Returns the RGB image [rows, width, 3] (what a test compares)."""
    width = width or block_size
    img = cache_rows_image(block_owner, state, block_size, width)               # [rows, width, 3]
    rows = img.shape[0]
    cells = [] if rows * width > MAX_CELL_LINES else (
        [[(x - 0.5, -0.5), (x - 0.5, rows - 0.5)] for x in range(1, width)]
        + [[(-0.5, y - 0.5), (width - 0.5, y - 0.5)] for y in range(1, rows)])
    if not ax.images:
        ax.imshow(img, aspect="auto", interpolation="nearest")
        ax.add_collection(LineCollection([], colors="white", linewidths=0.6))   # between cells
        ax.add_collection(LineCollection([], colors="black", linewidths=1.4))   # between blocks
        ax.set_xticks([])
        ax.set_yticks([])
    ax.images[0].set_data(img)
    ax.images[0].set_extent((-0.5, width - 0.5, rows - 0.5, -0.5))
    ax.collections[0].set_segments(cells)
    ax.collections[1].set_segments(block_edges(len(state), block_size, width))
    for t in list(ax.texts):
        t.remove()
    marked = np.flatnonzero(np.asarray(state) == MARKED)
    shown = {"all": range(len(state)), "marked": marked}.get(annotate, [])
    for s in shown:
        ax.text(s % width, s // width, str(s), ha="center", va="center", fontsize=6 if width > 8 else 8,
                fontweight="bold" if state[s] == MARKED else "normal")
    if names:
        for k, name in enumerate(names):
            ax.plot([], [], "s", color=owner_colors([k])[0], label=name)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_title(title or "", fontsize=9, loc="left")
    return img


def format_slots(slots) -> str:
    """[28, 29, 30, 31, 8, 9] -> '[28..31, 8, 9]': runs of 3 or more consecutive slots shortened."""
    slots = list(slots)
    parts = []
    i = 0
    while i < len(slots):
        j = i
        while j + 1 < len(slots) and slots[j + 1] == slots[j] + 1:
            j += 1
        parts += [f"{slots[i]}..{slots[j]}"] if j - i >= 2 else [str(s) for s in slots[i:j + 1]]
        i = j + 1
    return "[" + ", ".join(parts) + "]"


WALK_NUM_BLOCKS = 8
WALK_TABLES = {"A": [7, 2], "B": [5]}   # block tables after the prefill is scheduled
WALK_NEW_BLOCK = 0                     # the free block handed to B when it needs one


@dataclass
class WalkStep:
    name: str
    positions: dict      # seq -> positions computed this step
    slot_mapping: list   # this step's tokens only, A's then B's
    context_lens: dict   # seq -> tokens in the cache after this step (what attention reads)
    new_block: dict      # seq -> block appended this step, or None
    tables: dict         # seq -> block table after this step


def walk_example(block_size: int = 4) -> list[WalkStep]:
    """Notebook 03's walk: A holds block_size + 2 tokens, B block_size - 1 (6 and 3 at block size 4);
    a prefill, then two decode steps that add one token each."""
    if block_size < 2:
        raise ValueError(f"block_size: expected >= 2 (B holds block_size - 1 tokens), got {block_size}")
    lens = {"A": block_size + 2, "B": block_size - 1}
    tables = {k: list(v) for k, v in WALK_TABLES.items()}
    slots = [s for k in lens for s in compute_slot_mapping(tables[k], 0, lens[k], block_size)]
    steps = [WalkStep("prefill", {k: list(range(n)) for k, n in lens.items()}, slots, dict(lens),
                      {k: None for k in lens}, {k: list(v) for k, v in tables.items()})]
    for d in (1, 2):
        new_block = {}
        for k in lens:
            lens[k] += 1                              # the new token is counted before its slot is known
            opens = num_new_blocks(lens[k], block_size) == 1     # position len - 1 starts a block
            new_block[k] = WALK_NEW_BLOCK if opens else None
            if new_block[k] is not None:
                tables[k].append(new_block[k])
        positions = {k: [n - 1] for k, n in lens.items()}
        slots = [s for k in lens for s in slot_mapping_for(tables[k], positions[k], block_size)]
        steps.append(WalkStep(f"decode {d}", positions, slots, dict(lens), new_block,
                              {k: list(v) for k, v in tables.items()}))
    return steps


def _annotate(marked) -> str | None:
    """Slot numbers in the dark cells when there are few of them (text is the slow part of a redraw)."""
    return "marked" if len(marked) <= MAX_LABELS else None


MAX_LABELS = 12


def _silently(explorer, values: dict) -> None:
    """Set widget values without triggering a redraw per value (update() redraws once)."""
    explorer._syncing = True
    try:
        for w, v in values.items():
            if v is not None:
                w.value = v
    finally:
        explorer._syncing = False


def _watch(explorer, controls) -> None:
    for c in controls:
        c.observe(lambda _: None if explorer._syncing else explorer.update(), names="value")


class SlotWalkExplorer:
    """Block size (4 / 16 / 256) and step (prefill, decode 1, decode 2) of `walk_example`: the slots this
    step writes are dark. CSS classes: pagedkv-slot-block-size, pagedkv-slot-step, pagedkv-slot-text,
    pagedkv-slots (the picture)."""

    BLOCK_SIZES = (4, 16, 256)
    STEPS = ("prefill", "decode 1", "decode 2")

    def __init__(self, block_size: int = 4, step: str = "prefill", figsize=(8, 2.4), dpi=80):
        import ipywidgets as widgets

        self._syncing = False
        self.block_size = widgets.SelectionSlider(options=self.BLOCK_SIZES, value=block_size,
                                                  description="block size")
        self.step = widgets.ToggleButtons(options=self.STEPS, value=step, description="step")
        self.text, self.image = widgets.HTML(), picture_widget()
        for w, css in ((self.block_size, "pagedkv-slot-block-size"), (self.step, "pagedkv-slot-step"),
                       (self.text, "pagedkv-slot-text"), (self.image, "pagedkv-slots")):
            w.add_class(css)
        _watch(self, (self.block_size, self.step))
        self.fig = Figure(figsize=figsize, dpi=dpi)
        self.ax = self.fig.add_axes((0.01, 0.02, 0.98, 0.86))
        self.widget = widgets.VBox([widgets.HBox([self.block_size, self.step]), self.text, self.image])
        self.update()

    def current(self) -> WalkStep:
        return walk_example(self.block_size.value)[self.STEPS.index(self.step.value)]

    def summary_text(self) -> str:
        st, bs = self.current(), self.block_size.value
        new = [f"{k} gets block {b} (position {st.context_lens[k] - 1} is a multiple of {bs})"
               for k, b in st.new_block.items() if b is not None]
        return (f"{st.name}: slot_mapping {format_slots(st.slot_mapping)} | context_lens "
                f"A={st.context_lens['A']}, B={st.context_lens['B']} | new block: {', '.join(new) or 'none'}")

    def update(self, block_size: int | None = None, step: str | None = None) -> None:
        _silently(self, {self.block_size: block_size, self.step: step})
        st, bs = self.current(), self.block_size.value
        seqs = ("A", "B")
        owner, state = slot_states([st.tables[k] for k in seqs], [st.context_lens[k] for k in seqs],
                                   WALK_NUM_BLOCKS, bs, marked=st.slot_mapping)
        self.img = draw_cache_rows(self.ax, owner, state, bs, annotate=_annotate(st.slot_mapping),
                                   title=f"physical blocks 0..{WALK_NUM_BLOCKS - 1} (rows, top down) x {bs} "
                                         f"offsets; dark: written by {st.name}")
        self.text.value = f"{legend_html(['A', 'B'])} <code>{self.summary_text()}</code>"
        self.image.value = figure_png(self.fig)


DECODE_CONTEXT_LENS = (13, 7)   # the two sequences of DecodeReadExplorer
DECODE_NUM_SLOTS = 64


def decode_reads(block_size: int, seed: int = 0):
    """Block tables (from `make_paged_batch`, -1 dropped) and the slots each sequence's decode reads."""
    batch = make_paged_batch(list(DECODE_CONTEXT_LENS), block_size, 1, 1, 1,
                             num_blocks=DECODE_NUM_SLOTS // block_size, seed=seed)
    tables = [[b for b in row if b >= 0] for row in batch.block_tables.tolist()]
    lens = DECODE_CONTEXT_LENS
    reads = [slot_mapping_for(t, list(range(n)), block_size) for t, n in zip(tables, lens, strict=True)]
    return tables, reads


class DecodeReadExplorer:
    """Block size 1..32 over a 64-slot cache holding two sequences (contexts 13 and 7): dark = the rows one
    decode step reads, pale = the unused tail it must cut. CSS: pagedkv-read-block-size, pagedkv-read-text,
    pagedkv-decode-reads (the picture)."""

    BLOCK_SIZES = (1, 2, 4, 8, 16, 32)

    def __init__(self, block_size: int = 4, figsize=(8, 1.9), dpi=80):
        import ipywidgets as widgets

        self._syncing = False
        self.block_size = widgets.SelectionSlider(options=self.BLOCK_SIZES, value=block_size,
                                                  description="block size")
        self.text, self.image = widgets.HTML(), picture_widget()
        for w, css in ((self.block_size, "pagedkv-read-block-size"), (self.text, "pagedkv-read-text"),
                       (self.image, "pagedkv-decode-reads")):
            w.add_class(css)
        _watch(self, (self.block_size,))
        self.fig = Figure(figsize=figsize, dpi=dpi)
        self.ax = self.fig.add_axes((0.01, 0.02, 0.98, 0.84))
        self.widget = widgets.VBox([self.block_size, self.text, self.image])
        self.update()

    def summary_text(self) -> str:
        bs = self.block_size.value
        tables, reads = decode_reads(bs)
        rows = zip(DECODE_CONTEXT_LENS, tables, reads, strict=True)
        return " | ".join(f"seq {i}: context {n}, table {t}, reads {format_slots(r)}, cuts {len(t) * bs - n}"
                          for i, (n, t, r) in enumerate(rows))

    def update(self, block_size: int | None = None) -> None:
        _silently(self, {self.block_size: block_size})
        bs = self.block_size.value
        tables, reads = decode_reads(bs)
        marked = [s for r in reads for s in r]
        owner, state = slot_states(tables, DECODE_CONTEXT_LENS, DECODE_NUM_SLOTS // bs, bs, marked=marked)
        self.img = draw_cache_rows(self.ax, owner, state, bs, width=16, annotate=_annotate(marked),
                                   title=f"64 cache rows (slots), 16 per line, blocks of {bs}; dark: read; "
                                         "pale: tail cut")
        self.text.value = f"{legend_html(['seq 0', 'seq 1'])} <code>{self.summary_text()}</code>"
        self.image.value = figure_png(self.fig)


def _update(explorer, block_size) -> None:
    explorer.update(block_size)


BENCH_CALLBACKS = {
    "slots.SlotWalkExplorer.update": bench_cycle(SlotWalkExplorer, _update, SlotWalkExplorer.BLOCK_SIZES),
    "slots.DecodeReadExplorer.update": bench_cycle(DecodeReadExplorer, _update,
                                                   DecodeReadExplorer.BLOCK_SIZES),
}
