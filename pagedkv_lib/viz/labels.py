"""Text labels that overlap nothing: placed by measuring what the renderer would draw.

`place_labels` annotates points one after another; each label takes the first of a few offsets at which its
text box, as the renderer measures it (`get_window_extent`), stays inside the axes and overlaps no label
placed before, no text already in the axes, the legend, and (when it can) no marker. `place_text` puts one
text at the first of a few positions where it covers no text, legend, line nor marker. `overlaps` lists what
still overlaps in a drawn axes (texts, the legend, plotted lines, markers): the test of every picture with
labels. Boxes are in display pixels.
"""
from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

# offsets in points from the anchor to the text's nearest corner (a negative x puts the text on the left, a
# negative y below), in order of preference: below right first (under a line that rises to the right), then
# around the anchor, then further away
OFFSETS = ((4, -4), (4, 4), (-4, -4), (-4, 4), (4, -14), (4, 14), (-4, -14), (-4, 14), (4, -24), (4, 24),
           (-4, -24), (-4, 24))
MARKER_PAD = 3.0                                   # pixels around a marker's centre that a label leaves free


def renderer(fig):
    """The figure's renderer; a figure made without pyplot gets an Agg canvas first."""
    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    return fig.canvas.get_renderer()


def marker_boxes(ax, pad: float = MARKER_PAD) -> list[Bbox]:
    """A small box around every marker of `ax` (scatter points, and the markers of plotted lines), in display
    pixels."""
    centres = []
    for collection in ax.collections:
        centres.extend(collection.get_offset_transform().transform(collection.get_offsets()))
    for line in ax.lines:
        if line.get_visible() and line.get_marker() not in (None, "None", "", " "):
            centres.extend(line.get_transform().transform(line.get_xydata()))
    return [Bbox.from_extents(x - pad, y - pad, x + pad, y + pad) for x, y in centres]


def drawn_lines(ax) -> list:
    """The visible lines of `ax` drawn with a line style (plots, axhline, axvline), as display paths."""
    return [line.get_transform().transform_path(line.get_path()) for line in ax.lines
            if line.get_visible() and line.get_linestyle() not in ("None", "", " ")
            and len(line.get_xydata()) > 1]


def _covers_a_line(box: Bbox, paths) -> bool:
    return any(path.intersects_bbox(box, filled=False) for path in paths)


def _move(label, offset) -> None:
    """Put the label's nearest corner at `offset` points from its anchor."""
    label.set_position(offset)
    label.set_horizontalalignment("left" if offset[0] >= 0 else "right")
    label.set_verticalalignment("bottom" if offset[1] >= 0 else "top")


def _free(box: Bbox, others: list[Bbox]) -> bool:
    return not any(box.overlaps(o) for o in others)


def merge_close(ax, anchors, pixels: float = 8.0, sep: str = ", ") -> list[tuple]:
    """(x, y, text) anchors in data coordinates, those within `pixels` of an earlier one (on the drawn axes)
    merged into it: one anchor, the texts joined with `sep` (a newline stacks them), in order."""
    renderer(ax.figure)
    ax.figure.draw_without_rendering()
    groups: list[list] = []                                           # [display xy, x, y, texts]
    for x, y, text in anchors:
        px, py = ax.transData.transform((x, y))
        near = next((g for g in groups if abs(g[0][0] - px) <= pixels and abs(g[0][1] - py) <= pixels), None)
        if near is None:
            groups.append([(px, py), x, y, [text]])
        elif text not in near[3]:
            near[3].append(text)
    return [(x, y, sep.join(texts)) for _, x, y, texts in groups]


def place_labels(ax, anchors, offsets=OFFSETS, **text_kw) -> list:
    """Annotate each (x, y, text) of `anchors` (data coordinates) at the first offset in `offsets` (points)
    where its box fits inside the axes and overlaps no other label or text, nor the legend, nor a marker,
    nor a plotted line; failing that, the first where it overlaps no text nor the legend (markers and lines
    allowed); failing that, the first offset. Draw the axes' data and legend before: their positions must
    be final."""
    r = renderer(ax.figure)
    ax.figure.draw_without_rendering()
    inside = ax.get_window_extent(r)
    taken = [t.get_window_extent(r) for t in ax.texts if t.get_text() and t.get_visible()]
    if ax.get_legend() is not None:
        taken.append(ax.get_legend().get_window_extent(r))
    markers = marker_boxes(ax)
    paths = drawn_lines(ax)
    placed = []
    for x, y, text in anchors:
        label = ax.annotate(text, (x, y), xytext=offsets[0], textcoords="offset points", **text_kw)
        choice = None
        for avoid, lines in ((taken + markers, paths), (taken, [])):
            for offset in offsets:
                _move(label, offset)
                box = label.get_window_extent(r)
                fits = inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)
                if fits and _free(box, avoid) and not _covers_a_line(box, lines):
                    choice = offset
                    break
            if choice is not None:
                break
        _move(label, choice or offsets[0])
        taken.append(label.get_window_extent(r))
        placed.append(label)
    return placed


def place_text(ax, text: str, positions, **text_kw):
    """Put `text` at the first of `positions` ((x, y, ha, va), data coordinates) where its box lies inside the
    axes and covers no other text, the legend, a plotted line or a marker; failing that, at the first. Draw
    everything else before: its positions must be final."""
    r = renderer(ax.figure)
    ax.figure.draw_without_rendering()
    inside = ax.get_window_extent(r)
    taken = [t.get_window_extent(r) for t in ax.texts if t.get_text() and t.get_visible()]
    if ax.get_legend() is not None:
        taken.append(ax.get_legend().get_window_extent(r))
    taken += marker_boxes(ax, pad=1.0)
    paths = drawn_lines(ax)
    label = ax.text(*positions[0][:2], text, ha=positions[0][2], va=positions[0][3], **text_kw)
    for x, y, ha, va in positions:
        label.set_position((x, y))
        label.set_horizontalalignment(ha)
        label.set_verticalalignment(va)
        box = label.get_window_extent(r)
        fits = inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)
        if fits and _free(box, taken) and not _covers_a_line(box, paths):
            return label
    label.set_position(positions[0][:2])
    label.set_horizontalalignment(positions[0][2])
    label.set_verticalalignment(positions[0][3])
    return label


def overlaps(ax) -> list[str]:
    """What overlaps in a drawn axes: two texts, a text and the legend, a marker under the legend, a text over
    a plotted line (a curve, an axhline) or over a marker."""
    r = renderer(ax.figure)
    ax.figure.draw_without_rendering()
    texts = [(t.get_text(), t.get_window_extent(r)) for t in ax.texts if t.get_text() and t.get_visible()]
    found = [f"{a!r} and {b!r}" for i, (a, box_a) in enumerate(texts) for b, box_b in texts[i + 1:]
             if box_a.overlaps(box_b)]
    paths = drawn_lines(ax)
    markers = marker_boxes(ax, pad=1.0)
    found += [f"{t!r} over a plotted line" for t, b in texts if _covers_a_line(b, paths)]
    found += [f"{t!r} over a marker" for t, b in texts if any(b.overlaps(m) for m in markers)]
    legend = ax.get_legend()
    if legend is not None:
        box = legend.get_window_extent(r)
        found += [f"{t!r} and the legend" for t, b in texts if b.overlaps(box)]
        found += [f"a marker at ({m.x0 + MARKER_PAD:.0f}, {m.y0 + MARKER_PAD:.0f}) px under the legend"
                  for m in marker_boxes(ax, pad=0.0) if box.contains(m.x0, m.y0)]
    return found
