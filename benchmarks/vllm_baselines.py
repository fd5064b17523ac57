"""vLLM's own Triton attention kernel as a labelled baseline for the attention benchmarks: `unified_attention`
from vLLM's vllm/attention/ops/triton_unified_attention.py (what vLLM's Triton attention backend runs), called
on the course's own paged caches, with the code that ran named.

    decode    one query per sequence (cu_seqlens_q = arange(B + 1)): vLLM picks its split-KV kernel_3d +
              reduce_segments for small batches, its kernel_2d for large ones
    prefill   varlen causal prefill on the paged cache (kernel_2d), cu_seqlens_q as the course's

Where the code comes from: an installed `vllm` package if one imports (its version is recorded), else the
file VLLM_TRITON_SRC (default <repo>/.vllm/triton_unified_attention.py), imported with stand-ins for the three
vLLM modules it imports (vllm.logger, vllm.platforms, vllm.triton_utils) that sit in sys.modules only while it
imports. The file is vLLM's (Apache-2.0) and never committed here (.gitignore lists .vllm/): a GPU run
brings its own copy, vllm/attention/ops/triton_unified_attention.py of a vLLM checkout (benchmarks/NOTES.md's
runs 4 and 5: commit 001ceb3e, sha256 ba95a5f4328f...), carried to the device. `source()` says exactly which
code ran (package version, or the file's path and sha256); every row stores it.

vLLM's K/V layout `[N, S, H_kv, D]` is the course's. Its arguments (cu_seqlens_q, seqused_k, the max lengths
as ints, the output buffer, the k/v descales vLLM passes, the block table padded so that its last tile's
unmasked table reads stay in it) are built once per input set outside the timed region; the timed call is
`unified_attention` alone.

vLLM is optional: without it `load()` raises `VLLMMissing` with the reason (`missing()`), which the benchmarks
record as the row's error (their tables then print "not installed").
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import types
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SRC = REPO / ".vllm" / "triton_unified_attention.py"
PACKAGE_MODULES = ("vllm.attention.ops.triton_unified_attention",          # where vLLM has kept the file
                   "vllm.v1.attention.ops.triton_unified_attention")
SHIMMED = ("vllm", "vllm.logger", "vllm.platforms", "vllm.triton_utils")
MAX_TILE = 64                       # the table is padded to cover this many tokens past the last block
# vLLM's file as stored at 001ceb3e launches its 2D kernel with two keyword names that kernel does not have
# (it names them USE_MM_PREFIX and mm_prefix_ranges): every launch of it raises TypeError. The loader renames
# them at the launch where the kernel has the new names and not the old, and the source says so. The kernel
# types mm_prefix_ranges tl.int64, which refuses the launch's None on a GPU (TypeError; the interpreter takes
# it): it is passed as 0, a value the kernel never reads while USE_MM_PREFIX is False.
RENAMED_2D = {"USE_PREFIX_LM": "USE_MM_PREFIX", "prefix_lens_ptr": "mm_prefix_ranges"}
_loaded: dict = {}                  # src path -> (module, source dict)


class VLLMMissing(RuntimeError):
    """Neither a vLLM package nor vLLM's file is here: the row says so instead of a time."""


def src_path() -> Path:
    return Path(os.environ.get("VLLM_TRITON_SRC") or DEFAULT_SRC)


class _Platform:
    """vllm.platforms.current_platform as far as the file uses it: the fp8 dtype (e4m3fn, vLLM's on CUDA)."""

    def fp8_dtype(self):
        return torch.float8_e4m3fn

    def __getattr__(self, name):
        raise AttributeError(f"vllm stand-in: current_platform.{name} is not provided (vllm_baselines.py)")


def _stand_ins() -> dict:
    import triton
    import triton.language as tl

    vllm = types.ModuleType("vllm")
    vllm.__path__ = []                                                  # a package, for `from vllm.x import`
    logger = types.ModuleType("vllm.logger")
    logger.init_logger = logging.getLogger
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = _Platform()
    triton_utils = types.ModuleType("vllm.triton_utils")
    triton_utils.tl, triton_utils.triton = tl, triton
    vllm.logger, vllm.platforms, vllm.triton_utils = logger, platforms, triton_utils
    return dict(zip(SHIMMED, (vllm, logger, platforms, triton_utils)))


def _from_package():
    """(module, source) from an installed vLLM, or None where none imports."""
    if importlib.util.find_spec("vllm") is None:
        return None
    for name in PACKAGE_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001  (an older or newer layout, or a broken install: try the next)
            continue
        import vllm

        return module, dict(kind="package", version=getattr(vllm, "__version__", "?"), module=name,
                            path=str(getattr(module, "__file__", "?")))
    return None


class _RenamedLaunch:
    """kernel[grid](**kwargs) with kwargs renamed by `names`: vLLM's launch, with its names matched."""

    def __init__(self, kernel, names: dict):
        self.kernel, self.names = kernel, names

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def renamed(*args, **kwargs):
            kwargs = {self.names.get(k, k): v for k, v in kwargs.items()}
            if kwargs.get("mm_prefix_ranges", 0) is None and not kwargs.get("USE_MM_PREFIX"):
                kwargs["mm_prefix_ranges"] = 0                            # an int64 argument, never read
            return launch(*args, **kwargs)
        return renamed


def _match_2d_names(module) -> dict:
    """Wrap module.kernel_unified_attention_2d when its parameters have RENAMED_2D's new names and not the
    old ones (the launch in the same file uses the old); returns the renaming applied ({} if none)."""
    kernel = getattr(module, "kernel_unified_attention_2d", None)
    if kernel is None:
        return {}
    params = set(inspect.signature(kernel.fn).parameters)
    if params.isdisjoint(RENAMED_2D) and params.issuperset(RENAMED_2D.values()):
        module.kernel_unified_attention_2d = _RenamedLaunch(kernel, RENAMED_2D)
        return dict(RENAMED_2D)
    return {}


