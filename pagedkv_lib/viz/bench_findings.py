"""What the stored GPU runs say, in sentences rendered from the results (notebooks 10 to 13).

A notebook prints these under the table they describe, from the same result, so that the text follows the
figures when a GPU run is stored again: no figure is typed into a notebook's markdown. Each function takes a
result as `pagedkv_lib.studies.results` loads it (the schemas of benchmarks/bench_decode.py and
benchmarks/bench_prefill.py, and the speed schema of `fp8_plots`) and skips what a result does not hold.
Comparisons are worded from the figures themselves: within TIE of each other two times are "a tie".
"""
from __future__ import annotations

import textwrap

TIE = 0.03                                   # two times within 3% of each other: a tie (run-to-run spread)
DECODE_NAMES = {"triton_v1": "v1", "triton_v2": "v2", "triton_v3": "v3", "sdpa_default": "SDPA's default "
                "dispatch", "sdpa_flash": "FLASH forced", "sdpa_efficient": "EFFICIENT forced",
                "sdpa_cudnn": "cuDNN forced", "flash_varlen": "FLASH's varlen kernel on packed K/V"}
BASELINES = ("sdpa_default", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "flash_varlen")


def _bullets(items: list[str]) -> str:
    return "\n".join(textwrap.fill(s, 110, initial_indent="- ", subsequent_indent="  ") for s in items if s)


def _rows(result: dict) -> dict:
    return {r.get("shape", f"{r['B']}x{r.get('L')}"): r for r in result["shapes"]}


def _us(row: dict | None, method: str) -> float | None:
    return (row or {}).get("methods", {}).get(method, {}).get("us")


def versus(t: float, other: float) -> str:
    """How time `t` compares with time `other`, to be followed by what `other` is: '2.18x faster than',
    '1.05x slower than' or 'a tie with'."""
    if abs(t / other - 1) <= TIE:
        return "a tie with"
    return f"{other / t:.2f}x faster than" if t < other else f"{t / other:.2f}x slower than"


def fastest(row: dict, methods=BASELINES) -> tuple[str, float] | None:
    """The fastest of `methods` that ran on this row: (method, us)."""
    timed = [(m, _us(row, m)) for m in methods if _us(row, m) is not None]
    return min(timed, key=lambda x: x[1]) if timed else None


def _backend(row: dict, method: str) -> str:
    return row["methods"].get(method, {}).get("backend", "?")


def store_findings(result: dict, small: int = 256) -> str:
    """The store kernel: its time on small steps (up to `small` tokens), its fraction of copy on large ones,
    and the best fraction PyTorch's `index_put` reaches."""
    rows = result["tokens"]
    few = [r["methods"]["triton"]["us"] for r in rows
           if r["T"] <= small and "us" in r["methods"].get("triton", {})]
    out = []
    if few:
        out.append(f"Up to {small} tokens: the kernel takes {min(few):.1f}-{max(few):.1f} us, whatever the "
                   "size.")
    large = [r for r in rows if r["T"] > small and "frac_copy" in r["methods"].get("triton", {})]
    if large:
        out.append("From thousands of tokens on: " + ", ".join(
            f"{r['methods']['triton']['frac_copy']:.0%} of copy at {r['T']:,} tokens" for r in large) + ".")
    torch_frac = [r["methods"]["torch_index_put"]["frac_copy"] for r in rows
                  if "frac_copy" in r["methods"].get("torch_index_put", {})]
    if torch_frac:
        out.append(f"PyTorch's `index_put` reaches at most {max(torch_frac):.0%} of copy.")
    return _bullets(out)


