"""Cases of exercise 130, store_kvcache in Triton: exercise 124's cases and checks, with guard memory.

Device "cpu": exercise 124's cases (and two more) in Triton's interpreter; "cuda": larger shapes, natively.
Each cache is a view into a buffer with a NaN block before and after it: a write through slot -1 (offset
-ROW) or past the end of a row lands there, where it is seen. Shared with ex131: guard memory, the choice
of interpreter or GPU, and the benchmark. Symbols as in ex124; ROW = H_kv * D.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import torch

from pagedkv_lib.core.store_kvcache import store_kvcache as _oracle
from pagedkv_lib.judge.compare import diff
from pagedkv_lib.judge.outcome import Outcome, wrong
from pagedkv_lib.judge.registry import ROOT

from . import Case, ex124, fresh, observe

NAME = "store_kvcache_triton"
NEEDS_GPU = ("the benchmark runs natively on a CUDA GPU: python practice/judge.py {id} --device cuda --bench "
             "(on this device the kernels run in Triton's interpreter, far too slow to time)")
INTERPRETER_TROUBLE = {  # interpreter errors that are not the submission's fault -> what to do
    "only 0-dimensional arrays can be converted": "this Triton's interpreter cannot loop to a bound loaded "
        "from memory (range(0, tl.load(...))) under this NumPy: it calls int() on a 1-element array, which "
        "recent NumPy refuses. Upgrade triton (3.9 works), or grade on a GPU: --device cuda",
    "outside of the scope of a kernel": "Triton's interpreter needs TRITON_INTERPRET=1 before triton is "
        "first imported (its tl.sum, tl.max ... are made then, here for the GPU): run TRITON_INTERPRET=1 "
        "python practice/judge.py ID (in a notebook on a GPU: grade the file with --device cuda)",
}
EXTRA = [  # name, N, S, H_kv, D, slot_mapping, dtype, non-contiguous key/value
    ("row_of_15_ends_the_cache", 3, 4, 3, 5, [11, -1, 0, 6], "fp32", True),
    ("minus_one_first_and_last", 4, 4, 2, 4, [-1, 3, 15, -1], "bf16", False),
]
CUDA = [  # the "cuda" case set: larger shapes, natively on the GPU
    ("qkv_views_4096_tokens", 512, 16, 8, 128, "bf16", True, 4096),
    ("fp16_block_size_256", 12, 256, 8, 128, "fp16", False, 1000),
    ("row_of_320_fp32", 64, 16, 4, 80, "fp32", True, 777),
    ("block_size_1", 3000, 1, 2, 64, "bf16", True, 2049),
    ("one_token", 8, 16, 8, 128, "bf16", False, 1),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    tell_children(device)
    if device == "cuda":
        cases = [_cuda_case(f"cuda/{name}", *rest, seed=1000 * seed + 300 + i)   # slots drawn per seed
                 for i, (name, *rest) in enumerate(CUDA)]
    else:
        cases = ex124.build(seed) + [ex124._case(f"fixed/{name}", *rest, seed=200 + i)
                                     for i, (name, *rest) in enumerate(EXTRA)]
    for case in cases:
        case.args.update(device=device, k_cache=guarded(case.args["k_cache"]),
                         v_cache=guarded(case.args["v_cache"]))
        case.show[0] = case.show[0].replace("store_kvcache(", f"{NAME}(")
        case.show.append("k_cache and v_cache lie between NaN guard blocks: writes outside them are caught")
    return cases


def _cuda_case(name, N, S, H_kv, D, dtype, strided, T, seed) -> Case:
    gen = torch.Generator().manual_seed(seed)
    slots = torch.randperm(N * S, generator=gen)[:T]                 # [T] distinct slots
    slots[torch.rand(T, generator=gen) < 0.05] = -1                   # some padding tokens
    return ex124._case(name, N, S, H_kv, D, slots.tolist(), dtype, strided, seed)


# ----------------------------------------------------------------------------------------------------------
# guard memory and devices (shared with ex131)

def guarded(t: torch.Tensor, fill: float = float("nan")) -> torch.Tensor:
    """`t` [N, ...] copied into the middle of a buffer [N + 2, ...] whose first and last slices are `fill`:
    the returned view is contiguous, and its storage holds the guards."""
    buf = torch.full((t.shape[0] + 2, *t.shape[1:]), fill, dtype=t.dtype)    # [N + 2, ...]
    buf[1:-1] = t
    return buf[1:-1]


def whole(view: torch.Tensor) -> torch.Tensor:
    """All of the storage under `view`, as a 1-D tensor."""
    return torch.empty(0, dtype=view.dtype, device=view.device).set_(view.untyped_storage())


def outside(view: torch.Tensor) -> torch.Tensor:
    """The guard memory of a contiguous view: its storage before the view, then after it."""
    flat, start = whole(view), view.storage_offset()
    return torch.cat([flat[:start], flat[start + view.numel():]])


def to_device(t: torch.Tensor, device: str) -> torch.Tensor:
    """`t` on `device`, with the rest of its storage (the guards) moved along."""
    if device == "cpu":
        return t
    return whole(t).to(device).as_strided(t.shape, t.stride(), t.storage_offset())


def tell_children(device: str) -> None:
    """Triton makes its tl.sum, tl.max ... at its first import, for the interpreter if TRITON_INTERPRET=1:
    set it before the children fork, unless this process imported triton already (the CLI never does)."""
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1" if device == "cpu" else "0"


def use_device(ns: dict, names, device: str) -> None:
    """In the child: run the submission's kernels in the interpreter ("cpu") or natively ("cuda") whatever
    mode @triton.jit made them in, by re-wrapping every kernel among the graded functions' globals."""
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    interpret = device == "cpu"
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"      # kernels the submission makes later
    scopes = {id(g): g for g in (getattr(ns.get(n), "__globals__", None) for n in names) if g is not None}
    for scope in [ns, *scopes.values()]:
        for key, obj in list(scope.items()):
            if interpret and isinstance(obj, triton.JITFunction):
                scope[key] = InterpretedFunction(obj.fn)
            elif not interpret and isinstance(obj, InterpretedFunction):
                scope[key] = triton.jit(obj.fn)


