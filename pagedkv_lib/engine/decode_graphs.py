"""DecodeGraphs: the decode forward captured as CUDA graphs, one per batch size of a ladder, then replayed.

Shapes: docs/conventions.md. nano-vllm's `ModelRunner.capture_cudagraph` / `run_model`
(`nanovllm/engine/model_runner.py`). A decode step of a small model is hundreds of short kernels; launched
one by one from Python, the GPU waits for the host between them. A CUDA graph records the launches once and
replays them with one call, but it replays them EXACTLY: the same kernels, the same grid sizes, the same
pointers. So everything a step changes must live in buffers allocated once (`input_ids`, `positions`,
`slot_mapping`, `context_lens`, `block_tables`, the output), and the batch size must be one the graph was
captured for:

    ladder   1, 2, 4, 8, 16, 32, 48, ... (steps of 16, nano-vllm's), up to the first size >= max_num_seqs
    pad      a batch of 5 replays the graph of 8; rows 5..7 are padding: slot -1 (store_kvcache writes
             nothing), context length 0 (attention reads nothing), token 0 at position 0, table row all -1
    width    every block table is padded to max_model_len / block_size entries: the decode kernel's launch
             depends on that width, never on the lengths, so one graph serves any lengths within it

    step t:  write the inputs into pinned host buffers (padded) -> one async copy each into the static device
             buffers -> replay the graph of the padded size -> hidden states of the first B rows

With overlap scheduling the host stages step t+1 while step t may still wait in the stream, its input copies
not yet done: `stage` first waits for the event recorded after the last upload (the front of the previous
step, so a short wait), and `run` resolves placeholder input ids on the device between the upload and the
replay (engine/future_tokens.py: a few small kernels, outside the graph).

A graph is captured the first time its size is needed (nano-vllm captures the whole ladder at start-up):
by then the first prefill has set an fp8 cache's scales, which the graph bakes in. Before each capture one
eager run on the same buffers compiles the Triton kernels and lets cuBLAS pick its algorithms; the padded
rows write nothing, so that run changes no cache entry the replay does not write identically. Prefill
stays eager: its token count changes every step. All graphs share one memory pool; their outputs live
in a buffer allocated outside it, so nothing a later capture reuses is read after a replay.
"""
from __future__ import annotations

import numpy as np
import torch

from pagedkv_lib.core.model_inputs import ModelInputs
from pagedkv_lib.core.sequence import Sequence

from .future_tokens import resolve_placeholders

LADDER_STEP = 16


def graph_batch_sizes(max_num_seqs: int) -> list[int]:
    """1, 2, 4, 8, then multiples of 16, up to the first size >= max_num_seqs."""
    sizes = [1, 2, 4, 8]
    while sizes[-1] < max_num_seqs:
        sizes.append(sizes[-1] + LADDER_STEP if sizes[-1] >= LADDER_STEP else LADDER_STEP)
    return [s for s in sizes if s < max_num_seqs] + [next(s for s in sizes if s >= max_num_seqs)]


def padded_batch_size(batch_size: int, sizes: list[int]) -> int:
    """The smallest captured size that holds `batch_size` rows."""
    for s in sizes:
        if s >= batch_size:
            return s
    raise ValueError(f"batch_size: expected at most {sizes[-1]} (the largest graph), got {batch_size}")