def split_kv_findings(result: dict, kernels=("triton_v1", "triton", "triton_v2")) -> str:
    """The first decode benchmark (v1 and v2): the fraction of copy at large uniform batches, and what
    split-KV does to one sequence (its time, the floor of its bytes, the rest: fixed cost)."""
    out = []
    large = [max(m["frac_copy"] for k, m in r["methods"].items() if k in kernels and "frac_copy" in m)
             for r in result["shapes"] if r["bytes"] >= 1e9 and r["block_size"] == 16]
    if large:
        out.append(f"Batches that read a GB or more (block size 16): the faster of v1 and v2 at "
                   f"{min(large):.0%}-{max(large):.0%} of copy.")
    one = _rows(result).get("1x4096")
    timed = [k for k in kernels if _us(one, k) is not None]
    if one and len(timed) >= 2:
        v1, v2 = _us(one, timed[0]), _us(one, timed[-1])
        floor = one["bytes"] / (result["copy_gbs"] * 1e3)                               # us
        out.append(f"One sequence of 4,096 tokens: v1 {v1:.1f} us, v2 {v2:.1f} us, of which {floor:.1f} us "
                   f"move the bytes at the copy rate and {v2 - floor:.1f} us are fixed cost.")
    return _bullets(out)


def decode_findings(result: dict, first_run: dict | None = None) -> str:
    """The decode kernel against the baselines, shape by shape, in words (times in us, one decimal as in the
    table); `first_run`, when given, for the change of v3 on one sequence between the two runs."""
    rows = _rows(result)
    out = []
    for name in ("ragged64", "ragged8"):
        row = rows.get(name)
        best, v3 = (fastest(row), _us(row, "triton_v3")) if row else (None, None)
        if best and v3:
            text = (f"{name} ({row['B']} sequences, {row['tokens']:,} tokens, the longest "
                    f"{row['max_len']:,}): v3 {v3:.1f} us against {best[1]:.1f} for the fastest baseline, "
                    f"{DECODE_NAMES[best[0]]}: {versus(v3, best[1])} it")
            default = _us(row, "sdpa_default")
            if default:
                text += (f"; SDPA's default dispatch ({_backend(row, 'sdpa_default')} on the padded batch) "
                         f"took {default:.1f}")
            v1, v2 = _us(row, "triton_v1"), _us(row, "triton_v2")
            if v1 and v2:
                text += f"; v1 and v2 took {v1:.1f} and {v2:.1f}, held up by the longest sequence"
            if "us" not in row["methods"].get("sdpa_flash", {"us": 0}):
                text += "; FLASH forced has no kernel for the padded batch (none takes its mask)"
            out.append(text + ".")
    row = rows.get("1x4096")
    if row and all(_us(row, m) for m in ("triton_v2", "triton_v3", "sdpa_flash", "sdpa_default")):
        v2, flash = _us(row, "triton_v2"), _us(row, "sdpa_flash")
        out.append(f"One sequence of 4,096 tokens: v2 {v2:.1f} us and v3 {_us(row, 'triton_v3'):.1f}, "
                   f"against {flash:.1f} for FLASH forced and {_us(row, 'sdpa_default'):.1f} for SDPA's "
                   f"default dispatch, which picks {_backend(row, 'sdpa_default')}: v2 is "
                   f"{versus(v2, flash)} FLASH forced.")
    for name in ("64x4096", "32x16384", "256x1024"):
        row = rows.get(name)
        kernels = [_us(row, m) for m in ("triton_v1", "triton_v2", "triton_v3")] if row else []
        if row and all(kernels) and _us(row, "sdpa_default") and _us(row, "sdpa_flash"):
            best = min(kernels)
            out.append(f"{name}: v1-v3 {min(kernels):.1f}-{max(kernels):.1f} us against "
                       f"{_us(row, 'sdpa_default'):.1f} for SDPA's default dispatch "
                       f"({_backend(row, 'sdpa_default')}): the best version is "
                       f"{versus(best, _us(row, 'sdpa_default'))} it; FLASH forced "
                       f"({_us(row, 'sdpa_flash'):.1f}) is {versus(_us(row, 'sdpa_flash'), best)} the best "
                       "version.")
    row = rows.get("8x4096")
    if row and _us(row, "triton_v2") and _us(row, "triton_v3") and _us(row, "sdpa_flash"):
        pair = sorted((_us(row, "triton_v2"), _us(row, "triton_v3")))
        flash = _us(row, "sdpa_flash")
        out.append(f"8x4096: v2 and v3 {pair[0]:.1f}-{pair[1]:.1f} us, FLASH forced (which splits too) "
                   f"{flash:.1f}: the faster version is {versus(pair[0], flash)} FLASH forced.")
    first = _rows(first_run).get("1x4096") if first_run else None
    if first and row is not None and _us(first, "triton_v3") and _us(rows.get("1x4096"), "triton_v3"):
        now = rows["1x4096"]
        out.append(f"v3 on one sequence: {_us(first, 'triton_v3'):.1f} us against v2's "
                   f"{_us(first, 'triton_v2'):.1f} in the first run, {_us(now, 'triton_v3'):.1f} against "
                   f"{_us(now, 'triton_v2'):.1f} in this one.")
    return _bullets(out)


