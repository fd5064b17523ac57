"""Prefill on rank 0, decode on rank 1: one request moved between two instances over torch.distributed.

`prefill_decode_rank` is the rank program (`launch_ranks(prefill_decode_rank, ...)`). Both ranks run a
`ServingInstance` with the same weights and their own pools. The decode instance (D) served the same system
prompt before, so it holds the K/V of its full blocks (a prefix-cache hit), and another request is running
on it, holding most of its pool. For each mode ("after": send when the prefill is done, as vLLM's NIXL
connector does; "layerwise": send layer l while layer l + 1 computes, as LMCache's `use_layerwise` mode
does through vLLM's `save_kv_layer`), the request goes:

    P -> D  TransferHeader          D checks the cache shapes match
    D -> P  TransferReply(refused)  D's pool cannot take the blocks: P keeps its own and waits; the running
                                    request on D finishes and frees its blocks
    D -> P  TransferReply(accepted, k)   D allocated n = ceil(len / S) - k blocks BEFORE replying (SGLang's
                                    decode side pre-allocates too) and holds its k prefix blocks
    P       prefill; the K/V of blocks k.. go to D, one [2, n, S, H_kv, D] per layer
    D       scatters each layer into ITS blocks, builds its table: its k prefix ids + the n new ones
    P -> D  TransferDone(first token);  both decode `max_tokens` tokens greedily
Both return their tokens (they must agree, and agree with the no-cache reference), their tables, the events,
and clock readings (`time.perf_counter`, one monotonic clock shared by the processes of a machine) to
measure how much of the transfer the layer-wise mode hides behind the prefill.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.engine.config import ModelConfig

from .kv_transfer import num_blocks_to_send, scatter_blocks
from .rank_launcher import RankContext, synchronize
from .serving_instance import ServingInstance
from .transfer_message import (
    TransferDone,
    TransferHeader,
    TransferReply,
    check_header,
    header_for,
    recv_message,
    send_message,
)

PREFILL_RANK, DECODE_RANK = 0, 1
MODES = ("after", "layerwise")


def _prefill_side(ctx: RankContext, inst: ServingInstance, prompt: list[int], max_tokens: int, mode: str,
                  busy_blocks: int) -> dict:
    others = inst.pool.allocate(busy_blocks)                    # other requests hold blocks on P too
    seq = inst.admit(prompt)
    table = list(seq.block_table)
    send_message(header_for(1, len(prompt), inst.kv_cache), DECODE_RANK, ctx.device)
    events = [f"P: request 1 ({len(prompt)} tokens) in blocks {seq.block_table}; header sent"]
    while not (reply := recv_message(TransferReply, DECODE_RANK, ctx.device)).accepted:
        events.append("P: refused (D's pool is full): P keeps its blocks and waits")
    k = reply.num_cached_blocks
    ids = torch.tensor(seq.block_table[k:], device=ctx.device)                  # [n] P's block ids
    events.append(f"P: accepted; D holds {k} prefix block(s): P sends its blocks {ids.tolist()}")
    pending = []                                                # (work, tensor): a tensor lives until sent

    def send_layer(layer: int) -> None:
        blocks = inst.kv_cache[:, layer].index_select(1, ids)                  # [2, n, S, H_kv, D]
        pending.append((dist.isend(blocks, DECODE_RANK), blocks))

    synchronize(ctx.device)
    start = time.perf_counter()
    first = inst.prefill(seq, send_layer if mode == "layerwise" else None)
    synchronize(ctx.device)
    prefill_end = time.perf_counter()
    if mode == "after":
        for layer in range(inst.kv_cache.shape[1]):
            send_layer(layer)
    for work, _ in pending:
        work.wait()
    send_message(TransferDone(1, first), DECODE_RANK, ctx.device)
    tokens = inst.decode(seq, first, max_tokens)                # P decodes too: the reference side
    inst.pool.free(others)
    return {"events": events, "tokens": tokens, "table": table, "prefill_start": start,
            "prefill_end": prefill_end, "bytes_sent": sum(t.nbytes for _, t in pending)}


def _decode_side(ctx: RankContext, inst: ServingInstance, prompt: list[int], system_len: int, max_tokens: int,
                 busy_blocks: int) -> dict:
    system = inst.admit(prompt[:system_len])                    # an earlier request with the system prompt
    inst.prefill(system)
    prefix = system.block_table[: system_len // inst.block_size]  # its full blocks: D's prefix-cache hit
    running = inst.pool.allocate(busy_blocks)                   # a request running on D
    events = [f"D: holds the system prompt's full blocks {prefix}; a running request holds {len(running)} "
              f"blocks, {inst.pool.num_free()} free"]
    header = recv_message(TransferHeader, PREFILL_RANK, ctx.device)
    check_header(header, inst.kv_cache)
    n = num_blocks_to_send(header.num_tokens, inst.block_size, len(prefix))
    while inst.pool.num_free() < n:
        if not running:
            raise RuntimeError(f"D: request {header.request_id} needs {n} blocks, {inst.pool.num_free()} are "
                               "free with nothing running: the decode pool is too small for it")
        send_message(TransferReply(header.request_id, 0, 0), PREFILL_RANK, ctx.device)
        events.append(f"D: needs {n} blocks, {inst.pool.num_free()} free: refused")
        inst.pool.free(running)                                 # the running request finishes
        events.append(f"D: the running request finished: {inst.pool.num_free()} free")
        running = []
    new = inst.pool.allocate(n)
    table = inst.pool.fork(prefix) + new
    send_message(TransferReply(header.request_id, 1, len(prefix)), PREFILL_RANK, ctx.device)
    events.append(f"D: allocated {new} for blocks {len(prefix)}..{len(prefix) + n - 1}; accepted")
    _, L, _, S, H_kv, D = inst.kv_cache.shape
    buffer = torch.empty(2, n, S, H_kv, D, dtype=inst.kv_cache.dtype, device=ctx.device)  # [2, n, S, H_kv, D]
    for layer in range(L):
        dist.recv(buffer, PREFILL_RANK)
        scatter_blocks(inst.kv_cache[:, layer : layer + 1], buffer[:, None], new)  # into D's own blocks
    synchronize(ctx.device)
    received = time.perf_counter()
    done = recv_message(TransferDone, PREFILL_RANK, ctx.device)
    seq = Sequence(prompt, inst.block_size)
    seq.block_table, seq.num_cached_tokens = list(table), len(prompt)
    events.append(f"D: table {table} (prefix + received); decoding from token {done.first_token}")
    tokens = inst.decode(seq, done.first_token, max_tokens)
    return {"events": events, "tokens": tokens, "table": table, "received": received,
            "bytes_received": L * buffer.nbytes, "num_blocks_received": n}


def prefill_decode_rank(ctx: RankContext, prompt: list[int], system_len: int, max_tokens: int,
                        block_size: int, num_blocks: int, prefill_busy_blocks: int, decode_busy_blocks: int,
                        modes=MODES, model_seed: int = 0) -> list[dict]:
    """One request prefilled on rank 0 and decoded on rank 1, once per mode; this rank's side of each."""
    if ctx.world_size != 2:
        raise ValueError(f"world_size: expected 2 (a prefill rank and a decode rank), got {ctx.world_size}")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"modes: expected items of {MODES}, got {mode!r}")
    config = ModelConfig(seed=model_seed)
    out = []
    for mode in modes:
        inst = ServingInstance(config, num_blocks, block_size, ctx.device)
        if ctx.rank == PREFILL_RANK:
            side = _prefill_side(ctx, inst, prompt, max_tokens, mode, prefill_busy_blocks)
        else:
            side = _decode_side(ctx, inst, prompt, system_len, max_tokens, decode_busy_blocks)
        out.append({"mode": mode, "backend": ctx.backend, **side})
    return out
