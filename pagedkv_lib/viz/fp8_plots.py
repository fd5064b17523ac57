"""The pictures and tables of notebook 13 (FP8 KV cache): e4m3's grid, the accuracy study, the H200 speed.

The speed table takes the fp8-vs-bf16 figures of one decode run in this schema (every time a median per
call, every byte count per call):

    {
      "device":   "NVIDIA H200",                    # free text, printed as is
      "copy_gbs": 4273.1,                           # device-to-device copy, GB/s (read + write), same run
      "shapes": [                                   # one row per decode shape
        {"B": 64, "L": 4096, "block_size": 16,      # batch, context per sequence, tokens per block
         "bf16": {"us": 252.1, "bytes": 1075...},   # bf16 cache: time (us) and bytes moved per call
         "fp8":  {"us": 131.0, "bytes": 538...}}    # fp8 cache, same shape, same run
      ]
    }

`from_decode_results` builds it from benchmarks/bench_decode.py's own JSON (shapes[i].methods[name] =
{"us", ...}, shapes[i].bytes and .bytes_fp8, .max_len for a ragged batch's longest context) given the names
of the bf16 and fp8 methods, e.g. from_decode_results(results.stored("bench_decode.json"), "triton_v3",
"fp8_v3").
Shapes: docs/conventions.md.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from pagedkv_lib.studies.fp8_attention_error import CACHES

COLORS = dict(zip(CACHES, ("tab:blue", "tab:orange", "tab:red"), strict=True))


def e4m3_grid_figure(values, ax=None) -> Figure:
    """Every positive finite e4m3 value (`values`, a sorted 1-D sequence) as a tick on a log axis: the
    grid is as dense (8 steps per power of two) near 0.02 as near 400, until the subnormals below 2**-6."""
    if ax is None:
        ax = Figure(figsize=(7.5, 1.6), dpi=80).add_subplot()
    values = [float(v) for v in values]
    ax.vlines(values, 0, 1, lw=0.8, color="tab:blue")
    ax.axvline(2.0**-6, color="0.4", ls="--", lw=1)
    ax.text(2.0**-6, 1.05, "smallest normal 2^-6", fontsize=7, ha="center")
    ax.text(448, 1.05, "448", fontsize=7, ha="center")
    ax.set_xscale("log", base=2)
    ax.set_yticks([])
    ax.set_ylim(0, 1.3)
    ax.set_xlabel("positive float8 e4m3fn values (126 of them; log scale)")
    return ax.figure


def error_table(rows: list[dict]) -> str:
    """The study's table: per value range and cache, max and mean |error| and mean |error| / mean |out|."""
    lines = [f"{'values':<9} {'cache':<20} {'max |err|':>10} {'mean |err|':>11} {'mean/|out|':>10}"]
    for r in rows:
        lines.append(f"{r['values']:<9} {r['cache']:<20} {r['max_abs_err']:>10.2e} "
                     f"{r['mean_abs_err']:>11.2e} {r['mean_abs_err'] / r['mean_abs_out']:>10.2%}")
    return "\n".join(lines)


def error_vs_magnitude_figure(rows: list[dict], ax=None) -> Figure:
    """Relative mean error of the attention output against the magnitude of K and V, one line per cache."""
    if ax is None:
        ax = Figure(figsize=(7.5, 3.6), dpi=80).add_subplot()
    for cache in CACHES:
        mine = [r for r in rows if r["cache"] == cache]
        ax.plot([r["magnitude"] for r in mine], [r["rel_mean_err"] for r in mine], marker="o", label=cache,
                color=COLORS[cache])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("magnitude of K and V (q scaled by its inverse: same softmax)")
    ax.set_ylabel("mean |err| / mean |out|")
    ax.set_title("attention output vs an fp64 reference", fontsize=9)
    ax.grid(True, which="major", lw=0.3)
    ax.legend(fontsize=8)
    return ax.figure


def margin_figure(agreement, ax=None) -> Figure:
    """Histogram of the reference's top-2 logit margin over every step, and at the steps each rounding
    cache (bf16, fp8) picked another token."""
    if ax is None:
        ax = Figure(figsize=(7.5, 3.2), dpi=80).add_subplot()
    top = max(agreement.margins, default=1.0)
    bins = [top * i / 30 for i in range(31)]
    ax.hist(agreement.margins, bins=bins, color="0.75", label=f"every step ({len(agreement.margins)})")
    for cache, color in (("fp8", "tab:red"), ("bf16", "tab:blue")):
        flips = [f.margin for f in agreement.flips.get(cache, [])]
        ax.hist(flips, bins=bins, color=color, alpha=0.85,
                label=f"steps where the {cache} cache picks another token ({len(flips)})")
    ax.set_xlabel("reference logits (float64 cache): top-1 minus top-2")
    ax.set_ylabel("steps")
    ax.legend(fontsize=8)
    return ax.figure


def from_decode_results(result: dict, bf16: str, fp8: str) -> dict:
    """The speed table's schema from bench_decode.py's JSON, taking methods `bf16` and `fp8` of each shape
    (the shapes that timed both)."""
    shapes = []
    for r in result["shapes"]:
        methods = r["methods"]
        if bf16 in methods and fp8 in methods and "us" in methods[bf16] and "us" in methods[fp8]:
            b16, b8 = methods[bf16], methods[fp8]
            shapes.append({"B": r["B"], "L": r.get("L", r.get("max_len")), "block_size": r["block_size"],
                           "shape": r.get("shape", f"{r['B']}x{r.get('L')}"),
                           "bf16": {"us": b16["us"], "bytes": b16.get("bytes", r["bytes"])},
                           "fp8": {"us": b8["us"], "bytes": b8.get("bytes", r.get("bytes_fp8"))}})
    device = result.get("device") or result.get("env", {}).get("device", "?")
    return {"device": device, "copy_gbs": result["copy_gbs"], "shapes": shapes}


def speed_table(result: dict | None) -> str:
    """Per shape: bf16 and fp8 decode time, the speedup, and each as a fraction of the copy bandwidth."""
    if result is None or not result.get("shapes"):
        return ("No GPU figures for the fp8 cache are stored yet (fp8 rows of benchmarks/results/"
                "bench_decode.json). On a CUDA machine, run benchmarks/bench_decode.py and store its JSON "
                "there.")
    copy = result["copy_gbs"]
    lines = [f"{result['device']}: copy {copy:.0f} GB/s (read + write) = 100%",
             f"{'shape, block':>17} {'bf16 us':>9} {'fp8 us':>9} {'speedup':>8} {'bf16 %copy':>10} "
             f"{'fp8 %copy':>10}"]
    for r in result["shapes"]:
        cells = []
        for kind in ("bf16", "fp8"):
            m = r[kind]
            cells.append(f"{m['bytes'] / (m['us'] * 1e-6) / 1e9 / copy:.0%}" if m.get("bytes") else "-")
        label = r.get("shape", f"{r['B']}x{r['L']}")
        lines.append(f"{label:>12} bs{r['block_size']:<3} {r['bf16']['us']:9.1f} "
                     f"{r['fp8']['us']:9.1f} {r['bf16']['us'] / r['fp8']['us']:7.2f}x {cells[0]:>10} "
                     f"{cells[1]:>10}")
    return "\n".join(lines)