def prefill_findings(result: dict) -> str:
    """The prefill kernel against the fastest SDPA row and the dense matmul, shape by shape, in words."""
    out = []
    for name, row in _rows(result).items():
        m = row["methods"].get("triton", {})
        best = max(((k, v) for k, v in row["methods"].items() if k.startswith("sdpa") and "tflops" in v),
                   key=lambda kv: kv[1]["tflops"], default=None)
        if "tflops" not in m or best is None:
            continue
        default = row["methods"].get("sdpa_default", {})
        text = (f"{name}: the kernel {m['tflops']:.0f} TFLOP/s, {m['tflops'] / best[1]['tflops']:.0%} of the "
                f"fastest SDPA row ({DECODE_NAMES[best[0]]}, {best[1]['tflops']:.0f} TFLOP/s)")
        if "tflops" in default and best[0] != "sdpa_default":
            text += (f"; the default dispatch picked {default.get('backend', '?')}, "
                     f"{default['tflops']:.0f} TFLOP/s")
        elif "tflops" in default:
            text += f", which picked {default.get('backend', '?')}"
        tuned = row["methods"].get("triton_tuned", {})
        if "tflops" in tuned and tuned.get("config") != m.get("config"):
            c = tuned["config"]
            text += (f"; the tile sweep's best for this shape ({c['block_m']} x {c['block_n']}, "
                     f"{c['num_warps']} warps) {tuned['tflops']:.0f}")
        out.append(f"{text}; {m['tflops'] / result['matmul_tflops']:.0%} of the dense bf16 matmul "
                   f"({result['matmul_tflops']:.0f} TFLOP/s).")
    return _bullets(out)


def fp8_speed_findings(result: dict | None) -> str:
    """The fp8 cache's decode speedup over bf16, against the 2x that half the bytes would give."""
    if result is None or not result.get("shapes"):
        return ""
    speed = {r.get("shape", f"{r['B']}x{r['L']}"): r["bf16"]["us"] / r["fp8"]["us"] for r in result["shapes"]}
    frac = {r.get("shape"): r["fp8"]["bytes"] / (r["fp8"]["us"] * 1e3) / result["copy_gbs"]
            for r in result["shapes"] if r["fp8"].get("bytes")}
    ordered = sorted(speed, key=speed.get)
    lines = [f"Half the bytes would make decode at most 2x faster. Measured: {speed[ordered[-1]]:.2f}x at "
             f"{ordered[-1]}, {speed[ordered[0]]:.2f}x at {ordered[0]} (every shape: "
             + ", ".join(f"{s} {v:.2f}x" for s, v in speed.items()) + ")."]
    if frac:
        lo, hi = min(frac.values()), max(frac.values())
        lines.append(f"The fp8 kernel moves its bytes at {lo:.0%}-{hi:.0%} of the copy rate: the bytes alone "
                     "no longer bound it.")
    return _bullets(lines)


