"""What the Triton exercises' cases share (130, 131, 133, 135): guard memory, the device a kernel runs on, the
kernels a submission launched, the one tl.dot rule, the attention kernels' hints, the interpreter's known
troubles, and the `--bench` figures.

Guard memory: every output a kernel writes is a view into a buffer with a NaN block before and after it, so
a write through slot -1 or past a row lands where the check sees it. `wild_writes` names, in the child right
after the case, the tensor and the offsets written outside it (observation key "wild_writes"): that case
fails, and the judge runs the next case in a fresh child, since in Triton's interpreter a store past the
guards may have corrupted the child's heap. Devices: the "cpu" case sets run the
submission's kernels in Triton's interpreter, "cuda" natively, whatever mode @triton.jit made them in.
Benchmark: the child times the submission (`bench_submission`); the parent, once every child has exited,
times the library's kernel on the same inputs and writes the report (`bench_report`). A case module that
has a benchmark defines NAME, BENCH (label -> shape), bench_inputs(label, device), bench_correct(fn, args)
and library_kernel(). An exercise whose card has a speed bar (judge/speed.py) also defines work(label) (bytes
or FLOPs of one call) and bench_inputs(..., seed=): the child times each call on the bar's shape separately,
on fresh inputs (`timed_calls`, with the timer's functions taken before the submission was imported), and
the parent checks those calls and measures the ceiling itself (`speed_clause`).
Launches: each contract says the work is done by a Triton kernel launched by the graded function, so `call`
counts the launches during the call (the oracle, PyTorch, launches none and is not counted) and the check
turns a count of 0 into a wrong answer (`not_launched`).
The dot rule: `call` runs the submission under triton_primer.gpu_dot_rule, so that on the CPU every Triton
exercise refuses a tl.dot with a dimension under 16, as a GPU's compiler does (triton_primer.DOT_RULE).
Stores: a launch is not the work, and values alone cannot tell a kernel's answer from PyTorch's. On the CPU
`call` also records the addresses every store of the interpreter wrote (`recording_stores`); in the child
`stored_elements` maps them onto each output (observation key "stored": name -> a bool mask of its shape),
and the parent's check (`written_outside_the_kernel`) turns an element the case expects the kernel to write
and no kernel stored into a wrong answer. A GPU's stores cannot be traced: there the clause is not checked
(CPU_ONLY, which the report of a --device cuda run names).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import statistics
import sys

import numpy as np
import torch

from pagedkv_lib.judge import registry, speed
from pagedkv_lib.judge.cases.attention_cases import GARBAGE, NAN_EVERYWHERE, RECIPE, TOLERANCE
from pagedkv_lib.judge.cases.compare import show
from pagedkv_lib.judge.outcome import Outcome, wrong
from pagedkv_lib.kernels.triton_primer import gpu_dot_rule

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


# ----------------------------------------------------------------------------------------------------------
# guard memory

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


def wild_writes(name: str, view: torch.Tensor) -> list[str]:
    """Where a kernel wrote outside `view`, a contiguous view made by `guarded` (or `outside`'s like): one
    line per side, in offsets counted from the view's first element (-1 is the element just before it,
    view.numel() the one just after its last). [] when the guards still hold only NaN."""
    flat, start, n = whole(view), view.storage_offset(), view.numel()
    before = (~flat[:start].isnan()).nonzero().flatten() - start          # [k] offsets < 0
    after = (~flat[start + n :].isnan()).nonzero().flatten() + n          # [k] offsets >= n
    shape = f"{name} (shape {list(view.shape)}, {n} elements: offsets 0..{n - 1})"
    lines = []
    for offsets, side in ((before, "before its first element"), (after, "after its last element")):
        if len(offsets):
            lo, hi = int(offsets.min()), int(offsets.max())
            span = f"offset {lo}" if lo == hi else f"offsets {lo}..{hi}"
            lines.append(f"{shape}: {len(offsets)} element(s) written {side}, at {span}")
    return lines


def wrote_outside(got: dict, hint: str) -> Outcome | None:
    """A wrong answer naming the memory a kernel wrote outside its outputs (got["wild_writes"]), else None."""
    wild = got.get("wild_writes") if isinstance(got, dict) else None
    if not wild:
        return None
    return wrong(f"memory outside the output was written: {'; '.join(map(str, wild))}", hint,
                 ["the judge ran the next case in a fresh process: a store outside a tensor may corrupt "
                  "the process's memory"])


def to_device(t: torch.Tensor, device: str) -> torch.Tensor:
    """`t` on `device`, with the rest of its storage (the guards) moved along."""
    if device == "cpu":
        return t
    return whole(t).to(device).as_strided(t.shape, t.stride(), t.storage_offset())


def guard_attention_inputs(args: dict, device: str, row_pad: int = 0, table_guard: int = 512) -> None:
    """In place: the caches between NaN guard blocks, and the block table a view into a bigger table whose
    rows are `row_pad` entries longer (stride(0) = M + row_pad) and which ends in rows of -1 (at least
    `table_guard` entries), so a kernel that reads past a row, or past the last one, reads -1 (then NaN)."""
    B, M = args["block_tables"].shape
    width = M + row_pad
    table = torch.full((B + 1 + table_guard // width, width), -1, dtype=torch.int32)   # [B + guard, M + pad]
    table[:B, :M] = args["block_tables"]
    args.update(device=device, k_cache=guarded(args["k_cache"]), v_cache=guarded(args["v_cache"]),
                block_tables=table[:B, :M])                                            # [B, M]


def random_attention_options(rng) -> dict:
    """make_case options of a random attention case: dtype, garbage, padding, pool size, scale."""
    return {"dtype": rng.choice(["fp32", "fp16", "bf16"]), "garbage": rng.choice(["nan", "huge"]),
            "extra_padding": rng.randint(0, 2), "exact_pool": rng.random() < 0.5,
            "scale": rng.choice([None, rng.uniform(0.05, 1.0)])}


def fingerprint(t: torch.Tensor) -> str:
    """A read-only input, compared by its bytes (a whole copy would make the result frame large)."""
    data = t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
    return f"{list(t.shape)} {t.dtype} {hashlib.sha256(data).hexdigest()[:16]}"


# ----------------------------------------------------------------------------------------------------------
# devices

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


def loaded(target: str):
    """The library object `target` ("module:attr") if this process has imported its module, else None: the
    judge has the oracle (it runs it); a sandboxed child never does (harness.py leaves its file out)."""
    module, _, attr = target.partition(":")
    return getattr(sys.modules.get(module), attr, None)


def where(ns: dict, name: str, oracle, device: str) -> str:
    """The device a case runs on: the oracle (in the judge's own process) always on the CPU."""
    if ns.get(name) is oracle:
        return "cpu"
    use_device(ns, [name], device)
    return device


# ----------------------------------------------------------------------------------------------------------
# launches

def call(ns: dict, name: str, oracle, *args) -> tuple:
    """(ns[name](*args), the number of Triton kernels it launched, the number of tl.dot it ran, the stores
    the interpreter made), the counts and the stores None for the oracle (PyTorch); the submission runs under
    the GPU's tl.dot rule (a no-op natively, where the dots are not counted: None); natively the stores are
    an empty record (`stored_elements` maps them onto CPU tensors only); the errors of older Triton
    interpreters that are not the submission's fault are named."""
    fn = ns[name]
    try:
        if fn is oracle:
            return fn(*args), None, None, None
        with counting_launches() as launches, gpu_dot_rule() as dots, recording_stores() as stores:
            result = fn(*args)
        return result, launches[0], None if dots is None else dots[0], stores
    except Exception as exc:
        if type(exc).__name__ == "InterpreterError":                # raised inside an interpreted kernel
            for words, advice in INTERPRETER_TROUBLE.items():
                if words in str(exc):
                    raise RuntimeError(advice) from exc
        raise


@contextlib.contextmanager
def counting_launches():
    """Inside: [the number of Triton kernels launched so far], natively or in the interpreter. The launch
    path (`run`, where `kernel[grid](...)` and an autotuner end up; `__getitem__` where an older
    interpreter defines its own) of triton's JITFunction and the interpreter's InterpretedFunction is
    wrapped while inside."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    launches, saved = [0], []

    def counted(launch):
        def run(self, *args, **kwargs):
            if not kwargs.get("warmup"):
                launches[0] += 1
            return launch(self, *args, **kwargs)
        return run

    def counted_grid(getitem):
        def index(self, grid):
            launcher = getitem(self, grid)

            def launch(*args, **kwargs):
                launches[0] += 1
                return launcher(*args, **kwargs)
            return launch
        return index

    for cls in (JITFunction, InterpretedFunction):
        for attr, wrap in (("run", counted), ("__getitem__", counted_grid)):
            if attr in vars(cls):
                saved.append((cls, attr, vars(cls)[attr]))
                setattr(cls, attr, wrap(vars(cls)[attr]))
    try:
        yield launches
    finally:
        for cls, attr, original in saved:
            setattr(cls, attr, original)


NO_KERNEL = ("the contract says the work is done by a Triton kernel launched here: write it with @triton.jit "
             "and launch it as kernel[grid](...); PyTorch operations alone do not count")


def not_launched(got: dict) -> Outcome | None:
    """A wrong answer when the submission launched no Triton kernel during the case, else None."""
    if isinstance(got, dict) and got.get("launches") == 0:
        return wrong("no Triton kernel was launched", NO_KERNEL)
    return None


# ----------------------------------------------------------------------------------------------------------
# stores: which elements of the outputs a kernel wrote (the interpreter only)

STORES_CLAUSE = ("every element of the output stored by the launched kernel, none computed in PyTorch "
                 "(Triton's interpreter traces each store; a GPU's stores cannot be traced)")
CPU_ONLY = (STORES_CLAUSE,)   # clauses that only the CPU cases check (the report of a GPU run says so)
NOT_STORED = ("compute it in the kernel and tl.store it: PyTorch around the launch may allocate the output "
              "and launch the kernel, but the values are the kernel's to write")


class _RecordingInterpreter:
    """Triton's native interpreter module (`triton.runtime.interpreter._interpreter`) with every write
    recorded: each tl.store (plain, masked, through a block pointer or a descriptor) and each atomic ends in
    its store, atomic_rmw or atomic_cas, in triton 3.0 to 3.9. A record is (the addresses written, under the
    mask: uint64 [k], the bytes written at each)."""

    def __init__(self, native, record: list):
        self._native = native
        self._record = record

    def __getattr__(self, name: str):
        return getattr(self._native, name)

    def store(self, ptrs, values, mask, *rest):
        self._keep(ptrs, values, mask)
        return self._native.store(ptrs, values, mask, *rest)

    def atomic_rmw(self, op, ptrs, values, mask, *rest):
        self._keep(ptrs, values, mask)
        return self._native.atomic_rmw(op, ptrs, values, mask, *rest)

    def atomic_cas(self, ptrs, compare, values, *rest):
        self._keep(ptrs, values, True)
        return self._native.atomic_cas(ptrs, compare, values, *rest)

    def _keep(self, ptrs, values, mask) -> None:
        """Record the addresses of the lanes the mask lets through: a mask may come as int64 0/1 (triton
        3.0's `(offs < ROW) & (slot >= 0)`), which as an index would pick lanes 0 and 1."""
        lanes = np.broadcast_to(np.asarray(mask).astype(bool), ptrs.shape)     # ptrs' shape
        self._record.append((ptrs[lanes], values.dtype.itemsize))


@contextlib.contextmanager
def recording_stores():
    """Inside: [(addresses [k] uint64, bytes each)], one record per store the interpreter made inside so far
    (natively none: a compiled kernel's stores do not pass through it). The interpreter's native module is
    replaced by a recording proxy while inside."""
    from triton.runtime import interpreter

    record, native = [], interpreter._interpreter
    interpreter._interpreter = _RecordingInterpreter(native, record)
    try:
        yield record
    finally:
        interpreter._interpreter = native


def stored_elements(stores, t) -> torch.Tensor | None:
    """In the child, after the call: which elements of `t` the recorded `stores` wrote, every byte of them
    (bool, t's shape); None for no record (the oracle), a tensor off the CPU (a GPU's stores are not
    traced) or not a tensor. The addresses are mapped onto t's whole storage, then read through t's view."""
    if stores is None or not isinstance(t, torch.Tensor) or t.device.type != "cpu":
        return None
    storage, size = t.untyped_storage(), t.element_size()
    base, nbytes = storage.data_ptr(), storage.nbytes()
    written = np.zeros(nbytes, dtype=bool)                                    # [storage bytes]
    for addresses, width in stores:
        offsets = addresses.astype(np.int64) - base                           # [k] bytes from the start
        offsets = offsets[(offsets >= 0) & (offsets <= nbytes - width)]
        for byte in range(width):
            written[offsets + byte] = True
    elements = torch.from_numpy(written[: nbytes - nbytes % size].reshape(-1, size).all(1))  # [elements]
    return elements.as_strided(t.shape, t.stride(), t.storage_offset()).clone()


def every_element(name: str, expected: torch.Tensor) -> dict:
    """`written_outside_the_kernel`'s `wanted` for an output the kernel defines whole: all of it."""
    return {name: torch.ones(expected.shape, dtype=torch.bool)}


def written_outside_the_kernel(got: dict, wanted: dict) -> Outcome | None:
    """In the parent: a wrong answer naming the first element that the case expects a kernel to write
    (`wanted`: output name -> bool mask of its shape, derived from the case) and that no launched kernel
    stored (got["stored"]: the same names -> masks, from `stored_elements`); None when every one was stored,
    or when nothing was traced (natively, the oracle)."""
    stored = got.get("stored") if isinstance(got, dict) else None
    if stored is None:
        return None
    for name, want in wanted.items():
        mask = stored.get(name) if isinstance(stored, dict) else None
        if mask is None:
            continue                                  # an output that is not a CPU tensor: checked elsewhere
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != want.shape:
            return wrong(f"the record of the kernel's stores into {name} is not a bool mask of shape "
                         f"{list(want.shape)}: got {show(mask)}")
        missing = want & ~mask                                                 # want's shape
        if bool(missing.any()):
            first = ", ".join(str(int(i)) for i in missing.nonzero()[0])
            return wrong(f"{name}[{first}] was written outside the kernel: {int(missing.sum())} of the "
                         f"{int(want.sum())} elements of {name} the kernel must write were not stored by any "
                         "launched kernel", NOT_STORED)
    return None


# ----------------------------------------------------------------------------------------------------------
# the attention kernels' hints (131, 133)

ONLINE_SOFTMAX = ("; in a kernel, check the online softmax: when the running max grows from m to m', scale l "
                  "and acc by exp(m - m') before adding the new tile")
BF16_IN_THE_INTERPRETER = ("bf16 arithmetic is wrong in Triton's interpreter (it multiplies the raw bits, "
                           "in tl.dot too): give every product, p . v included, fp32 operands "
                           "(.to(tl.float32)), as the contract's fp32 softmax asks")


def attention_kernel_hint(a: dict, expected: torch.Tensor, out: torch.Tensor, hint: str, garbage: str) -> str:
    """check_attention's hint for an attention kernel (131, 133) on inputs from guard_attention_inputs: bf16
    products in the interpreter; the table's rows read M apart rather than stride(0) apart; `garbage`, the
    kernel's words for NaN read from garbage (NaN in every row: that, or a key loop that never ran, which a
    kernel cannot be told apart from it); the online softmax after the plain recipe."""
    tables = a["block_tables"]
    if raw_bf16_bits(a["q"].dtype, out, expected):
        return BF16_IN_THE_INTERPRETER
    if rows_m_apart(a, out):
        return (f"block_tables is a view here: its rows lie block_tables.stride(0) = {tables.stride(0)} "
                f"entries apart, not M = {tables.shape[1]}: pass the stride as table_stride")
    if hint == GARBAGE:
        every_row = (~torch.isfinite(out) & torch.isfinite(expected)).flatten(1).any(1).all()   # [T] -> one
        return NAN_EVERYWHERE if bool(every_row) else garbage
    return hint + ONLINE_SOFTMAX if hint == RECIPE else hint


def raw_bf16_bits(dtype: torch.dtype, got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether `got` looks like Triton's interpreter computing on bf16 (it multiplies the raw bits): bf16
    inputs, and a value a thousand times past the answer's largest."""
    limit = 1e3 * (float(expected.float().abs().max()) + 1)
    return dtype == torch.bfloat16 and bool((got.float().abs() > limit).any())


def rows_m_apart(a: dict, out: torch.Tensor) -> bool:
    """Whether `out` is what reading table row b at b * M (not b * stride) gives, block -1 being the NaN
    guard before the cache (here a NaN block after it, where PyTorch's index -1 lands)."""
    from pagedkv_lib.judge.cases.attention_checks import reference  # the judge's only

    tables = a["block_tables"]                                                 # [B, M], a view
    B, M = tables.shape
    if tables.stride(0) == M:
        return False
    packed = torch.as_strided(tables, (B, M), (M, 1), tables.storage_offset())  # [B, M] rows M apart
    nan = torch.full_like(a["k_cache"][:1], float("nan"))                      # [1, S, H_kv, D]
    wrong_way = dict(a, block_tables=packed, k_cache=torch.cat([a["k_cache"], nan]),
                     v_cache=torch.cat([a["v_cache"], nan]))
    other = reference(wrong_way)
    tol = TOLERANCE[a["q"].dtype]
    return other is not None and torch.allclose(out.double(), other, atol=tol, rtol=tol, equal_nan=True)


# ----------------------------------------------------------------------------------------------------------
# the benchmark

def bench_submission(ns, device: str, module, exercise_id: int, mark=None) -> dict:
    """In the child: the submission's median time and correctness per shape of `module.BENCH` (plain data);
    with a speed bar, its separately timed calls on the bar's shape ("speed": {"calls": [...]}), each
    between two `mark(index)` (the child's Mark messages)."""
    if device != "cuda":
        return {"skipped": NEEDS_GPU.format(id=exercise_id)}
    use_device(ns, [module.NAME], "cuda")
    figures = {"device": torch.cuda.get_device_name(), "copy_gbs": copy_bandwidth()}
    for label in module.BENCH:
        args, nbytes = module.bench_inputs(label)
        correct = module.bench_correct(ns[module.NAME], args)
        figures[label] = {"us": time_us(lambda args=args: ns[module.NAME](*args)), "bytes": nbytes,
                          "correct": bool(correct)}
        del args
    bar = registry.get(exercise_id).speed
    if bar is not None:
        inputs = functools.partial(module.bench_inputs, bar.shape)
        calls = timed_calls(ns[module.NAME], inputs, fresh_seeds(speed.CALLS), mark=mark)
        figures["speed"] = {"calls": calls}
    return figures


def bench_report(figures: dict, device: str, module, exercise_id: int | None = None) -> dict:
    """In the parent, after every child exited: the library's kernel timed on the same shapes, and the lines
    `judge.py ID --bench` prints (yours against the library's and the copy bandwidth); with a speed bar,
    the speed clause ("speed", `speed_clause`)."""
    if device != "cuda" or "skipped" in figures or "error" in figures:
        return unjudged(figures)
    copy_gbs, fn = float(figures["copy_gbs"]), module.library_kernel()
    out = {"device": figures["device"], "copy": f"{copy_gbs:.0f} GB/s (read + write); times: do_bench "
           "medians, L2 flushed, launch included; the library through its unchecked launcher"}
    for label in module.BENCH:
        mine = figures.get(label)
        if not isinstance(mine, dict):
            out[label] = f"missing from the submission's figures: {show(mine)}"
            continue
        args, nbytes = module.bench_inputs(label)
        lib = time_us(lambda args=args: fn(*args))
        gbs, lib_gbs = nbytes / (mine["us"] * 1e3), nbytes / (lib * 1e3)
        out[label] = (f"yours {mine['us']:.1f} us = {gbs:.0f} GB/s = {gbs / copy_gbs:.0%} of copy; library "
                      f"{lib:.1f} us = {lib_gbs / copy_gbs:.0%}; yours/library time {mine['us'] / lib:.2f}; "
                      f"correct: {mine['correct']}")
        del args
    clause = None if exercise_id is None else speed_clause(figures, module, exercise_id, fn)
    if clause is not None:
        out["speed"] = clause
    return out


def unjudged(figures: dict) -> dict:
    """The child's figures as the report shows them when no speed was judged: without "speed", a clause
    only the parent writes (`speed_clause`), whatever the child put there."""
    return {k: v for k, v in figures.items() if k != "speed"}


def time_us(fn) -> float:
    """Median microseconds of fn() (triton.testing.do_bench: L2 flushed before each call, launch included)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3


def copy_bandwidth(nbytes: int = 2**30) -> float:
    """GB/s of a device-to-device copy, counting bytes read + written: the ceiling for both kernels."""
    src, dst = torch.randn(nbytes // 4, device="cuda"), torch.empty(nbytes // 4, device="cuda")  # 1 GiB
    return 2 * nbytes / (time_us(lambda: dst.copy_(src)) * 1e-6) / 1e9


# ----------------------------------------------------------------------------------------------------------
# the speed bar: each call timed on its own inputs in the child, checked and judged in the parent

_TIMER = {  # taken when the case module is imported, before the submission is: patching torch later changes
            # none of them (the parent's window and speed.py's PLAUSIBLE bound catch a timer fooled otherwise)
    "Event": torch.cuda.Event, "record": torch.cuda.Event.record, "elapsed": torch.cuda.Event.elapsed_time,
    "synchronize": torch.cuda.synchronize, "stream": torch.cuda.current_stream, "urandom": os.urandom,
    "Tensor": torch.Tensor, "matmul": torch.matmul, "no_torch_function": torch._C.DisableTorchFunction,
}
L2_FLUSH_BYTES = 256 * 2**20     # written before each timed call: more than any GPU's L2


def fresh_seeds(n: int) -> list:
    """`n` seeds drawn from the OS's randomness now, one for each timed call's inputs."""
    return [int.from_bytes(_TIMER["urandom"](6), "little") for _ in range(n)]     # below speed.SEEDS


def timed_calls(fn, make_inputs, seeds: list, device: str = "cuda", mark=None) -> list:
    """One call of fn per seed s, on fresh inputs make_inputs(device=device, seed=s)[0], the L2 flushed
    before it, timed alone between two CUDA events on the current stream, and between mark(2 i) and
    mark(2 i + 1) (sent to the parent, which reads its own clock; after the device synchronised, so work on
    another stream falls inside); per call {"seed", "us", "sketch"} (`sketch` of that call's output, which
    the parent checks)."""
    flush = torch.empty(L2_FLUSH_BYTES // 4, device=device)                    # [L2_FLUSH_BYTES / 4]
    calls = []
    for i, seed in enumerate(seeds):
        args, _ = make_inputs(device=device, seed=seed)
        stream = _TIMER["stream"]()
        start, end = _TIMER["Event"](enable_timing=True), _TIMER["Event"](enable_timing=True)
        flush.zero_()
        _TIMER["synchronize"]()
        if mark is not None:
            mark(2 * i)
        _TIMER["record"](start, stream)
        out = fn(*args)
        _TIMER["record"](end, stream)
        _TIMER["synchronize"]()                        # every stream: work launched on another one too
        if mark is not None:
            mark(2 * i + 1)
        calls.append({"seed": seed, "us": 1e3 * _TIMER["elapsed"](start, end), "sketch": sketch(out, seed)})
        del args, out
    return calls


def sketch(out, seed: int) -> list:
    """64 numbers that stand for an output: R @ out.view(rows, -1) @ W for random R [8, rows], W [cols, 8]
    drawn from `seed` on out's device (torch's own functions taken before the submission was imported; a
    subclass of Tensor, whose methods it could define, is refused); [] for anything else, or a sketch that
    is not finite (a wrong output: it matches no library's)."""
    if type(out) is not _TIMER["Tensor"] or out.dim() < 1 or out.numel() == 0:
        return []
    with _TIMER["no_torch_function"]():
        x = out.reshape(out.shape[0], -1).float()                                # [rows, cols]
        gen = torch.Generator(device=out.device).manual_seed(seed)
        left = torch.randn(8, x.shape[0], device=out.device, generator=gen)      # [8, rows]
        right = torch.randn(x.shape[1], 8, device=out.device, generator=gen)     # [cols, 8]
        projected = _TIMER["matmul"](_TIMER["matmul"](left, x), right)           # [8, 8]
        values = [float(v) for v in projected.flatten().tolist()]
    return values if all(math.isfinite(v) for v in values) else []    # NaN is no figure the protocol sends


def same_sketch(got, expected: list) -> bool:
    """Whether the child's sketch of a timed output is the library's, within speed.SKETCH_TOLERANCE."""
    if not isinstance(got, list) or len(got) != len(expected) or not expected:
        return False
    if any(type(g) not in (int, float) or not math.isfinite(g) for g in got):
        return False
    diff = sum((float(g) - e) ** 2 for g, e in zip(got, expected)) ** 0.5
    norm = sum(e * e for e in expected) ** 0.5
    return diff <= speed.SKETCH_TOLERANCE * norm


def speed_clause(figures: dict, module, exercise_id: int, fn, device: str = "cuda",
                 ceiling_rate: float | None = None) -> dict | None:
    """In the parent: the speed clause of one run (speed.judge), or None without a bar. Each of the child's
    calls is rebuilt from its seed, the library's kernel `fn` run and timed on the same inputs, the sketches
    compared; the ceiling (work per microsecond) is measured here unless given."""
    bar = registry.get(exercise_id).speed
    if bar is None:
        return None
    mine = figures.get("speed")
    calls = mine.get("calls") if isinstance(mine, dict) else None
    if not isinstance(calls, list) or not calls:
        return {"verdict": speed.UNTRUSTED, "bar": str(bar), "why": f"no timed calls: got {show(mine)}"}
    seeds = [c["seed"] if isinstance(c, dict) and type(c.get("seed")) is int and 0 <= c["seed"] < speed.SEEDS
             else 0 for c in calls]                     # another seed is refused by speed.check_calls
    library = timed_calls(fn, functools.partial(module.bench_inputs, bar.shape), seeds[: speed.CALLS], device)
    verified = [same_sketch(c.get("sketch") if isinstance(c, dict) else None, lib["sketch"])
                for c, lib in zip(calls, library)]
    library_us = statistics.median(lib["us"] for lib in library)
    if ceiling_rate is None:
        ceiling_rate = copy_bandwidth() * 1e3 if bar.ceiling == "copy" else matmul_rate() * 1e6
    return speed.judge(bar, calls, verified, mine.get("watched_us"), module.work(bar.shape), ceiling_rate,
                       library_us)


def matmul_rate(n: int = 8192) -> float:
    """TFLOP/s of a bf16 n x n x n matmul: the ceiling of an arithmetic-bound kernel."""
    a, b = (torch.randn(n, n, device="cuda").bfloat16() for _ in range(2))               # [n, n] each
    return 2 * n**3 / (time_us(lambda: a @ b) * 1e-6) / 1e12
