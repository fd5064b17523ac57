"""FlashInfer as a labelled baseline for the attention benchmarks: the library vLLM and SGLang run on Hopper
(flashinfer-ai/flashinfer 0.7.4), called on the course's own paged caches, with its backend named.

    decode    BatchDecodeWithPagedKVCacheWrapper, CUDA cores (`flashinfer_decode`) and tensor cores
              (`flashinfer_decode_tc`)
    prefill   BatchPrefillWithPagedKVCacheWrapper, backend fa2 or fa3 (FlashAttention-3, Hopper only)
    MLA       BatchMLAPagedAttentionWrapper, backend fa2 or fa3, on the latent cache split in place into its
              c [N, S, C] and k_pe [N, S, R] views (no copy)
    cascade   MultiLevelCascadeAttentionWrapper with 2 levels: the shared prefix once for the whole batch,
              then each sequence's own blocks, merged

FlashInfer reads a batch's pages as CSR (`indptr`, `indices`, `last_page_len`): `page_csr` builds them from
the course's block tables. Its K/V layout NHD `[N, S, H_kv, D]` is the course's. Each wrapper is planned
once per input set outside the timed region (`plan`), and its `run` is what the benchmarks time, like every
other row (gpu_harness.time_calls). FlashInfer compiles each kernel module with nvcc on first use (seconds
to minutes): `python benchmarks/flashinfer_baselines.py --warm` builds the ones the benchmarks use, in
threads, into FLASHINFER_WORKSPACE_BASE, so that a run can start it first and time later.

FlashInfer is optional: without it `MISSING` says why, and every call here raises `FlashInferMissing`, which
the benchmarks record as the row's error (their tables then print "not installed").
"""
from __future__ import annotations

import argparse
import functools
import threading
import time
import warnings

import torch

try:
    import flashinfer
except Exception as exc:  # noqa: BLE001  (an optional baseline: ImportError, or a broken CUDA install)
    flashinfer = None
    MISSING = f"not installed ({type(exc).__name__}: {str(exc)[:80]})"
else:
    MISSING = ""

WORKSPACE_BYTES = 128 * 2**20       # FlashInfer's recommended float workspace
_workspace: dict = {}


class FlashInferMissing(RuntimeError):
    """FlashInfer is not importable here: the row says so instead of a time."""


def version() -> str:
    return getattr(flashinfer, "__version__", "?") if flashinfer is not None else MISSING


def require() -> None:
    if flashinfer is None:
        raise FlashInferMissing(MISSING)


def workspace(device) -> torch.Tensor:
    """One 128 MiB float workspace per device, zeroed once, shared by every wrapper (they run in series)."""
    key = str(device)
    if key not in _workspace:
        _workspace[key] = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return _workspace[key]


def page_csr(block_tables: torch.Tensor, lens: list[int], page_size: int) -> tuple:
    """FlashInfer's page table from the course's: (indptr [B + 1], indices [pages], last_page_len [B]),
    int32 on the tables' device; sequence b owns the first ceil(lens[b] / page_size) ids of its row."""
    device = block_tables.device
    pages = [-(-n // page_size) for n in lens]
    indices = torch.cat([block_tables[b, :p] for b, p in enumerate(pages)]).to(torch.int32)     # [pages]
    indptr = torch.tensor([0] + pages, dtype=torch.int64).cumsum(0).to(torch.int32).to(device)  # [B + 1]
    last = torch.tensor([n - (p - 1) * page_size for n, p in zip(lens, pages)], dtype=torch.int32,
                        device=device)                                                         # [B]
    return indptr, indices.contiguous(), last


def decode_calls(sets: list[dict], page_size: int, heads: tuple, scale: float, tensor_cores: bool) -> list:
    """One planned decode wrapper per input set; each call returns out [B, H, D]. heads: (H, H_kv, D).
    A set holds q [B, H, D], k_cache, v_cache [N, S, H_kv, D], block_tables [B, M] and lens."""
    require()
    H, H_kv, D = heads
    calls = []
    for s in sets:
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace(s["q"].device), "NHD",
                                                                use_tensor_cores=tensor_cores)
        indptr, indices, last = page_csr(s["block_tables"], s["lens"], page_size)
        wrapper.plan(indptr, indices, last, H, H_kv, D, page_size, sm_scale=scale,
                     q_data_type=s["q"].dtype, kv_data_type=s["k_cache"].dtype)
        calls.append(functools.partial(wrapper.run, s["q"], (s["k_cache"], s["v_cache"])))
    return calls


def prefill_calls(sets: list[dict], page_size: int, heads: tuple, scale: float, backend: str) -> list:
    """One planned causal prefill wrapper (backend 'fa2' or 'fa3') per set; each call returns out [T, H, D].
    A set holds q [T, H, D], the caches, block_tables, lens (the context lengths) and cu_seqlens_q."""
    require()
    H, H_kv, D = heads
    calls = []
    for s in sets:
        wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace(s["q"].device), "NHD",
                                                                 backend=backend)
        indptr, indices, last = page_csr(s["block_tables"], s["lens"], page_size)
        wrapper.plan(s["cu_seqlens_q"], indptr, indices, last, H, H_kv, D, page_size, causal=True,
                     sm_scale=scale, q_data_type=s["q"].dtype, kv_data_type=s["k_cache"].dtype)
        calls.append(functools.partial(wrapper.run, s["q"], (s["k_cache"], s["v_cache"])))
    return calls


