"""Transfer or recompute: what a decode instance pays to get a prompt's K/V, on the course's model shapes.

Exports: `Link`, `LINKS`, `transfer_seconds`, `break_even_gbs`, `transfer_crossover_tokens`,
`transfer_table`. Units: tokens, bytes, seconds; GB = 1e9 bytes.

With prefill/decode disaggregation the prompt's K/V of n tokens reach the decode instance either
    transferred:  n x bytes_per_token over the link between the instances, once, one direction, or
    recomputed:   a prefill of the n tokens on the decode instance (`swap_or_recompute.CostModel`: matrix
                  FLOPs at the measured matmul rate, causal attention at the measured attention rate).
Per token of context the transfer costs a constant, bytes_per_token / bandwidth; the prefill costs
b + c x n (attention grows with the context). So at a given bandwidth the transfer wins above
n* = (a - b) / c (a its cost per token), and always when a <= b; and at a given length the link needs at least
    break-even bandwidth = n x bytes_per_token / recompute_seconds(n),
which falls as n grows. The rates are the course's own H200 runs (`load_cost_model`); a FLOP count over
measured rates is a floor for a real prefill, so the figures favour recomputing, and peak link rates favour
transferring (real transfers add latency per message and rarely reach the peak).

The links, per direction, with where their figures come from:
- NVLink 4 (H100 / H200 SXM): 18 links, 900 GB/s both directions, 450 each way; the MLCommons inference
  v4.1 system description of NVIDIA's H200 (mlcommons/inference_results_v4.1:closed/NVIDIA/systems/
  H200-SXM-141GBx8_TRT_MaxQ.json, "18x 4th Gen NVLink, 900GB/s") and NVIDIA's H200 product page;
- PCIe 5.0 x16: 32 GT/s x 16 lanes, 128b/130b encoding (PCI-SIG), 63 GB/s each way (`PCIE5_X16_GBS`);
- InfiniBand NDR: 400 Gb/s per port, 50 GB/s (the same MLCommons system lists 400 Gb/s InfiniBand NICs);
- Ethernet 100 Gb/s: 12.5 GB/s.
"""
from __future__ import annotations

from dataclasses import dataclass

from pagedkv_lib.core.validation import check_positive_int

from .swap_or_recompute import PCIE5_X16_GBS, PREFILL_SHAPES, CostModel, PrefillShape


@dataclass(frozen=True)
class Link:
    name: str
    gbs: float            # GB/s in one direction, the peak


LINKS = (
    Link("NVLink 4", 450.0),
    Link("PCIe 5.0 x16", PCIE5_X16_GBS),
    Link("InfiniBand NDR 400G", 50.0),
    Link("Ethernet 100G", 12.5),
)


def transfer_seconds(shape: PrefillShape, num_tokens: int, gbs: float) -> float:
    """The K/V of `num_tokens` tokens over a link of `gbs` GB/s, one direction, at its peak."""
    check_positive_int("num_tokens", num_tokens)
    if not gbs > 0:
        raise ValueError(f"gbs: expected a bandwidth > 0, got {gbs}")
    return num_tokens * shape.kv.bytes_per_token / (gbs * 1e9)


def break_even_gbs(model: CostModel, shape: PrefillShape, num_tokens: int) -> float:
    """The bandwidth (GB/s) at which moving `num_tokens` tokens' K/V costs what recomputing them does."""
    check_positive_int("num_tokens", num_tokens)
    return num_tokens * shape.kv.bytes_per_token / model.recompute_seconds(shape, num_tokens) / 1e9


def transfer_crossover_tokens(model: CostModel, shape: PrefillShape, gbs: float) -> float:
    """The context length above which transferring beats recomputing; 0.0 when transferring always wins."""
    a = transfer_seconds(shape, 1, gbs)
    matrix, attention = shape.prefill_flops(1)
    b, c = matrix / (model.matmul_tflops * 1e12), attention / (model.attention_tflops * 1e12)
    return max(0.0, (a - b) / c)


def transfer_table(model: CostModel, links=LINKS, shapes=None) -> str:
    """Per model: KV bytes per token, recompute microseconds per token at 1 and 8,192 tokens, and for each
    link the transfer's microseconds per token and the length above which it beats recomputing."""
    shapes = list(PREFILL_SHAPES.values()) if shapes is None else shapes
    head = f"{'model':11s} {'KV/token':>8s} {'recompute us/token':>19s}  " + "  ".join(
        f"{link.name:>20s}" for link in links)
    lines = [head, f"{'':11s} {'':>8s} {'n=1':>9s} {'n=8192':>9s}  " + "  ".join(
        f"{'us/token, wins above':>20s}" for _ in links)]
    for shape in shapes:
        per_token = [1e6 * model.recompute_seconds(shape, n) / n for n in (1, 8192)]
        cells = []
        for link in links:
            cross = transfer_crossover_tokens(model, shape, link.gbs)
            where = "always" if cross == 0 else f"{cross:,.0f}"
            cells.append(f"{1e6 * transfer_seconds(shape, 1, link.gbs):7.2f}, {where:>12s}")
        lines.append(f"{shape.name:11s} {shape.kv.bytes_per_token // 1024:>4d} KiB {per_token[0]:9.2f} "
                     f"{per_token[1]:9.2f}  " + "  ".join(f"{c:>20s}" for c in cells))
    return "\n".join(lines)
