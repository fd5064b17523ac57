"""Notebook 21's picture draws what core.cascade_attention.kv_bytes_read computes: per prefix, the paged
line grows with the batch and the cascade's stays near the prefix's bytes."""
from pagedkv_lib.core.cascade_attention import kv_bytes_read
from pagedkv_lib.viz.cascade_plots import bytes_read_figure, cascade_findings

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


def test_findings_say_not_measured_without_a_result():
    assert cascade_findings(None).startswith("Not measured yet")


def test_findings_render_each_shape_and_judge_the_rule():
    def methods(cas, paged, sdpa):
        return {"cascade": {"us": cas, "of_floor": 0.5}, "paged_v3": {"us": paged, "of_floor": 1.25},
                "sdpa": {"us": sdpa, "backend": "flash"}}
    result = {"env": {"device": "GPU X"}, "copy_gbs": 4000.0, "shape": {"H": 32, "D": 128}, "shapes": [
        {"B": 64, "prefix": 4096, "rule": True, "methods": methods(10.0, 40.0, 80.0)},
        {"B": 8, "prefix": 1024, "rule": True, "methods": methods(10.0, 5.0, 20.0)},
        {"B": 8, "prefix": 1024, "rule": False, "methods": {"cascade": {"error": "boom"}}},
    ]}
    text = cascade_findings(result).splitlines()
    assert text[0] == "GPU X, copy bandwidth 4000 GB/s:"
    flops = 4 * 64 * 32 * 4096 * 128                                    # QK and PV over the prefix
    assert f"cascade 10.0 us (50% of its floor, {flops / 10e-6 / 1e12:.0f} TFLOP/s of prefix work)" in text[1]
    assert "paged decode 40.0 us (4.00x; 125% of its floor)" in text[1]
    assert "SDPA (flash) 80.0 us (8.00x)" in text[1] and text[1].endswith("the measurement agrees")
    assert text[2].endswith("the measurement disagrees")
    assert "a method failed" in text[3]