def _mla_run(wrapper, q: torch.Tensor, kv_cache: torch.Tensor, C: int, out) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # the flat-CSR plan form is deprecated, not wrong
        return wrapper.run(query=(q[..., :C], q[..., C:]), kv_cache=(kv_cache[..., :C], kv_cache[..., C:]),
                           out=out)


def mla_calls(sets: list[dict], C: int, scale: float, backend: str) -> list:
    """One planned MLA decode wrapper (backend 'fa2' or 'fa3') per set; each call returns out [B, H, C]
    (the set's `out` where it has one). A set holds q [B, H, C + R] (absorbed latent queries), kv_cache
    [N, S, C + R], block_tables and context_lens, as bench_mla.make_set builds them."""
    require()
    calls = []
    for s in sets:
        q, kv = s["q"], s["kv_cache"]
        B, H, W = q.shape
        S = kv.shape[1]
        lens = s["context_lens"].tolist()
        indptr, indices, _ = page_csr(s["block_tables"], lens, S)
        wrapper = flashinfer.BatchMLAPagedAttentionWrapper(workspace(q.device), backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wrapper.plan(qo_indptr=torch.arange(B + 1, dtype=torch.int32, device=q.device), kv_indptr=indptr,
                         kv_indices=indices, kv_len_arr=s["context_lens"], num_heads=H, head_dim_ckv=C,
                         head_dim_kpe=W - C, page_size=S, causal=False, sm_scale=scale, q_data_type=q.dtype,
                         kv_data_type=kv.dtype)
        calls.append(functools.partial(_mla_run, wrapper, q, kv, C, s.get("out")))
    return calls


def cascade_calls(sets: list[dict], page_size: int, heads: tuple, scale: float) -> list:
    """One planned 2-level cascade wrapper per set; each call returns out [B, H, D]. Level 0: every query
    against the shared prefix (the first n_prefix ids of every row); level 1: each sequence's own blocks.
    A set holds q [B, H, D], the caches, block_tables [B, M], n_prefix and context_lens."""
    require()
    H, H_kv, D = heads
    calls = []
    for s in sets:
        q, tables = s["q"], s["block_tables"]
        B, device = q.shape[0], q.device
        n_prefix = s["n_prefix"]
        own = [n - n_prefix * page_size for n in s["context_lens"].tolist()]
        shared = page_csr(tables[:1, :n_prefix], [n_prefix * page_size], page_size)
        mine = page_csr(tables[:, n_prefix:], own, page_size)
        qo = [torch.tensor([0, B], dtype=torch.int32, device=device),
              torch.arange(B + 1, dtype=torch.int32, device=device)]
        wrapper = flashinfer.MultiLevelCascadeAttentionWrapper(2, workspace(device), "NHD")
        wrapper.plan(qo, [shared[0], mine[0]], [shared[1], mine[1]], [shared[2], mine[2]], H, H_kv, D,
                     page_size, sm_scale=scale, q_data_type=q.dtype, kv_data_type=s["k_cache"].dtype)
        calls.append(functools.partial(wrapper.run, q, (s["k_cache"], s["v_cache"])))
    return calls


def _tiny_paged(B: int, n: int, S: int, H_kv: int, D: int, H: int, device, dtype) -> dict:
    """Random caches holding B contexts of n tokens (shuffled blocks) and q: the warm-up's inputs."""
    per = -(-n // S)
    N = B * per
    k_cache = torch.randn(N, S, H_kv, D, device=device).to(dtype)             # [N, S, H_kv, D]
    v_cache = torch.randn(N, S, H_kv, D, device=device).to(dtype)
    tables = torch.randperm(N, device=device).to(torch.int32).view(B, per)    # [B, per]
    return dict(q=torch.randn(B, H, D, device=device).to(dtype), k_cache=k_cache, v_cache=v_cache,
                block_tables=tables, lens=[n] * B,
                context_lens=torch.full((B,), n, dtype=torch.int32, device=device))


def warm(jobs: list[str] | None = None) -> dict:
    """Build (JIT-compile) and run once, each in its own thread, the modules the benchmarks use: the
    course's decode/prefill/cascade shape (H 32, H_kv 8, D 128, block 16, bf16) and MLA's (128 heads, 512 +
    64, page 64). -> {job: seconds or error}."""
    require()
    device, dtype = "cuda", torch.bfloat16
    H, H_kv, D, S = 32, 8, 128, 16

    def decode(tc):
        s = _tiny_paged(2, 100, S, H_kv, D, H, device, dtype)
        decode_calls([s], S, (H, H_kv, D), D**-0.5, tc)[0]()

    def prefill(backend):
        s = _tiny_paged(2, 100, S, H_kv, D, H, device, dtype)
        s["q"] = torch.randn(200, H, D, device=device).to(dtype)
        s["cu_seqlens_q"] = torch.tensor([0, 100, 200], dtype=torch.int32, device=device)
        prefill_calls([s], S, (H, H_kv, D), D**-0.5, backend)[0]()

    def mla(backend):
        B, n, C, R, Hm, Sm = 2, 100, 512, 64, 128, 64
        per = -(-n // Sm)
        s = dict(q=torch.randn(B, Hm, C + R, device=device).to(dtype),
                 kv_cache=torch.randn(B * per, Sm, C + R, device=device).to(dtype),
                 block_tables=torch.arange(B * per, dtype=torch.int32, device=device).view(B, per),
                 context_lens=torch.full((B,), n, dtype=torch.int32, device=device))
        mla_calls([s], C, 0.07, backend)[0]()

    def cascade():
        s = _tiny_paged(2, 96, S, H_kv, D, H, device, dtype)
        s["block_tables"][1, :2] = s["block_tables"][0, :2]
        s["n_prefix"] = 2
        cascade_calls([s], S, (H, H_kv, D), D**-0.5)[0]()

    table = {"decode": functools.partial(decode, False), "decode_tc": functools.partial(decode, True),
             "prefill_fa2": functools.partial(prefill, "fa2"),
             "prefill_fa3": functools.partial(prefill, "fa3"),
             "mla_fa2": functools.partial(mla, "fa2"), "mla_fa3": functools.partial(mla, "fa3"),
             "cascade": cascade}
    done: dict = {}

    def one(name):
        t = time.time()
        try:
            table[name]()
            torch.cuda.synchronize()
            done[name] = round(time.time() - t, 1)
        except Exception as exc:  # noqa: BLE001  (recorded; the benchmark's row will say it too)
            done[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
        print(f"[flashinfer warm] {name}: {done[name]}", flush=True)

    threads = [threading.Thread(target=one, args=(name,)) for name in (jobs or table)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", action="store_true", help="build and run once each module the benchmarks use")
    ap.add_argument("--jobs", help="comma-separated subset of the warm-up's jobs")
    args = ap.parse_args()
    print(f"flashinfer {version()}", flush=True)
    if args.warm:
        print(warm(args.jobs.split(",") if args.jobs else None), flush=True)


if __name__ == "__main__":
    main()