def _from_file(path: Path):
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    saved = {name: sys.modules[name] for name in SHIMMED if name in sys.modules}
    sys.modules.update(_stand_ins())
    try:
        name = f"vllm_triton_unified_attention_{digest[:12]}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module                                 # Triton's JIT reads it by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[spec.name]
            raise
    finally:
        for name in SHIMMED:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
    renamed = _match_2d_names(module)
    return module, dict(kind="file", path=str(path), sha256=digest, bytes=len(data),
                        **({"renamed_2d_launch_names": renamed} if renamed else {}))


def load():
    """(module, source dict) of vLLM's triton_unified_attention, loaded once; raises VLLMMissing."""
    path = src_path()
    key = str(path)
    if key not in _loaded:
        try:
            got = _from_package()
            if got is None:
                if not path.is_file():
                    raise VLLMMissing(f"not installed: no vLLM and no {path}")
                got = _from_file(path)
        except VLLMMissing:
            raise
        except Exception as exc:  # noqa: BLE001  (an optional baseline: the file or package does not import)
            raise VLLMMissing(f"not importable ({type(exc).__name__}: {str(exc)[:120]})") from exc
        _loaded[key] = got
    return _loaded[key]


def missing() -> str:
    """'' where vLLM's kernel loads, else the one-line reason."""
    try:
        load()
    except VLLMMissing as exc:
        return str(exc)
    return ""


def source() -> dict:
    """Which vLLM code runs: {'kind': 'package', 'version', 'module', 'path'} or {'kind': 'file', 'path',
    'sha256', 'bytes'}; {'kind': 'missing', 'reason'} where none loads."""
    try:
        return dict(load()[1])
    except VLLMMissing as exc:
        return dict(kind="missing", reason=str(exc))


def describe() -> str:
    """The rows' label: vLLM's Triton kernel and which copy of it ran (or why none did)."""
    src = source()
    if src["kind"] == "package":
        where = f"vllm {src['version']}"
    elif src["kind"] == "file":
        where = f"file sha256 {src['sha256'][:12]}"
        if src.get("renamed_2d_launch_names"):
            where += ", its 2D launch's two argument names matched to its kernel"
    else:
        return f"vLLM Triton triton_unified_attention.py: {src['reason']}"
    return f"vLLM Triton triton_unified_attention.py ({where})"


def _padded_tables(tables: torch.Tensor, S: int) -> torch.Tensor:
    """The block table with zero columns appended up to MAX_TILE tokens: vLLM reads the table of a whole tile
    unmasked (its K/V loads are masked), so a tile past the last block must still read inside the table."""
    B, M = tables.shape
    tokens = -(-M * S // MAX_TILE) * MAX_TILE                          # M * S rounded up to whole tiles
    cols = -(-tokens // S)
    out = torch.zeros(B, max(M, cols), dtype=torch.int32, device=tables.device)
    out[:, :M] = tables.clamp(min=0)
    return out


def _args(s: dict, cu_q: torch.Tensor, max_q: int, seqused_k: torch.Tensor, max_k: int,
          scale: float | None) -> dict:
    """vLLM's keyword arguments for one set, built outside the timed call (scale None: D^-0.5)."""
    q, k, v = s["q"], s["k_cache"], s["v_cache"]                        # [T, H, D], [N, S, H_kv, D]
    B, H_kv = len(seqused_k), k.shape[2]
    one = torch.ones(1, dtype=torch.float32, device=q.device)
    return dict(q=q, k=k, v=v, out=torch.empty_like(q), cu_seqlens_q=cu_q, max_seqlen_q=max_q,
                seqused_k=seqused_k, max_seqlen_k=max_k,
                softmax_scale=q.shape[-1] ** -0.5 if scale is None else scale, causal=True,
                window_size=(-1, -1), block_table=_padded_tables(s["block_tables"], k.shape[1]), softcap=0,
                q_descale=None, k_descale=one.expand(B, H_kv), v_descale=one.expand(B, H_kv))


def _call(fn, args: dict) -> torch.Tensor:
    fn(**args)
    return args["out"]


def decode_calls(sets: list[dict], S: int, scale: float | None = None) -> list:
    """One call per input set, each returning out [B, H, D] (a buffer of its own, written in place). A set
    holds q [B, H, D], k_cache, v_cache [N, S, H_kv, D], block_tables [B, M], context_lens [B] and lens."""
    module = load()[0]
    calls = []
    for s in sets:
        q = s["q"]
        assert s["k_cache"].shape[1] == S, (s["k_cache"].shape, S)
        cu_q = torch.arange(q.shape[0] + 1, dtype=torch.int32, device=q.device)   # one query per sequence
        args = _args(s, cu_q, 1, s["context_lens"], max(s["lens"]), scale)
        calls.append(functools.partial(_call, module.unified_attention, args))
    return calls


def prefill_calls(sets: list[dict], scale: float | None = None) -> list:
    """One causal call per input set, each returning out [T, H, D]. A set holds q [T, H, D], the caches,
    block_tables, seq_lens [B] (context + new), lens, q_lens and cu_seqlens_q [B + 1]."""
    module = load()[0]
    calls = []
    for s in sets:
        args = _args(s, s["cu_seqlens_q"], max(s["q_lens"]), s["seq_lens"], max(s["lens"]), scale)
        calls.append(functools.partial(_call, module.unified_attention, args))
    return calls


def main() -> None:
    argparse.ArgumentParser(description="which vLLM attention code the benchmarks would run").parse_args()
    print(describe(), flush=True)
    print(source(), flush=True)


if __name__ == "__main__":
    main()
