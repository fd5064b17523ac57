"""Notebook 21's picture: cache bytes one layer's decode reads, plain paged decode against the cascade, as
the batch and the shared prefix grow (a log axis).

Every number comes from `pagedkv_lib.core.cascade_attention.kv_bytes_read`; this module only draws.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from pagedkv_lib.core.cascade_attention import kv_bytes_read

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def bytes_read_figure(batches: list[int], prefix_lens: list[int], suffix_len: int, num_kv_heads: int,
                      head_dim: int, element_bytes: int, ax=None) -> Figure:
    """Per prefix length, two lines over the batch sizes: plain decode (solid) and the cascade (dashed), in MB
    read per layer, each line labelled in the legend."""
    if ax is None:
        ax = Figure(figsize=(7.5, 3.6), dpi=80).add_subplot()
    for color, prefix in zip(COLORS, prefix_lens):
        rows = [kv_bytes_read(b, prefix, suffix_len, num_kv_heads, head_dim, element_bytes) for b in batches]
        ax.plot(batches, [r["paged"] / 1e6 for r in rows], color=color, marker="o", ms=3,
                label=f"paged decode, prefix {prefix:,}")
        ax.plot(batches, [r["cascade"] / 1e6 for r in rows], color=color, marker="s", ms=3, ls="--",
                label=f"cascade, prefix {prefix:,}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel(f"sequences in the batch (each with {suffix_len} tokens of its own)", fontsize=8)
    ax.set_ylabel("MB of K/V read per layer", fontsize=8)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    return ax.figure


def cascade_findings(result: dict | None) -> str:
    """Sentences from bench_cascade.json in benchmarks/results/ (bench_cascade.py), one per shape: the
    cascade's time against the course's paged decode and SDPA, the share each reaches of the floor its bytes
    set (paged decode can pass its own: the blocks every sequence shares come from L2 after the first
    reader), the cascade's rate in prefix FLOPs (4 B H P D: QK and PV of every query head over the prefix),
    and whether vLLM's rule picked the faster of cascade and paged decode. None: the benchmark has not run."""
    if result is None:
        return ("Not measured yet: no bench_cascade.json in benchmarks/results/. On a GPU: "
                "PYTHONPATH=. python benchmarks/bench_cascade.py")
    shape = result.get("shape", {})
    lines = [f"{result['env'].get('device', 'no GPU')}, copy bandwidth {result['copy_gbs']:.0f} GB/s:"]
    for r in result["shapes"]:
        m = r.get("methods", {})
        if not all("us" in m.get(k, {}) for k in ("cascade", "paged_v3", "sdpa")):
            lines.append(f"  B {r.get('B')} prefix {r.get('prefix')}: a method failed, see the JSON")
            continue
        cas, paged, sdpa = m["cascade"], m["paged_v3"], m["sdpa"]
        faster = cas["us"] < paged["us"]
        agrees = "agrees" if r["rule"] == faster else "disagrees"
        rate = ""
        if "H" in shape and "D" in shape:
            tflops = 4 * r["B"] * shape["H"] * r["prefix"] * shape["D"] / (cas["us"] * 1e-6) / 1e12
            rate = f", {tflops:.0f} TFLOP/s of prefix work"
        paged_floor = f"; {paged['of_floor']:.0%} of its floor" if "of_floor" in paged else ""
        lines.append(f"  B {r['B']:>3}, prefix {r['prefix']:>5}: cascade {cas['us']:.1f} us "
                     f"({cas['of_floor']:.0%} of its floor{rate}), paged decode {paged['us']:.1f} us "
                     f"({paged['us'] / cas['us']:.2f}x{paged_floor}), SDPA ({sdpa.get('backend', '?')}) "
                     f"{sdpa['us']:.1f} us ({sdpa['us'] / cas['us']:.2f}x); vLLM's rule says "
                     f"{'cascade' if r['rule'] else 'plain'}, the measurement {agrees}")
    return "\n".join(lines)