class DecodeGraphs:
    def __init__(self, model, kv_cache: torch.Tensor, max_num_seqs: int, max_model_len: int, block_size: int):
        self.model, self.kv_cache = model, kv_cache
        self.block_size = block_size
        self.batch_sizes = graph_batch_sizes(max_num_seqs)
        max_bs = self.batch_sizes[-1]
        self.max_blocks = -(-max_model_len // block_size)                 # M: every table's width
        self.max_model_len = max_model_len
        device = kv_cache.device
        pin = device.type == "cuda"
        shapes = {"input_ids": ((max_bs,), torch.int64), "positions": ((max_bs,), torch.int64),
                  "slot_mapping": ((max_bs,), torch.int32), "context_lens": ((max_bs,), torch.int32),
                  "block_tables": ((max_bs, self.max_blocks), torch.int32)}
        # pinned host buffers, written each step, and their device twins, which the graphs read
        self.host = {k: torch.zeros(s, dtype=d, pin_memory=pin) for k, (s, d) in shapes.items()}
        self.static = {k: torch.zeros(s, dtype=d, device=device) for k, (s, d) in shapes.items()}
        self.host_np = {k: t.numpy() for k, t in self.host.items()}       # views: filled without torch ops
        self.outputs = torch.zeros(max_bs, model.config.hidden_size, dtype=model.config.dtype,
                                   device=device)                        # [max_bs, E]
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.pool = None
        self.table_rows: list[tuple[int, int]] = []   # (seq_id, entries written) of each staged table row
        self.uploaded = torch.cuda.Event() if pin else None   # recorded after each upload's copies

    def stage(self, seqs: list[Sequence]) -> int:
        """Write the step's inputs into the pinned host buffers, padded to a captured size; returns that size.

        The values are prepare_decode's (core.model_inputs; tests/engine/test_engine_decode_graphs.py checks
        it): the last token at position len - 1, its slot, the context length, the block table padded with -1.
        Copying a block table into the buffer costs about as much as the rest of the step's host work, so a
        row is written in full only when it holds another sequence than the step before; otherwise only the
        blocks appended since (a preempted sequence always misses a decode step, so its row is rewritten)."""
        bs = len(seqs)
        padded = padded_batch_size(bs, self.batch_sizes)
        if self.uploaded is not None:
            self.uploaded.synchronize()          # the last upload has read the host buffers (overlap)
        h, tables = self.host_np, self.host_np["block_tables"]
        rows = []
        for i, seq in enumerate(seqs):
            table = seq.block_table
            if len(table) != seq.num_blocks:
                raise ValueError(f"seq {seq.seq_id}: {seq.num_tokens} tokens need {seq.num_blocks} blocks, "
                                 f"block_table has {len(table)}")
            seq_id, written = self.table_rows[i] if i < len(self.table_rows) else (-1, 0)
            if seq_id != seq.seq_id:
                tables[i] = -1
                written = 0
            if written < len(table):
                tables[i, written : len(table)] = table[written:]
            rows.append((seq.seq_id, len(table)))
        self.table_rows = rows
        tables[bs:padded] = -1
        h["input_ids"][:bs] = [seq.last_token for seq in seqs]
        h["positions"][:bs] = [seq.num_tokens - 1 for seq in seqs]
        h["context_lens"][:bs] = [seq.num_tokens for seq in seqs]
        h["slot_mapping"][:bs] = [seq.block_table[-1] * seq.block_size + seq.last_block_num_tokens - 1
                                  for seq in seqs]
        for name, pad in (("input_ids", 0), ("positions", 0), ("context_lens", 0), ("slot_mapping", -1)):
            h[name][bs:padded] = pad                                  # padding rows: read and write nothing
        return padded

    def upload(self, padded: int) -> None:
        """One asynchronous copy per buffer, pinned host -> device (no host sync)."""
        for name, t in self.host.items():
            self.static[name][:padded].copy_(t[:padded], non_blocking=True)
        if self.uploaded is not None:
            self.uploaded.record()

    def inputs(self, padded: int) -> ModelInputs:
        """The static buffers' first `padded` rows as the model's decode inputs."""
        s = self.static
        return ModelInputs(False, s["input_ids"][:padded], s["positions"][:padded],
                           s["slot_mapping"][:padded], None, None, 1, self.max_model_len,
                           s["context_lens"][:padded], s["block_tables"][:padded])

    def forward(self, padded: int) -> None:
        inputs = self.inputs(padded)
        self.outputs[:padded] = self.model(inputs.input_ids, inputs.positions, inputs, self.kv_cache)

    def capture(self, padded: int) -> None:
        """One eager run (compiles, warms cuBLAS), then the capture of the same forward."""
        self.forward(padded)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            self.forward(padded)
        if self.pool is None:
            self.pool = graph.pool()
        self.graphs[padded] = graph

    def run(self, seqs: list[Sequence], future: torch.Tensor | None = None) -> torch.Tensor:
        """The decode forward of `seqs` by graph replay -> hidden states [B, E] (a view of the output buffer,
        valid until the next replay). `future` [B_prev]: the previous step's sampled ids, for placeholders."""
        padded = self.stage(seqs)
        self.upload(padded)
        if future is not None:
            resolve_placeholders(self.static["input_ids"][:padded], future)          # [padded] in place
        if padded not in self.graphs:
            self.capture(padded)
        self.graphs[padded].replay()
        return self.outputs[: len(seqs)]

    def staged_numpy(self, padded: int) -> dict[str, np.ndarray]:
        """The host buffers' first `padded` rows (tests, the notebook's picture of the padding)."""
        return {k: v[:padded].copy() for k, v in self.host_np.items()}
