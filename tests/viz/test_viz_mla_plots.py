"""Notebook 18's picture draws what studies.mla_memory computes, one bar per cache form."""
from pagedkv_lib.studies.memory import GiB
from pagedkv_lib.studies.mla_memory import capacity_rows
from pagedkv_lib.viz.labels import overlaps, renderer
from pagedkv_lib.viz.mla_plots import bytes_per_token_figure


def test_bars_are_the_bytes_per_token_and_labels_the_sequences_that_fit():
    fig = bytes_per_token_figure(64 * GiB, 32_768)
    ax = fig.axes[0]
    rows = capacity_rows(64 * GiB, 32_768)
    assert [p.get_width() for p in ax.patches] == [form.bytes_per_token for form, _ in rows]
    texts = [t.get_text() for t in ax.texts]
    for (form, fits), text in zip(rows, texts, strict=True):
        assert text == f"{form.bytes_per_token:,} B, {fits:,} sequences"
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{f.model}: {f.form}" for f, _ in rows]
    assert overlaps(ax) == []
    r = renderer(fig)
    right = ax.get_window_extent(r).x1
    assert all(t.get_window_extent(r).x1 <= right for t in ax.texts), "a label runs past the axes"
