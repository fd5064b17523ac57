"""The GPU figures of notebooks 10, 11 and 12: benchmark results as tables and roofline pictures.

A decode step and a cache write are bound by memory bandwidth, so each method at each shape is one point
(bytes moved, time) against the line time = bytes / copy bandwidth, the copy measured in the same run
(`plot_roofline`). Prefill is bound by arithmetic; `plot_attention_roofline` puts both on the classic
roofline: FLOP/s against FLOPs per byte, under min(matmul peak, intensity x copy bandwidth).
Draws what the scripts in benchmarks/ write, as `pagedkv_lib.studies.results` loads it: `decode_h200.json`
(the first decode benchmark: v1, v2 and older baselines), `bench_decode.json` and `bench_prefill.json` (the
kernels of notebooks 11 and 12 against every SDPA backend), `store_kvcache_h200.json`.
Every figure is reported as a fraction of an anchor measured in the same run. The legend takes the corner
that hides no point, and the shape labels are placed where they overlap no other text (`labels`).
Shapes: docs/conventions.md.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from .labels import OFFSETS, merge_close, place_labels

MODEL = {"H": 32, "H_kv": 8, "D": 128}  # the benchmarks' model shape, for results that do not record it
DECODE_METHODS = {                      # name in the JSON -> label, marker, table column
    "triton_v1": ("Triton v1 (no split)", "s", "Triton v1"),
    "triton": ("Triton v2 (split-KV)", "o", "Triton v2"),              # decode_h200.json's name for v2
    "triton_v2": ("Triton v2 (split-KV)", "o", "Triton v2"),
    "triton_v3": ("Triton v3 (length-aware)", "*", "Triton v3"),
    "fp8_v3": ("Triton v3, fp8 cache", "P", "v3 fp8"),
    "sdpa_default": ("SDPA default dispatch, contiguous", "^", "SDPA default"),
    "sdpa_flash": ("SDPA FLASH, contiguous", "v", "SDPA flash"),
    "sdpa_efficient": ("SDPA EFFICIENT, contiguous", "<", "SDPA effic."),
    "sdpa_cudnn": ("SDPA CUDNN, contiguous", ">", "SDPA cudnn"),
    "flash_varlen": ("flash varlen, packed K/V", "d", "flash varlen"),
    "sdpa_contiguous": ("SDPA FLASH, contiguous", "v", "SDPA contig."),  # decode_h200.json
    "gather_sdpa": ("gather, then SDPA", "x", "gather+SDPA"),
    "flex_paged": ("flex_attention, paged", "D", "flex paged"),
}
PREFILL_METHODS = {
    "triton": ("Triton paged prefill", "*", "Triton"),
    "triton_fp8": ("Triton paged prefill, fp8 cache", "P", "Triton fp8"),
    "sdpa_default": ("SDPA default dispatch, contiguous", "^", "SDPA default"),
    "sdpa_flash": ("SDPA FLASH, contiguous", "v", "SDPA flash"),
    "sdpa_efficient": ("SDPA EFFICIENT, contiguous", "<", "SDPA effic."),
    "sdpa_cudnn": ("SDPA CUDNN, contiguous", ">", "SDPA cudnn"),
}
STORE_METHODS = {"triton": ("Triton store_kvcache", "o", "Triton"),
                 "torch_index_put": ("PyTorch index_put", "^", "PyTorch index")}


def _shape(r: dict) -> str:
    return r["shape"] if "shape" in r else f"{r['B']}x{r['L']}"


def _bytes(r: dict, method: str, model: dict = MODEL) -> int:
    """Bytes a call moves at least: K and V once (fp8 rows: 1 byte each), q read and out written (bf16)."""
    if "bytes" not in r:                                              # a prefill row of the first run
        H, H_kv, D = model["H"], model["H_kv"], model["D"]
        return r["B"] * (2 * r["kv_len"] * H_kv * D * 2 + 2 * r["q_len"] * H * D * 2)
    return r["bytes_fp8"] if "fp8" in method and "bytes_fp8" in r else r["bytes"]


def decode_points(result: dict, methods=None) -> list[dict]:
    """One row per (shape, method) that was timed: shape, method, bytes, us, frac_copy."""
    return [dict(shape=_shape(r), method=name, bytes=_bytes(r, name), us=m["us"], frac_copy=m["frac_copy"])
            for r in result["shapes"] for name, m in r["methods"].items()
            if "us" in m and (methods is None or name in methods)]


def store_points(result: dict) -> list[dict]:
    return [dict(shape=f"T={r['T']}", method=name, bytes=r["bytes"], us=m["us"], frac_copy=m["frac_copy"])
            for r in result["tokens"] for name, m in r["methods"].items() if "us" in m]


def _device(result: dict) -> str:
    return result.get("device") or result.get("env", {}).get("device", "?")


def decode_table(result: dict, methods=None, fractions: bool = True) -> str:
    """Per shape: MB read, the floor (bytes / copy), then each method's time and fraction of copy; the SDPA
    columns name the backend that ran (read from the profiler). fractions=False: times only (a run whose
    copy anchor cannot be trusted)."""
    names = [n for n in (methods or DECODE_METHODS) if any(n in r["methods"] for r in result["shapes"])]
    width = 16 if fractions else 13
    head = f"{'shape, block':>16} {'MB':>6}" + (f" {'floor us':>8}" if fractions else "") + "".join(
        f" {DECODE_METHODS[n][2]:>{width}}" for n in names)
    first = f"copy {result['copy_gbs']:.0f} GB/s (read + write) = 100%" if fractions else "times only"
    lines = [f"{_device(result)}: {first}", head]
    for r in result["shapes"]:
        floor = f" {r['bytes'] / (result['copy_gbs'] * 1e3):8.1f}" if fractions else ""   # us
        cells = [_cell(r["methods"].get(n, {}), fractions) for n in names]
        lines.append(f"{_shape(r):>10} bs{r['block_size']:<3} {r['bytes'] / 1e6:6.0f}{floor}"
                     + "".join(f" {c:>{width}}" for c in cells))
    timed = [(n, r["methods"][n]) for r in result["shapes"] for n in names if "us" in r["methods"].get(n, {})]
    backends = {n: sorted({m["backend"] for k, m in timed if k == n and "backend" in m}) for n in names}
    ran = [f"{DECODE_METHODS[n][2]}: {', '.join(b)}" for n, b in backends.items() if b]
    if ran:
        lines.append("backend that ran: " + "; ".join(ran))
    return "\n".join(lines)


def prefill_table(result: dict, methods=None) -> str:
    """Per shape: GFLOP of causal work, then each method's time, TFLOP/s and fraction of the fastest SDPA."""
    names = [n for n in (methods or PREFILL_METHODS) if any(n in r["methods"] for r in result["shapes"])]
    lines = [f"{_device(result)}: dense bf16 matmul {result['matmul_tflops']:.0f} TFLOP/s",
             f"{'shape':>22} {'GFLOP':>6}" + "".join(f" {PREFILL_METHODS[n][2]:>22}" for n in names)]
    for r in result["shapes"]:
        cells = []
        for n in names:
            m = r["methods"].get(n, {})
            cells.append(f"{m['us']:.0f} us {m['tflops']:.0f} TF {m.get('frac_best_sdpa', float('nan')):.0%}"
                         if "us" in m else "-")
        lines.append(f"{r['shape']:>22} {r['flops'] / 1e9:6.0f}" + "".join(f" {c:>22}" for c in cells))
    lines.append("% = of the fastest SDPA row on the same shape; backend that ran: " + "; ".join(
        f"{r['shape']} {PREFILL_METHODS[n][2]}: {r['methods'][n]['backend']}" for r in result["shapes"]
        for n in names if "backend" in r["methods"].get(n, {})))
    return "\n".join(lines)


