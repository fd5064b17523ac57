"""The paper's cells beside the course's, one reason per row; and the static study of every workload.

Exports: `course_values`, `build_table`, `to_markdown`, `static_table`.

The course side runs the paper's setup (`paper_cells.PAPER_SETUP`: OPT-13B on one A100-40GB, so 15,728 KV
slots; max_len 2048; blocks of 16) on `num_requests` requests of each fitted trace, all queued at step 0:
the memory-bound regime the paper's figures describe. 10,000 requests per workload take about a second.
"""
from __future__ import annotations

from pagedkv_lib.studies.paper_cells import CELLS, OPT13B_SLOTS, PAPER_SETUP
from pagedkv_lib.studies.policies import LABELS, POLICY_KEYS, make_policy
from pagedkv_lib.studies.serving_measures import serving_breakdown
from pagedkv_lib.studies.serving_sim import simulate_serving
from pagedkv_lib.studies.waste import CATEGORIES, waste_shares
from pagedkv_lib.studies.workload import MAX_LEN, WORKLOADS, make_trace


def course_values(num_requests: int = 10_000, seed: int = 0) -> dict[str, float]:
    """{cell key: the course's value} for every key of CELLS (percent cells in %)."""
    out: dict[str, float] = {"slots/opt13b": float(OPT13B_SLOTS)}
    for workload in ("sharegpt", "alpaca"):
        requests = make_trace(workload, num_requests, seed)
        runs = {k: simulate_serving(requests, k, **PAPER_SETUP) for k in POLICY_KEYS}
        for key, result in runs.items():
            out[f"batched/{workload}/{key}"] = result.batched_requests
            shares = serving_breakdown(result, requests)
            out.update({f"share/{workload}/{key}/{c}": 100 * shares[c] for c in CATEGORIES})
        for key in ("orca_oracle", "orca_max"):
            out[f"rate/{workload}/{key}"] = runs["paged"].saturated_rate / runs[key].saturated_rate
    return out


def _agrees(cell, value: float) -> bool | None:
    if cell.tolerance is None:
        return None
    if isinstance(cell.paper, tuple):
        return cell.paper[0] <= value <= cell.paper[1]
    return abs(value - cell.paper) <= cell.tolerance


def build_table(values: dict[str, float] | None = None) -> list[dict]:
    """One row per paper cell: key, quantity, policy, paper, source, course, tolerance, agrees, reason."""
    values = course_values() if values is None else values
    rows = []
    for cell in CELLS:
        policy = next((LABELS[k] for k in POLICY_KEYS if f"/{k}" in cell.key), "-")
        rows.append({"key": cell.key, "quantity": cell.quantity, "policy": policy, "paper": cell.paper,
                     "source": cell.source, "course": values[cell.key], "tolerance": cell.tolerance,
                     "agrees": _agrees(cell, values[cell.key]), "reason": cell.reason})
    return rows


def _fmt(x) -> str:
    if isinstance(x, tuple):
        return f"{x[0]:g}-{x[1]:g}x"
    return f"{x:,.2f}" if abs(x) < 1000 else f"{x:,.0f}"


def to_markdown(rows: list[dict]) -> str:
    """A markdown table: quantity | policy | paper (source) | course | within | why."""
    lines = ["| quantity | policy | paper | course | within | why |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["tolerance"] is None:
            within = "not reproduced"
        elif isinstance(r["paper"], tuple):
            within = "in range" if r["agrees"] else "OUT of range"
        else:
            within = f"±{r['tolerance']:g}" + ("" if r["agrees"] else " FAILS")
        lines.append(f"| {r['quantity']} | {r['policy']} | {_fmt(r['paper'])} ({r['source']}) | "
                     f"{_fmt(r['course'])} | {within} | {r['reason']} |")
    return "\n".join(lines)


def static_table(num_requests: int = 10_000, seed: int = 0, view: str = "lifetime",
                 block_size: int = 16) -> dict[str, dict[str, dict[str, float]]]:
    """{workload: {policy key: {category: share}}}: the static study, each workload at its own max_len."""
    out = {}
    for workload in WORKLOADS:
        requests = make_trace(workload, num_requests, seed)
        out[workload] = {k: waste_shares(requests, make_policy(k, max_len=MAX_LEN[workload],
                                                               block_size=block_size), view)
                         for k in POLICY_KEYS}
    return out
