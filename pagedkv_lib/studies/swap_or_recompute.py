"""Swap or recompute: what it costs to bring back a preempted request's K/V, with numbers measured on an H200.

Exports: `PrefillShape`, `PREFILL_SHAPES`, `HostLink`, `fit_host_link`, `CostModel`, `load_cost_model`,
`PREFILL_RESULT`, `PREEMPTION_RESULT`, `PCIE5_X16_GBS`, `crossover_table`, `preemption_seconds`,
`PRICING_MODES`.
`python -m pagedkv_lib.studies.swap_or_recompute` prints the crossover table.
Units: tokens, bytes, seconds; GB = 1e9 bytes, TFLOP = 1e12 FLOPs.

When the pool runs dry, a running request of n tokens (prompt + generated so far) is preempted. Its K/V is
    swapped:     copied to host memory and back, 2 x n x bytes_per_token over PCIe (out, then in), or
    recomputed:  dropped, and rebuilt by a prefill of the n tokens when the request resumes.
A copy of b bytes over the host link takes overhead + b / bandwidth (`HostLink`, fitted to copies timed on
the H200). Swapping a paged cache is either one copy each way of K/V gathered first ("contiguous"), or, as
vLLM V0 did, one copy per block, per layer, for K and for V ("per block"): 2 x L x ceil(n / S) copies of
S x H_kv x D x dtype bytes each, where the overhead of a few microseconds per copy dominates small blocks.
A prefill costs 2 x P x n FLOPs in the weight matrices (P non-embedding parameters) plus 2 x L x H x D x n^2
in causal attention (the count of benchmarks/bench_prefill.py), at the dense matrix rate and the best causal
prefill-attention rate of `bench_prefill.json`. That is the MARGINAL cost of a recompute batched with other
work: a whole-model forward timed alone on the same GPU (benchmarks/bench_preemption.py) comes close to it
for the 7B and 13B shapes and is far slower for a 0.6B model on short prompts (launch overhead); notebook 16
prints both.
With a = swap seconds per token, b = the matrix part per token and c the attention coefficient, recompute
b n + c n^2 beats swap a n exactly when n < (a - b) / c; if a <= b, swap always wins.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pagedkv_lib.studies import results
from pagedkv_lib.studies.memory import MODELS, ModelShape

PREFILL_RESULT = "bench_prefill.json"        # benchmarks/bench_prefill.py on the H200
PREEMPTION_RESULT = "preemption_h200.json"   # benchmarks/bench_preemption.py on the H200
# PCIe 5.0: 32 GT/s per lane, 128b/130b encoding (PCI-SIG); x16, one direction, in GB/s
PCIE5_X16_GBS = 32 * 16 * 128 / 130 / 8


@dataclass(frozen=True)
class PrefillShape:
    """The compute-relevant shape of a model, from its Hugging Face `config.json`, with its KV shape."""

    kv: ModelShape          # layers, KV heads, head_dim, cache dtype (studies.memory.MODELS)
    hidden_size: int
    intermediate_size: int
    num_heads: int          # query heads
    gated_mlp: bool = True  # gate, up and down projections (SwiGLU); False: OPT's fc1, fc2

    @property
    def name(self) -> str:
        return self.kv.name

    @property
    def non_embedding_params(self) -> int:
        """Weights a token goes through: Q, K, V, O projections and the MLP, every layer (norms and biases,
        a few thousand per layer, left out; the LM head runs on the last token only)."""
        E, D, kv = self.hidden_size, self.kv.head_dim, self.kv
        attention = E * self.num_heads * D * 2 + E * kv.num_kv_heads * D * 2         # Q and O, K and V
        mlp = (3 if self.gated_mlp else 2) * E * self.intermediate_size
        return kv.num_layers * (attention + mlp)

    def prefill_flops(self, num_tokens: int) -> tuple[float, float]:
        """(matrix FLOPs, attention FLOPs) of a prefill of `num_tokens` tokens with nothing cached."""
        n = num_tokens
        attention = 2.0 * self.kv.num_layers * self.num_heads * self.kv.head_dim * n * n
        return 2.0 * self.non_embedding_params * n, attention

    def block_copy_bytes(self, block_size: int) -> int:
        """Bytes of one block of one layer's K (or V) cache: the unit vLLM V0's swap copied."""
        return block_size * self.kv.num_kv_heads * self.kv.head_dim * self.kv.dtype_bytes


PREFILL_SHAPES: dict[str, PrefillShape] = {s.name: s for s in (
    PrefillShape(MODELS["Qwen3-0.6B"], hidden_size=1024, intermediate_size=3072, num_heads=16),
    PrefillShape(MODELS["Qwen2.5-7B"], hidden_size=3584, intermediate_size=18944, num_heads=28),
    PrefillShape(MODELS["LLaMA-2-7B"], hidden_size=4096, intermediate_size=11008, num_heads=32),
    PrefillShape(MODELS["OPT-13B"], hidden_size=5120, intermediate_size=20480, num_heads=40, gated_mlp=False),
)}


@dataclass(frozen=True)
class HostLink:
    """A GPU's link to host memory: one copy of b bytes takes overhead_s + b / (gbs x 1e9), per direction."""

    d2h_gbs: float            # device to host: swap out
    h2d_gbs: float            # host to device: swap in
    d2h_overhead_s: float = 0.0
    h2d_overhead_s: float = 0.0
    label: str = ""

    def round_trip_seconds(self, nbytes: float, num_copies: int = 1) -> float:
        """`nbytes` out and back, each way split into `num_copies` equal copies."""
        return (num_copies * self.d2h_overhead_s + nbytes / (self.d2h_gbs * 1e9)
                + num_copies * self.h2d_overhead_s + nbytes / (self.h2d_gbs * 1e9))