def call(fn, *args):
    """fn(*args), naming the errors of older Triton interpreters that are not the submission's fault."""
    try:
        return fn(*args)
    except Exception as exc:
        if type(exc).__name__ == "InterpreterError":                # raised inside an interpreted kernel
            for words, advice in INTERPRETER_TROUBLE.items():
                if words in str(exc):
                    raise RuntimeError(advice) from exc
        raise


def fingerprint(t: torch.Tensor) -> str:
    """A read-only input, compared by its bytes (a whole copy would make the result frame large)."""
    data = t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
    return f"{list(t.shape)} {t.dtype} {hashlib.sha256(data).hexdigest()[:16]}"


def where(ns: dict, name: str, oracle, case: Case) -> str:
    """The device a case runs on: the oracle (in the judge's own process) always on the CPU."""
    if ns.get(name) is oracle:
        return "cpu"
    use_device(ns, [name], case.args["device"])
    return case.args["device"]


# ----------------------------------------------------------------------------------------------------------
# run and check

def run(ns, case: Case) -> dict:
    device = where(ns, NAME, _oracle, case)
    a = fresh(case.args)
    k_cache, v_cache = to_device(a["k_cache"], device), to_device(a["v_cache"], device)
    d = dict(a, qkv=a["qkv"].to(device))
    key, value = ex124.split_qkv(d)                                  # [T, H_kv, D], views if strided
    slots = a["slot_mapping"].to(device)
    call(ns[NAME], key, value, k_cache, v_cache, slots)
    return {"caches": observe([k_cache, v_cache]), "guards": observe([outside(k_cache), outside(v_cache)]),
            "inputs": [fingerprint(d["qkv"]), fingerprint(slots)]}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    found = diff(expected["guards"], got["guards"])
    if found is not None:
        return _guard_written(case, found)
    outcome = ex124.check(case, expected, got)
    if outcome.passed or not outcome.message.startswith(("k_cache[", "v_cache[")):
        return outcome
    a, which = case.args, outcome.message.startswith("v_cache")
    S, H_kv, D = a["k_cache"].shape[1:]
    row, slots = H_kv * D, a["slot_mapping"].tolist()
    n, s, h, d = (int(x) for x in outcome.message.split("[", 1)[1].split("]")[0].split(","))
    slot, e = n * S + s, h * D + d                                   # the slot and the element in its row
    if slot not in slots and slot - 1 in slots and e < (1 << (row - 1).bit_length()) - row:
        outcome.hint = (f"element {e} of the row after slot {slot - 1} was written: mask the row, offsets "
                        f"ROW = {row} and beyond belong to the next row")
    elif slot in slots and a["strided"]:
        t = slots.index(slot)
        start = (a["H"] + which * H_kv) * D                          # where key (value) begins in a qkv row
        packed = a["qkv"].flatten()[start + t * row + e]             # token t's element read with stride ROW
        if diff(observe(packed.item()), observe(got["caches"][which][n, s, h, d].item())) is None:
            outcome.hint = (f"key and value are views into a fused qkv here: token t's row starts at t * "
                            f"key.stride(0) = t * {a['qkv'].shape[1]}, not t * ROW = t * {row}")
    return outcome


def _guard_written(case: Case, found) -> Outcome:
    path, e, g = found
    which, i = (int(x) for x in path.replace("][", ",").strip("[]").split(","))
    cache = case.args[("k_cache", "v_cache")[which]]
    row, guard = cache.shape[2] * cache.shape[3], cache[0].numel()  # a guard: one block before, one after
    name = ("k_cache", "v_cache")[which]
    if i < guard:
        where_ = f"{guard - i} elements BEFORE {name} (in its row -{-(-(guard - i) // row)})"
        hint = ("a slot of -1 must be skipped: used as an offset, -1 * ROW lands just before the cache"
                if -1 in case.args["slot_mapping"].tolist() else "an offset below 0 was written")
    else:
        where_ = f"{i - guard} elements AFTER the end of {name}"
        hint = f"mask the row: offsets ROW = {row} and beyond belong to the next row (or lie past the cache)"
    return wrong(f"memory outside the cache was written: {where_}: expected {e}, got {g}", hint)