def target_verdicts(report: str | None) -> str:
    """The lines of a benchmark's text report (e.g. bench_decode.txt, as `results.stored_text` reads it) that
    state a target and whether the run met it, as the benchmark wrote them; "" when there is no report."""
    if report is None:
        return ""
    lines = report.splitlines()
    if "targets (same run):" in lines:                                 # bench_decode.txt: a section
        lines = lines[lines.index("targets (same run):") + 1:]
    verdicts = [line.rstrip() for line in lines if "target" in line or "vs bf16" in line]
    return textwrap.dedent("\n".join(verdicts))


def flashinfer_table(result: dict, ours: tuple[str, ...], theirs: tuple[str, ...]) -> str:
    """The rows `ours` (the course's kernel first, then any other row to show: SDPA, vLLM's kernel) beside
    FlashInfer's rows `theirs` (benchmarks/flashinfer_baselines.py), one line per shape of a decode, prefill
    or cascade result, in microseconds, then how the first of `ours` compares with the fastest FlashInfer row
    that ran. A cascade shape is named by its batch, its shared prefix and each sequence's own tokens. A
    row that did not run shows its error's first words ("not installed" where FlashInfer was not there)."""
    device = result.get("env", {}).get("device", "no GPU")
    header = " ".join(f"{m:>22}" for m in ours + theirs)
    lines = [f"{device}, one process (benchmarks/flashinfer_baselines.py); microseconds",
             f"{'shape':>22} {header}   first vs FlashInfer's best"]
    for row in result["shapes"]:
        if "methods" not in row:
            continue
        name = row["shape"] if "shape" in row else f"B={row['B']}, {row.get('prefix')} + {row.get('suffix')}"
        cells = []
        for m in ours + theirs:
            entry = row["methods"].get(m, {})
            cells.append(f"{entry['us']:22.1f}" if "us" in entry else f"{entry.get('error', '-')[:22]:>22}")
        best = fastest(row, theirs)
        mine = _us(row, ours[0])
        verdict = f"{versus(mine, best[1])} {best[0]}" if best and mine else "-"
        lines.append(f"{name:>22} " + " ".join(cells) + f"   {verdict}")
    return "\n".join(lines)


def mla_flashinfer_table(result: dict) -> str:
    """bench_mla.py's result: per (B, context), the teaching kernel's and the tuned kernel's fastest config
    and FlashInfer's fa2 and fa3 MLA kernels, in microseconds and TFLOP/s, then the tuned kernel against
    fa3."""
    device = result.get("env", {}).get("device", "no GPU")
    rate = result.get("matmul_tflops", 0)
    lines = [f"{device}: bf16 matmul {rate:.0f} TFLOP/s in the same run; us (TFLOP/s)",
             f"{'B':>4} {'context':>7} {'teaching kernel':>18} {'tuned kernel':>18} {'FlashInfer fa2':>18} "
             f"{'FlashInfer fa3':>18}   tuned vs fa3"]
    for row in result["shapes"]:
        entries = [row.get("configs", {}).get(row.get(k) or "", {}) for k in ("best_teaching", "best_tuned")]
        entries += [row.get(f"flashinfer_{b}", {}) for b in ("fa2", "fa3")]
        cells = [f"{e['us']:9.1f} ({e['tflops']:5.0f})" if "us" in e else f"{e.get('error', '-')[:18]:>18}"
                 for e in entries]
        tuned, fa3 = entries[1], entries[3]
        verdict = versus(tuned["us"], fa3["us"]) + " fa3" if "us" in tuned and "us" in fa3 else "-"
        lines.append(f"{row['B']:>4} {row['context_len']:>7} " + " ".join(f"{c:>18}" for c in cells)
                     + f"   {verdict}")
    return "\n".join(lines)