def store_table(result: dict) -> str:
    """Per token count: bytes moved, the floor (bytes / copy), each method's time and fraction of copy."""
    lines = [f"{_device(result)}: copy {result['copy_gbs']:.0f} GB/s (read + write) = 100%",
             f"{'T':>6} {'MB':>7} {'floor us':>8}" + "".join(f" {m[2]:>16}" for m in STORE_METHODS.values())]
    for r in result["tokens"]:
        cells = [_cell(r["methods"].get(n, {})) for n in STORE_METHODS]
        floor = r["bytes"] / (result["copy_gbs"] * 1e3)                              # us
        lines.append(f"{r['T']:>6} {r['bytes'] / 1e6:7.2f} {floor:8.2f}"
                     + "".join(f" {c:>16}" for c in cells))
    return "\n".join(lines)


def _cell(m: dict, fraction: bool = True) -> str:
    if "us" not in m:
        return "-"
    return f"{m['us']:.1f} us {m['frac_copy']:.1%}" if fraction else f"{m['us']:.1f} us"


def plot_roofline(points: list[dict], copy_gbs: float, methods: dict = DECODE_METHODS, ax=None,
                  title: str = "") -> Figure:
    """Time against bytes, both log scale: the copy-bandwidth line, and a marker per method and shape.

    Draws into `ax` when given, else into a new figure that no pyplot window shows; returns the figure.
    """
    if ax is None:
        ax = Figure(figsize=(7.5, 4.2), dpi=80).add_subplot()
    sizes = [p["bytes"] for p in points]
    lo, hi = min(sizes) / 2, max(sizes) * 2
    ax.plot([lo, hi], [lo / (copy_gbs * 1e3), hi / (copy_gbs * 1e3)], color="black", lw=1,
            label=f"copy bandwidth, {copy_gbs:.0f} GB/s")
    for label, marker, group in _marker_groups(points, methods):
        ax.scatter([p["bytes"] for p in group], [p["us"] for p in group], marker=marker, s=36, label=label,
                   alpha=0.85)
    _log_axes(ax, "bytes moved per call", "time per call (us)",
              title or "on the line: as fast as a copy; above it: slower")
    on_line = [(p["bytes"], p["bytes"] / (copy_gbs * 1e3), p["shape"]) for p in sorted(points, key=_by_bytes)]
    # shapes that move the same bytes share one point of the line, and one label on one line
    place_labels(ax, merge_close(ax, on_line, sep=" = "), fontsize=7, color="0.3")
    return ax.figure


