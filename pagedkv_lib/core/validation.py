"""Argument checks shared by the library: each error says what was expected and what was given."""

from __future__ import annotations

import torch

INDEX_DTYPES = (torch.int32, torch.int64)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_tensor(name: str, t, *, ndim: int | None = None, dtypes=None) -> None:
    """Raise TypeError unless `t` is a tensor of one of `dtypes`; ValueError unless it has `ndim` dims."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(t.shape)}")
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name}: expected dtype in ({names}), got {str(t.dtype).replace('torch.', '')}")


def check_shape(name: str, t: torch.Tensor, expected: tuple, symbols: str = "") -> None:
    """Raise ValueError unless t.shape == expected (None in `expected` matches any size)."""
    shape = tuple(t.shape)
    ok = len(shape) == len(expected) and all(e is None or e == s for e, s in zip(expected, shape))
    if not ok:
        want = (
            "("
            + ", ".join("*" if e is None else str(e) for e in expected)
            + ("," if len(expected) == 1 else "")
            + ")"
        )
        hint = f" {symbols}" if symbols else ""
        raise ValueError(f"{name}: expected shape {want}{hint}, got {shape}")


def check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")


def check_gqa(num_heads: int, num_kv_heads: int) -> int:
    """Return the number of query heads per KV head; ValueError if it is not a whole number."""
    if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
        raise ValueError(f"GQA: num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    return num_heads // num_kv_heads


def check_block_table(
    block_table, num_tokens: int, block_size: int, num_blocks: int | None = None, name: str = "block_table"
) -> None:
    """A table must hold ceil(num_tokens / block_size) valid block ids (more entries are allowed)."""
    needed = -(-num_tokens // block_size)
    valid = [b for b in block_table[:needed] if b >= 0]
    if len(valid) < needed:
        raise ValueError(
            f"{name}: {num_tokens} tokens at block_size {block_size} need {needed} blocks, "
            f"the table has {len(valid)} valid entries: {list(block_table)[:8]}"
        )
    if num_blocks is not None:
        bad = [b for b in valid if b >= num_blocks]
        if bad:
            raise ValueError(f"{name}: block id {bad[0]} out of range for {num_blocks} blocks")


def check_no_lookahead(num_lookahead_tokens: int) -> None:
    """For a block manager without speculative decoding: lookahead slots only on the hash-chain BlockManager,
    whose rollback.truncate releases the draft blocks."""
    if num_lookahead_tokens != 0:
        raise ValueError(f"num_lookahead_tokens: expected 0 (speculative decoding runs on the hash-chain "
                         f"BlockManager, whose rollback.truncate releases draft blocks), "
                         f"got {num_lookahead_tokens!r}")