def fit_host_link(rows: list[dict], label: str) -> HostLink:
    """Least-squares overhead + bytes / bandwidth through per-copy times (rows of bench_preemption.py)."""
    chunk = np.array([r["chunk_bytes"] for r in rows], dtype=float)                   # [copies sizes]
    fits = {}
    for d in ("d2h", "h2d"):
        slope, intercept = np.polyfit(chunk, np.array([r[f"{d}_us_per_copy"] for r in rows]) * 1e-6, 1)
        fits[d] = (float(1.0 / slope / 1e9), float(intercept))
    return HostLink(fits["d2h"][0], fits["h2d"][0], fits["d2h"][1], fits["h2d"][1], label)


@dataclass(frozen=True)
class CostModel:
    """One GPU: its host link, its dense matrix rate and its causal prefill-attention rate."""

    link: HostLink
    matmul_tflops: float
    attention_tflops: float
    source: str               # where each number comes from

    def swap_seconds(self, shape: PrefillShape, num_tokens: int, block_size: int | None = None) -> float:
        """K/V of `num_tokens` tokens out to host memory and back: gathered into one copy each way
        (block_size None), or one copy per block of `block_size` tokens, per layer, for K and for V."""
        nbytes = num_tokens * shape.kv.bytes_per_token
        if block_size is None:
            return self.link.round_trip_seconds(nbytes)
        copies = 2 * shape.kv.num_layers * -(-num_tokens // block_size)
        return self.link.round_trip_seconds(copies * shape.block_copy_bytes(block_size), copies)

    def recompute_seconds(self, shape: PrefillShape, num_tokens: int) -> float:
        """A prefill of `num_tokens` tokens at the measured rates (its marginal cost, module docstring)."""
        matrix, attention = shape.prefill_flops(num_tokens)
        return matrix / (self.matmul_tflops * 1e12) + attention / (self.attention_tflops * 1e12)

    def crossover_tokens(self, shape: PrefillShape, block_size: int | None = None) -> float:
        """The length above which swapping is cheaper (recompute wins below it); 0.0 if swap always wins.
        The swap's cost per token is its slope: one more token (one more block, per block), fixed costs
        of a single copy each way left out."""
        unit = block_size or 1
        swap = self.swap_seconds
        return self.recompute_wins_below(shape, (swap(shape, 2 * unit, block_size)
                                                 - swap(shape, unit, block_size)) / unit)

    def recompute_wins_below(self, shape: PrefillShape, seconds_per_token: float) -> float:
        """The length below which a prefill (b n + c n^2) costs less than a cost linear in the tokens
        (`seconds_per_token` x n): (a - b) / c, or 0.0 if the linear cost always wins (a <= b)."""
        b = shape.prefill_flops(1)[0] / (self.matmul_tflops * 1e12)
        c = shape.prefill_flops(1)[1] / (self.attention_tflops * 1e12)
        return max(0.0, (seconds_per_token - b) / c)


def best_attention_tflops(prefill: dict, shape: str = "cold8x2048") -> tuple[float, str]:
    """The fastest correct method's TFLOP/s on a cold causal prefill of bench_prefill.json, and its name."""
    rows = [s for s in prefill["shapes"] if s["shape"] == shape]
    if not rows:
        raise ValueError(f"shape: expected one of {[s['shape'] for s in prefill['shapes']]}, got {shape!r}")
    name, best = max(((k, m) for k, m in rows[0]["methods"].items() if m.get("correct")),
                     key=lambda km: km[1]["tflops"])
    return float(best["tflops"]), name + (f" [{best['backend']}]" if best.get("backend") else "")


def load_cost_model(folder: Path | str = results.RESULTS, link: str = "measured") -> CostModel:
    """Rates from the results in `folder`: bench_prefill.json always; the host link fitted to the
    graph-timed copies of preemption_h200.json ("measured"), or PCIe 5.0 x16's nominal rate with no overhead
    ("nominal", or when that file is absent)."""
    if link not in ("measured", "nominal"):
        raise ValueError(f"link: expected 'measured' or 'nominal', got {link!r}")
    prefill = results.load(PREFILL_RESULT, folder)
    preemption = results.stored(PREEMPTION_RESULT, folder)
    attention, method = best_attention_tflops(prefill)
    source = (f"{prefill['env']['device']}, {PREFILL_RESULT}: dense bf16 matmul "
              f"{prefill['matmul_tflops']:.0f} TFLOP/s, causal prefill attention {attention:.0f} TFLOP/s "
              f"({method})")
    if link == "nominal" or preemption is None:
        host = HostLink(PCIE5_X16_GBS, PCIE5_X16_GBS, label=f"PCIe 5.0 x16 nominal, {PCIE5_X16_GBS:.1f} GB/s "
                                                            "each way, no per-copy overhead")
    else:
        rows = [r for r in preemption["pcie"]["per_block"] if r.get("timing") == "cuda graph" and "d2h" in r]
        host = fit_host_link(rows, f"{PREEMPTION_RESULT}, pinned copies timed in a CUDA graph")
    return CostModel(host, prefill["matmul_tflops"], attention, f"{source}; host link: {host.label}")


def crossover_table(model: CostModel, lengths=(512, 2048, 8192, 32768), block_size: int | None = None) -> str:
    """Per model shape: KV bytes per token, swap and recompute milliseconds at `lengths`, the crossover."""
    cols = "  ".join(f"{f'n={n}':>17s}" for n in lengths)
    lines = [f"{'model':11s} {'KV/token':>9s}  {cols}  recompute wins below",
             f"{'':11s} {'':>9s}  " + "  ".join(f"{'swap / recompute':>17s}" for _ in lengths)]
    for shape in PREFILL_SHAPES.values():
        cells = [f"{1e3 * model.swap_seconds(shape, n, block_size):7.2f} / "
                 f"{1e3 * model.recompute_seconds(shape, n):7.2f}" for n in lengths]
        cross = model.crossover_tokens(shape, block_size)
        where = "never (swap wins)" if cross == 0 else f"{cross:,.0f} tokens"
        lines.append(f"{shape.name:11s} {shape.kv.bytes_per_token // 1024:>5d} KiB  " + "  ".join(cells)
                     + f"  {where}")
    return "\n".join(lines)


PRICING_MODES = ("swap", "recompute", "cheaper")


def preemption_seconds(preempted_lengths, shape: PrefillShape, model: CostModel, mode: str,
                       block_size: int | None = None) -> float:
    """Seconds a run's preemptions cost: each length swapped out and back ("swap", one copy each way, or per
    block of `block_size`), recomputed by a prefill ("recompute"), or whichever is cheaper for that length
    ("cheaper": the choice an engine could make per preemption with this model)."""
    if mode not in PRICING_MODES:
        raise ValueError(f"mode: expected one of {PRICING_MODES}, got {mode!r}")
    total = 0.0
    for n in (int(k) for k in preempted_lengths):
        swap, recompute = model.swap_seconds(shape, n, block_size), model.recompute_seconds(shape, n)
        total += {"swap": swap, "recompute": recompute, "cheaper": min(swap, recompute)}[mode]
    return total


def main() -> None:
    model = load_cost_model()
    print(model.source, end="\n\n")
    print("swap gathered into one copy each way:")
    print(crossover_table(model), end="\n\n")
    print("swap one copy per 16-token block, layer, K and V (vLLM V0):")
    print(crossover_table(model, block_size=16), end="\n\n")
    nominal = load_cost_model(link="nominal")
    print(f"with the nominal link ({nominal.link.label}):")
    print(crossover_table(nominal))


if __name__ == "__main__":
    main()