def _by_bytes(p: dict) -> float:
    return p["bytes"]


def _log_axes(ax, xlabel: str, ylabel: str, title: str) -> Figure:
    """Both axes log scale, labels, title, grid and legend: what every roofline here ends with."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", lw=0.3)
    ax.legend(fontsize=7, loc="best")                                  # the corner that hides no point
    return ax.figure


def _marker_groups(points: list[dict], methods: dict):
    """(label, marker, points) per label, in `methods` order (two JSON names may share one label)."""
    groups: dict = {}
    for name, (label, marker, _) in methods.items():
        mine = [p for p in points if p["method"] == name]
        if mine:
            groups.setdefault(label, [marker, []])[1].extend(mine)
    return [(label, marker, group) for label, (marker, group) in groups.items()]


def attention_points(decode: dict | None, prefill: dict | None, decode_methods=("triton_v3",),
                     prefill_methods=("triton",)) -> list[dict]:
    """Decode and prefill on one roofline: per (shape, method) its FLOPs per byte and TFLOP/s.

    Decode FLOPs count each (query head, context token) pair once, 4 * D of them (q . k and p . v); prefill
    counts each causal (query, key) pair once. Bytes: K and V read once, q read, out written.
    """
    points = []
    for result, kind, wanted in ((decode, "decode", decode_methods), (prefill, "prefill", prefill_methods)):
        if result is None:
            continue
        model = result.get("model", MODEL)
        for r in result["shapes"]:
            flops = r.get("flops") or 4 * r["tokens"] * model["H"] * model["D"]
            for name in wanted:
                m = r["methods"].get(name, {})
                if "us" in m:
                    nbytes = _bytes(r, name, model)
                    points.append(dict(kind=kind, shape=r["shape"], method=name, intensity=flops / nbytes,
                                       tflops=flops / (m["us"] * 1e-6) / 1e12))
    return points


def plot_attention_roofline(points: list[dict], copy_gbs: float, matmul_tflops: float, ax=None,
                            title: str = "", what: str = "Triton") -> Figure:
    """TFLOP/s against FLOPs per byte, log-log, under min(matmul_tflops, intensity x copy bandwidth); `what`
    names the points in the legend ("Triton" when measured, e.g. "at its roof" when not)."""
    if ax is None:
        ax = Figure(figsize=(7.5, 4.2), dpi=80).add_subplot()
    ridge = matmul_tflops * 1e12 / (copy_gbs * 1e9)                   # FLOP/B where the two ceilings meet
    xs = [p["intensity"] for p in points] or [1.0]
    lo, hi = min(min(xs), ridge) / 4, max(max(xs), ridge) * 4
    ax.plot([lo, ridge, hi], [lo * copy_gbs / 1e3, matmul_tflops, matmul_tflops], color="black", lw=1,
            label=f"roof: copy {copy_gbs:.0f} GB/s, matmul {matmul_tflops:.0f} TFLOP/s")
    ax.plot([ridge, ridge], [matmul_tflops / 30, matmul_tflops], color="0.6", lw=0.6, ls="--")  # label up
    ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, matmul_tflops / 30), fontsize=7, color="0.3",
                xytext=(4, 0), textcoords="offset points")
    for kind, marker in (("decode", "o"), ("prefill", "*")):
        mine = [p for p in points if p["kind"] == kind]
        if mine:
            ax.scatter([p["intensity"] for p in mine], [p["tflops"] for p in mine], marker=marker, s=50,
                       label=f"{kind} ({what})", alpha=0.85)
    _log_axes(ax, "arithmetic intensity (FLOPs per byte moved)", "TFLOP/s",
              title or "left of the ridge: memory-bound; right: compute-bound")
    anchors = [(p["intensity"], p["tflops"], p["shape"]) for p in sorted(points, key=lambda p: -p["tflops"])]
    place_labels(ax, merge_close(ax, anchors), offsets=((5, 0), (-5, 0)) + OFFSETS, fontsize=7, color="0.3")
    return ax.figure