# ----------------------------------------------------------------------------------------------------------
# the benchmark (shared with ex131): the submission timed in the child, the library's kernel in a fresh
# process on the same inputs (in the child it is poisoned and its source hidden), both against a copy

def bench(ns, device: str) -> dict:
    """store_kvcache of T tokens (bf16, H_kv = 8, D = 128, key/value views into a fused qkv, S = 16)."""
    return run_bench(ns, device, sys.modules[__name__])


BENCH = {f"T={T}": T for T in (4096, 32768)}


def bench_inputs(label: str, device: str = "cuda", T: int | None = None):
    """(arguments, bytes moved) of one benchmark shape, the same in every process (seeded on the GPU)."""
    T, H, H_kv, D, S = T or BENCH[label], 32, 8, 128, 16
    gen = torch.Generator(device=device).manual_seed(T)
    qkv = torch.randn(T, (H + 2 * H_kv) * D, device=device, generator=gen).bfloat16()  # [T, (H+2H_kv) D]
    key = qkv[:, H * D : (H + H_kv) * D].view(T, H_kv, D)           # [T, H_kv, D] strided
    value = qkv[:, (H + H_kv) * D :].view(T, H_kv, D)
    slots = torch.randperm(4 * T, device=device, generator=gen)[:T].to(torch.int32)          # [T]
    k_cache = torch.zeros(4 * T // S, S, H_kv, D, dtype=torch.bfloat16, device=device)       # [N, S, H_kv, D]
    return (key, value, k_cache, torch.zeros_like(k_cache), slots), 2 * 2 * T * H_kv * D * 2 + 4 * T


def bench_correct(fn, args) -> bool:
    """One call of `fn` on fresh caches against PyTorch indexing."""
    key, value, k_cache, v_cache, slots = args
    T, row = key.shape[0], key.shape[1] * key.shape[2]
    k_cache.zero_(), v_cache.zero_()
    fn(*args)
    k_ref, v_ref = torch.zeros_like(k_cache), torch.zeros_like(v_cache)
    k_ref.view(-1, row)[slots.long()] = key.reshape(T, row)         # [T, ROW] rows by slot
    v_ref.view(-1, row)[slots.long()] = value.reshape(T, row)
    return torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)


def library_kernel():
    from pagedkv_lib.kernels import triton_store_kvcache as store_kvcache

    return store_kvcache.launch_store_kvcache


def run_bench(ns, device: str, module) -> dict:
    exercise_id = int(module.__name__.rsplit("ex", 1)[1])
    if device != "cuda":
        return {"skipped": NEEDS_GPU.format(id=exercise_id)}
    use_device(ns, [module.NAME], "cuda")
    copy_gbs = copy_bandwidth()
    library_us = library_times(exercise_id)
    out = {"device": torch.cuda.get_device_name(), "copy": f"{copy_gbs:.0f} GB/s (read + write); times: "
           "do_bench medians, L2 flushed, launch included; the library through its unchecked launcher"}
    for label in module.BENCH:
        args, nbytes = module.bench_inputs(label)
        correct = module.bench_correct(ns[module.NAME], args)
        mine, lib = time_us(lambda args=args: ns[module.NAME](*args)), library_us[label]
        gbs, lib_gbs = nbytes / (mine * 1e3), nbytes / (lib * 1e3)
        out[label] = (f"yours {mine:.1f} us = {gbs:.0f} GB/s = {gbs / copy_gbs:.0%} of copy; library "
                      f"{lib:.1f} us = {lib_gbs / copy_gbs:.0%}; yours/library time {mine / lib:.2f}; "
                      f"correct: {correct}")
        del args
    return out


def library_times(exercise_id: int) -> dict:
    """{label: microseconds} of the library's kernel on each benchmark shape, timed in a fresh process."""
    code = (f"import json; from pagedkv_lib.judge.cases import ex130, ex{exercise_id} as m; "
            f"print(json.dumps(ex130.time_library(m)))")
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=100,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths)))
    if proc.returncode != 0:
        raise RuntimeError(f"the library's benchmark failed: {proc.stderr[-600:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def time_library(module) -> dict:
    fn, times = module.library_kernel(), {}
    for label in module.BENCH:
        args = module.bench_inputs(label)[0]
        times[label] = time_us(lambda args=args: fn(*args))
    return times


def time_us(fn) -> float:
    """Median microseconds of fn() (triton.testing.do_bench: L2 flushed before each call, launch included)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3


def copy_bandwidth(nbytes: int = 2**30) -> float:
    """GB/s of a device-to-device copy, counting bytes read + written: the ceiling for both kernels."""
    src, dst = torch.randn(nbytes // 4, device="cuda"), torch.empty(nbytes // 4, device="cuda")  # 1 GiB
    return 2 * nbytes / (time_us(lambda: dst.copy_(src)) * 1e-6) / 1e9
