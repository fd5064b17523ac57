"""Comparing a submission's observations with the oracle's, and showing values small and readable."""
from __future__ import annotations

import torch

from pagedkv_lib.judge.outcome import Outcome, wrong


def show(value, focus: int | None = None, width: int = 16) -> str:
    """A short text for a value: lists abbreviated around `focus`, tensors as shape and dtype."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        if value.numel() <= 12:
            return f"tensor({value.tolist()}, {dtype})"
        return f"tensor of shape {list(value.shape)}, {dtype}"
    if isinstance(value, (list, tuple)) and len(value) > width:
        lo = 0 if focus is None else max(0, min(focus - width // 2, len(value) - width))
        head = "..., " if lo else ""
        tail = ", ..." if lo + width < len(value) else ""
        items = ", ".join(show(v) for v in value[lo : lo + width])
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        return f"{open_}{head}{items}{tail}{close} ({len(value)} items)"
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise equality where NaN equals NaN: [same shape] bool."""
    eq = a == b
    if a.is_floating_point():
        eq |= torch.isnan(a) & torch.isnan(b)
    return eq


def diff(expected, got, path: str = ""):
    """The first place where `got` differs from `expected`, exactly: (path, expected, got), or None."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return path, expected, got
        if got.shape != expected.shape or got.dtype != expected.dtype:
            return path, expected, got
        eq = same(expected, got)
        if bool(eq.all()):
            return None
        idx = tuple(int(i) for i in (~eq).nonzero()[0])
        return f"{path}[{', '.join(map(str, idx))}]", expected[idx].item(), got[idx].item()
    if type(expected) is not type(got):
        return path, expected, got
    if isinstance(expected, (list, tuple)):
        if len(expected) != len(got):
            return path, expected, got
        for i, (e, g) in enumerate(zip(expected, got)):
            found = diff(e, g, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(expected, dict):
        if set(expected) != set(got):
            return path, expected, got
        for k in expected:
            found = diff(expected[k], got[k], f"{path}[{k!r}]")
            if found:
                return found
        return None
    if isinstance(expected, float) and expected != expected and got != got:
        return None
    return None if expected == got else (path, expected, got)


def kind(value) -> str:
    """What a value is, for 'expected a list of 6 ints, got tensor' messages."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}, {str(value.dtype).replace('torch.', '')}"
    if isinstance(value, dict) and "__opaque__" in value:
        return f"an object of type {value['__opaque__']}"
    if isinstance(value, (list, tuple)):
        types = sorted({type(v).__name__ for v in value})
        return f"a {type(value).__name__} of {len(value)} ({', '.join(types) or 'empty'})"
    return f"{type(value).__name__} {show(value)}"


def int_list(name: str, expected: list, got, hint_for) -> Outcome | None:
    """`got` must be a list of exactly the expected ints; `hint_for(i, e, g)` explains a difference."""
    if type(got) is not list or any(type(v) is not int for v in got):
        return wrong(f"{name}: expected a list of {len(expected)} ints, got {kind(got)}",
                     "return a plain Python list of ints (use .tolist() on a tensor)")
    if len(got) != len(expected):
        return wrong(f"{name}: expected {len(expected)} items, got {len(got)}",
                     hint_for(None, expected, got), [f"expected {show(expected)}", f"got      {show(got)}"])
    for i, (e, g) in enumerate(zip(expected, got)):
        if e != g:
            return wrong(f"{name}[{i}]: expected {e}, got {g}", hint_for(i, e, g),
                         [f"expected {show(expected, i)}", f"got      {show(got, i)}"])
    return None


def close(name: str, expected: torch.Tensor, got, atol: float, rtol: float) -> Outcome:
    """Floating-point check at stated tolerances; reports the first bad element, how many are off (NaN and
    inf counted apart) and the max abs error over the finite ones."""
    if not isinstance(got, torch.Tensor):
        return wrong(f"{name}: expected {kind(expected)}, got {kind(got)}")
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return wrong(f"{name}: expected {kind(expected)}, got {kind(got)}",
                     "the output has the query's shape and dtype")
    e, g = expected.double(), got.double()
    err = (e - g).abs()
    finite = torch.isfinite(err)
    max_err = float(err[finite].max()) if bool(finite.any()) else float("nan")
    bad = ~(err <= atol + rtol * e.abs())            # NaN or inf in got counts as bad
    if not bool(bad.any()):
        return Outcome(max_abs_err=max_err)
    idx = tuple(int(i) for i in bad.nonzero()[0])
    where = ", ".join(map(str, idx))
    odd = {word: int((bad & test(g)).sum()) for word, test in (("NaN", torch.isnan), ("inf", torch.isinf))}
    odd_text = ", ".join(f"{n} {word}" for word, n in odd.items() if n)
    size = f"{int(bad.sum())} of {bad.numel()} elements off" + (f" ({odd_text})" if odd_text else "")
    if bool(finite.any()):
        size += f", max abs error {max_err:.3g}" + (" over the finite ones" if odd_text else "")
    return wrong(f"{name}[{where}]: expected {float(e[idx]):.6g}, got {float(g[idx]):.6g} "
                 f"(atol {atol:g}, rtol {rtol:g}; {size})", max_abs_err=max_err)
