"""A `torch.distributed` group of processes on this machine: a rank program runs in each, results come back.

    results = launch_ranks(program, world_size=2, timeout_s=60, **kwargs)

`program(ctx, **kwargs)` is a module-level function (spawned processes import it by name); it runs in every
process with a `RankContext` (rank, world size, backend, device) and returns a JSON-able dict. The backend
follows the hardware, as `torchrun` users choose it: `nccl` when there is a CUDA GPU per rank, else `gloo`
on the CPU; the programs move their tensors to `ctx.device`, so the same code runs on both.

What makes it safe to start from a notebook:
- rendezvous over TCP on 127.0.0.1 at a port the OS just handed out, and gloo bound to the loopback device
  (`GLOO_SOCKET_IFNAME`, `lo` or macOS's `lo0`): no guessed port, no hostname lookup;
- one torch thread per rank (the ranks share the machine's cores), every rank seeded;
- a deadline for the whole group: the group's own collectives time out too (`init_process_group`'s
  timeout), and a rank still alive at the deadline is terminated, then killed;
- a rank that fails writes its traceback; the others are ended at once (they would wait forever in a
  collective) and `RankFailed` says which rank failed and why;
- results come back as JSON files in a temporary folder: nothing received is unpickled.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


@dataclass(frozen=True)
class RankContext:
    rank: int
    world_size: int
    backend: str               # "gloo" or "nccl"
    device: torch.device       # cpu for gloo, cuda:<rank> for nccl


class RankFailed(RuntimeError):
    """A rank raised, died or missed the deadline; the message names it and holds its traceback."""


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), before reading a clock."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def choose_backend(world_size: int) -> str:
    """nccl when CUDA has a GPU for every rank and NCCL is built in, else gloo (CPU)."""
    if torch.cuda.is_available() and torch.cuda.device_count() >= world_size and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS reports free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loopback_interface() -> str | None:
    """The loopback device's name: `lo` on Linux, `lo0` on macOS (None if neither is listed)."""
    names = {name for _, name in socket.if_nameindex()} if hasattr(socket, "if_nameindex") else set()
    return next((n for n in ("lo", "lo0") if n in names), None)


def _rank_main(program, rank: int, world_size: int, backend: str, port: int, out_dir: str, seed: int,
               timeout_s: float, kwargs: dict) -> None:
    """The body of one spawned process: join the group, run the program, write its result or its error."""
    loopback = _loopback_interface()
    if loopback is not None:
        os.environ["GLOO_SOCKET_IFNAME"] = loopback
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    path = os.path.join(out_dir, f"rank{rank}.json")
    try:
        device = torch.device("cpu")
        if backend == "nccl":
            device = torch.device("cuda", rank)
            torch.cuda.set_device(device)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=timeout_s))
        try:
            result = program(RankContext(rank, world_size, backend, device), **kwargs)
        except BaseException:
            _write(path, {"error": traceback.format_exc(), "when": time.time()})  # before its peers see it
            raise
        finally:
            dist.destroy_process_group()                         # the peers' collectives fail from here on
        _write(path, {"result": result})
    except BaseException:
        if not os.path.exists(path):
            _write(path, {"error": traceback.format_exc(), "when": time.time()})
        raise SystemExit(1) from None


def _write(path: str, record: dict) -> None:
    text = json.dumps(record)                                    # a result that is not JSON fails here, whole
    with open(path, "w") as f:
        f.write(text)


def _read(out_dir: str, rank: int) -> dict:
    path = os.path.join(out_dir, f"rank{rank}.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def _end(processes) -> None:
    """Terminate every live process, then kill what is left after a second."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 1.0
    for p in processes:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


def launch_ranks(program, world_size: int = 2, timeout_s: float = 60.0, backend: str | None = None,
                 seed: int = 0, **kwargs) -> list[dict]:
    """Run `program(ctx, **kwargs)` in `world_size` new processes forming one group; their results by rank.

    Raises RankFailed (after ending every process) when a rank raises, exits without a result, or the group
    is not done within `timeout_s` seconds.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: expected an int >= 1, got {world_size!r}")
    backend = backend or choose_backend(world_size)
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend: expected 'gloo' or 'nccl', got {backend!r}")
    out_dir = tempfile.mkdtemp(prefix="pagedkv-ranks-")
    ctx = mp.get_context("spawn")
    port = free_port()
    processes = [ctx.Process(target=_rank_main, daemon=True, name=f"rank{r}",
                             args=(program, r, world_size, backend, port, out_dir, seed, timeout_s, kwargs))
                 for r in range(world_size)]
    try:
        for p in processes:
            p.start()
        deadline = time.monotonic() + timeout_s
        while any(p.is_alive() for p in processes):
            failed = [r for r, p in enumerate(processes) if not p.is_alive() and p.exitcode != 0]
            if failed:
                break
            if time.monotonic() > deadline:
                late = [r for r, p in enumerate(processes) if p.is_alive()]
                raise RankFailed(f"rank(s) {late} not done within {timeout_s:g} s; every rank was ended")
            time.sleep(0.02)
        _end(processes)
        records = [_read(out_dir, r) for r in range(world_size)]
        failed = sorted((rec["when"], r) for r, rec in enumerate(records) if "error" in rec)
        if failed:                                   # the earliest error is the cause; the others follow it
            raise RankFailed("\n".join(f"rank {r} ({backend}) failed{' first' if i == 0 else ''}:\n"
                                       f"{records[r]['error']}" for i, (_, r) in enumerate(failed)))
        results = []
        for r, (p, record) in enumerate(zip(processes, records)):
            if "result" not in record:
                raise RankFailed(f"rank {r} ({backend}) exited with code {p.exitcode} and no result (another "
                                 "rank failed first, or it was killed)")
            results.append(record["result"])
        return results
    finally:
        _end(processes)
        shutil.rmtree(out_dir, ignore_errors=True)
