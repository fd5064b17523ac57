"""The KV memory of hybrid models: layers grouped as vLLM groups them, one page size, bytes per sequence.

Exports: `HybridModel`, `HYBRID_MODELS`, `layer_pattern`, `layer_groups`, `page_bytes`, `state_block_size`,
`blocks_per_sequence`, `kv_bytes_per_sequence`, `sequences_that_fit`, `capacity_table`.
Units: bytes, tokens, blocks.

vLLM's rule (vllm-project/vllm@1153c0c:docs/design/hybrid_kv_cache_manager.md, "Allocation"): layers of one
kind form KV cache groups of the SAME number of layers, the smallest count among the kinds (a kind whose count
is not a multiple gets a last group padded with empty layers: Gemma-3-27B's 52 local and 10 global layers make
1 + 6 groups of 10); one block of any group then holds block_size tokens of each of its layers, so every block
has the same page size, layers_per_group x block_size x (bytes per token and layer), and one pool serves all
groups. A sequence of L computed tokens holds, per group,
    full attention:   ceil(L / block_size) blocks
    sliding window W: ceil(L / block_size) - floor(max(0, L - W + 1) / block_size) blocks (the rest left the
                      window: sliding_window_manager.py)
    state:            1 block (the state, padded to the page: `state_block_size` picks the block_size).
The layer patterns come from the models' own code: Gemma 3 interleaves 5 local layers per global one
(transformers@008f5c8 models/gemma3/configuration_gemma3.py, `sliding_window_pattern` 6, "5:1"; the Gemma 3
Technical Report, arXiv:2503.19786, gives its local span as 1024 tokens); gpt-oss alternates, every even layer
sliding with a window of 128 (openai/gpt-oss@0568dfc gpt_oss/torch/model.py: `layer_idx % 2 == 0`,
`sliding_window: int = 128`); Qwen3-Next makes every 4th of its 48 layers full attention and the others
linear attention (transformers@008e574 models/qwen3_next/configuration_qwen3_next.py,
`full_attention_interval` 4). The course's comparison keeps ONE attention shape (48 layers, 8 KV heads,
head_dim 128, bf16) and changes only the pattern, so the differences come from the pattern alone.
"""
from __future__ import annotations

from dataclasses import dataclass

from pagedkv_lib.core.kv_cache_coordinator import KVCacheGroupSpec
from pagedkv_lib.core.validation import check_positive_int
from pagedkv_lib.studies.memory import GiB, kv_bytes_per_token

LAYER_KINDS = ("full_attention", "sliding_window", "state")


@dataclass(frozen=True)
class HybridModel:
    """The KV-relevant shape of a model whose layers differ: one kind per layer (LAYER_KINDS)."""

    name: str
    layer_kinds: tuple[str, ...]
    num_kv_heads: int
    head_dim: int
    dtype_bytes: int
    sliding_window: int | None = None
    state_bytes: int = 0           # per state layer and request

    @property
    def token_bytes_per_layer(self) -> int:
        """K and V of one token in one attention layer."""
        return kv_bytes_per_token(1, self.num_kv_heads, self.head_dim, self.dtype_bytes)

    def count(self, kind: str) -> int:
        return sum(1 for k in self.layer_kinds if k == kind)


def layer_pattern(num_layers: int, period: int, kind: str) -> tuple[str, ...]:
    """Every `period`-th layer full attention (the last of each period), the others `kind`."""
    return tuple("full_attention" if (i + 1) % period == 0 else kind for i in range(num_layers))


SHAPE = dict(num_kv_heads=8, head_dim=128, dtype_bytes=2)
HYBRID_MODELS: dict[str, HybridModel] = {
    m.name: m
    for m in (
        HybridModel("full attention", layer_pattern(48, 1, "sliding_window"), **SHAPE),
        HybridModel("5:1 local:global, W 1024", layer_pattern(48, 6, "sliding_window"), **SHAPE,
                    sliding_window=1024),
        HybridModel("alternating, W 128", layer_pattern(48, 2, "sliding_window"), **SHAPE,
                    sliding_window=128),
    )
}


def layer_groups(model: HybridModel) -> tuple[int, list[KVCacheGroupSpec]]:
    """(layers per group, one KVCacheGroupSpec per group): vLLM's grouping by the smallest layer count."""
    counts = {k: model.count(k) for k in LAYER_KINDS if model.count(k)}
    per_group = min(counts.values())
    groups = []
    for kind, n in counts.items():
        window = model.sliding_window if kind == "sliding_window" else None
        groups += [KVCacheGroupSpec(kind, window)] * -(-n // per_group)
    return per_group, groups


def page_bytes(model: HybridModel, block_size: int) -> int:
    """Bytes of one block: block_size tokens of each layer of a group (a state padded to the same page)."""
    check_positive_int("block_size", block_size)
    per_group, _ = layer_groups(model)
    page = per_group * block_size * model.token_bytes_per_layer
    if model.count("state") and per_group * model.state_bytes > page:
        raise ValueError(f"block_size: expected a page that holds a state ({model.state_bytes} bytes per "
                         f"layer), got {block_size} tokens (state_block_size gives the smallest)")
    return page


def state_block_size(model: HybridModel, multiple_of: int = 16) -> int:
    """The smallest block_size, a multiple of `multiple_of`, whose page holds one state layer's state (vLLM's
    "Case 4": the attention block grows until block_size x kv bytes per token >= the state)."""
    check_positive_int("multiple_of", multiple_of)
    tokens = -(-model.state_bytes // model.token_bytes_per_layer)
    return max(multiple_of, -(-tokens // multiple_of) * multiple_of)


def blocks_per_sequence(model: HybridModel, context_len: int, block_size: int) -> int:
    """Blocks (of every group) a sequence holds once its `context_len` tokens are computed."""
    check_positive_int("context_len", context_len)
    _, groups = layer_groups(model)
    full = -(-context_len // block_size)
    total = 0
    for spec in groups:
        if spec.kind == "full_attention":
            total += full
        elif spec.kind == "sliding_window":
            total += full - max(0, context_len - spec.sliding_window + 1) // block_size
        else:
            total += 1
    return total


def kv_bytes_per_sequence(model: HybridModel, context_len: int, block_size: int = 16) -> int:
    return blocks_per_sequence(model, context_len, block_size) * page_bytes(model, block_size)


def sequences_that_fit(model: HybridModel, budget_bytes: int, context_len: int, block_size: int = 16) -> int:
    """Sequences of `context_len` tokens a pool of `budget_bytes` holds, in whole blocks."""
    check_positive_int("budget_bytes", budget_bytes)
    num_blocks = budget_bytes // page_bytes(model, block_size)
    return num_blocks // blocks_per_sequence(model, context_len, block_size)


def capacity_table(models=tuple(HYBRID_MODELS), context_lens=(1024, 4096, 16384, 32768, 131072),
                   budget_bytes: int = 40 * GiB, block_size: int = 16) -> list[dict]:
    """One row per (model, context length): KV MiB per sequence, sequences that fit, and that against the
    same model with full attention everywhere."""
    rows = []
    for name in models:
        model = HYBRID_MODELS[name]
        for n in context_lens:
            fit = sequences_that_fit(model, budget_bytes, n, block_size)
            base = sequences_that_fit(HYBRID_MODELS["full attention"], budget_bytes, n, block_size)
            rows.append({"model": name, "context_len": n,
                         "kv_mib": kv_bytes_per_sequence(model, n, block_size) / 2**20, "fit": fit,
                         "vs_full": fit / base if base else None})       # None: full attention fits none
    return rows
