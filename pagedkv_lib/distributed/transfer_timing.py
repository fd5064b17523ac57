"""Measured between two ranks: moving a context's K/V vs recomputing its prefill on the receiving side.

`transfer_timing_rank` is a rank program (`launch_ranks(transfer_timing_rank, ...)`). For each context length
C, with the mini engine's model on both ranks:
- transfer: rank 0 gathers the C tokens' blocks by its table and sends them ([2, L, n, S, H_kv, D], whole
  blocks); rank 1 receives into its own freshly allocated blocks and scatters; timed on rank 1 from a
  barrier to the last block scattered (gather, wire and scatter: what a decode instance waits for);
- recompute: rank 1 runs the prefill of C tokens itself, on its own pool.
Rank 1 returns, per C, the bytes moved and the median seconds of each (`repeats` runs). Times depend on the
machine and its load: the notebook shows them and does not compare them.
"""
from __future__ import annotations

import random
import statistics
import time

import torch
import torch.distributed as dist

from pagedkv_lib.engine.config import ModelConfig

from .kv_transfer import gather_blocks, scatter_blocks
from .rank_launcher import RankContext, synchronize
from .serving_instance import ServingInstance


def transfer_timing_rank(ctx: RankContext, context_lens: list[int], block_size: int, repeats: int = 3,
                         model_seed: int = 0, token_seed: int = 0) -> dict:
    """Rank 0 sends, rank 1 receives and recomputes; rank 1's result holds the figures."""
    config = ModelConfig(seed=model_seed)
    num_blocks = -(-max(context_lens) // block_size)
    inst = ServingInstance(config, num_blocks, block_size, ctx.device)
    rng = random.Random(token_seed)
    rows = []
    for C in context_lens:
        tokens = [rng.randrange(config.vocab_size) for _ in range(C)]
        seq = inst.admit(tokens)
        n = len(seq.block_table)
        if ctx.rank == 0:
            inst.prefill(seq)                                   # real K/V in the blocks to send
        transfer, recompute, nbytes = [], [], 0
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            if ctx.rank == 0:
                dist.send(gather_blocks(inst.kv_cache, seq.block_table, C), 1)     # [2, L, n, S, H_kv, D]
            else:
                _, L, _, S, H_kv, D = inst.kv_cache.shape
                blocks = torch.empty(2, L, n, S, H_kv, D, dtype=inst.kv_cache.dtype, device=ctx.device)
                dist.recv(blocks, 0)
                scatter_blocks(inst.kv_cache, blocks, seq.block_table)
                synchronize(ctx.device)
                transfer.append(time.perf_counter() - start)
                nbytes = blocks.nbytes
        if ctx.rank == 1:
            for _ in range(repeats):                            # the same blocks, computed again
                start = time.perf_counter()
                inst.prefill(seq)
                synchronize(ctx.device)
                recompute.append(time.perf_counter() - start)
            rows.append({"context_len": C, "bytes": nbytes, "transfer_s": statistics.median(transfer),
                         "recompute_s": statistics.median(recompute)})
        inst.release(seq)
    return {"rank": ctx.rank, "backend": ctx.backend, "rows": rows}
