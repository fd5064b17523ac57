"""Notebook 21's picture draws what core.cascade_attention.kv_bytes_read computes: per prefix, the paged
line grows with the batch and the cascade's stays near the prefix's bytes."""
from pagedkv_lib.core.cascade_attention import kv_bytes_read
from pagedkv_lib.viz.cascade_plots import bytes_read_figure

BATCHES = [1, 4, 16, 64, 256]


def test_lines_are_the_bytes_each_method_reads():
    fig = bytes_read_figure(BATCHES, [1024, 8192], 64, 8, 128, 2)
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ["paged decode, prefix 1,024", "cascade, prefix 1,024",
                                                "paged decode, prefix 8,192", "cascade, prefix 8,192"]
    for line, (prefix, method) in zip(lines, [(1024, "paged"), (1024, "cascade"), (8192, "paged"),
                                              (8192, "cascade")]):
        assert list(line.get_xdata()) == BATCHES
        expected = [kv_bytes_read(b, prefix, 64, 8, 128, 2)[method] / 1e6 for b in BATCHES]
        assert list(line.get_ydata()) == expected
    paged, cascade = lines[2].get_ydata(), lines[3].get_ydata()
    assert paged[0] == cascade[0] and paged[-1] > 30 * cascade[-1]    # one sequence: no difference
