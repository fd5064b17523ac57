"""DecodeGraphs: the decode forward captured as CUDA graphs, one per batch size of a ladder, then replayed.

Shapes: docs/conventions.md. nano-vllm's `ModelRunner.capture_cudagraph` / `run_model`
(`nanovllm/engine/model_runner.py`). A decode step of a small model is hundreds of short kernels; launched
one by one from Python, the GPU waits for the host between them. A CUDA graph records the launches once and
replays them with one call, but it replays them EXACTLY: the same kernels, the same grid sizes, the same
pointers. So everything a step changes must live in buffers allocated once (the static `ModelInputs`:
`input_ids`, `positions`, `slot_mapping`, `context_lens`, `block_tables`; the output), and the batch size
must be one the graph was captured for:

    ladder   1, 2, 4, 8, 16, 32, 48, ... (steps of 16, nano-vllm's), up to the first size >= max_num_seqs
    pad      a batch of 5 replays the graph of 8; rows 5..7 are padding: slot -1 (store_kvcache writes
             nothing), context length 0 (attention reads nothing), token 0 at position 0, table row all -1
    width    every block table is padded to max_model_len / block_size entries: the decode kernel's launch
             depends on that width, never on the lengths, so one graph serves any lengths within it

The graphs prepare their own inputs from the scheduled sequences, with the eager path's `prepare_decode`
(core/model_inputs.py), which adds the padding rows and the width when asked for them:

    step t:  `prepare`: prepare_decode(seqs, padded_batch_size, max_num_blocks) on the host, written into a
             staging buffer (pinned on CUDA) laid out as the static buffers are, then ONE asynchronous copy
             to the device -> placeholder ids resolved there (engine/future_tokens.py) -> replay the graph
             of that size -> hidden states of the padded rows, of which the first B are the sequences'

The static buffers are views of one device buffer (`input_ids`, `positions`, `slot_mapping`, `context_lens`,
then `block_tables`, each `max_bs` rows), so a step's inputs travel in one copy of its leading bytes: a copy
per field costs the host a call each, several times the copy itself at these sizes (nano-vllm copies its
prepared tensors into the graph variables one by one, `graph_vars[...][:bs] =`). Two staging buffers are
used in turn, each with an event after its copy: with overlap scheduling the host fills step t+1's while
step t's copy may still wait in the stream, and it waits (for the copy of step t-1, long done) only before
reusing a buffer.

A graph is captured the first time its size is needed (nano-vllm captures the whole ladder at start-up):
by then the first prefill has set an fp8 cache's scales, which the graph bakes in. Before each capture one
eager run on the same buffers compiles the Triton kernels and lets cuBLAS pick its algorithms; the padded
rows write nothing, so that run changes no cache entry the replay does not write identically. Prefill
stays eager: its token count changes every step. All graphs share one memory pool; their outputs live
in a buffer allocated outside it, so nothing a later capture reuses is read after a replay.
"""
from __future__ import annotations

import math

import torch

from pagedkv_lib.core.model_inputs import ModelInputs, prepare_decode
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


FIELDS = ("input_ids", "positions", "slot_mapping", "context_lens", "block_tables")   # their order in memory


class DecodeGraphs:
    def __init__(self, model, kv_cache: torch.Tensor, max_num_seqs: int, max_model_len: int, block_size: int):
        self.model = model
        self.kv_cache = kv_cache
        self.batch_sizes = graph_batch_sizes(max_num_seqs)
        max_bs = self.batch_sizes[-1]
        self.max_num_blocks = -(-max_model_len // block_size)             # M: every table's width
        device = kv_cache.device
        self.cuda = device.type == "cuda"
        shapes = {"input_ids": ((max_bs,), torch.int64), "positions": ((max_bs,), torch.int64),
                  "slot_mapping": ((max_bs,), torch.int32), "context_lens": ((max_bs,), torch.int32),
                  "block_tables": ((max_bs, self.max_num_blocks), torch.int32)}
        self.layout = {}                                  # field -> (its first byte, shape, dtype)
        size = 0
        for name in FIELDS:
            shape, dtype = shapes[name]
            self.layout[name] = (size, shape, dtype)
            size += math.prod(shape) * dtype.itemsize
        # the buffers the graphs read, allocated once as one; max_seqlen_k is an int the capture bakes in
        self.buffer = torch.zeros(size, dtype=torch.uint8, device=device)                  # [bytes]
        self.static = ModelInputs(is_prefill=False, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=1,
                                  max_seqlen_k=max_model_len, **self.fields_of(self.buffer))
        # two host buffers of the same layout, used in turn (pinned on CUDA: the copy must not make the host
        # wait); each one's fields as numpy views (a host write costs less than torch's)
        self.staging = [torch.zeros(size, dtype=torch.uint8, pin_memory=self.cuda)
                        for _ in range(2)]                                                  # [bytes] each
        self.staging_fields = [{k: v.numpy() for k, v in self.fields_of(host).items()}
                               for host in self.staging]
        self.staged = [torch.cuda.Event() for _ in range(2)] if self.cuda else None  # after each one's copy
        self.num_prepared = 0
        self.outputs = torch.zeros(max_bs, model.config.hidden_size, dtype=model.config.dtype,
                                   device=device)                        # [max_bs, E]
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.pool = None

    def fields_of(self, buffer: torch.Tensor) -> dict[str, torch.Tensor]:
        """The fields of the static inputs as views of `buffer`'s bytes, laid out as `layout` says."""
        views = {}
        for name, (offset, shape, dtype) in self.layout.items():
            nbytes = math.prod(shape) * dtype.itemsize
            views[name] = buffer[offset:offset + nbytes].view(dtype).view(shape)
        return views

    def padded_size(self, batch_size: int) -> int:
        """The captured batch size a decode of `batch_size` sequences replays (`prepare` pads to it)."""
        return padded_batch_size(batch_size, self.batch_sizes)

    def static_inputs(self, padded: int) -> ModelInputs:
        """The static buffers' first `padded` rows as the model's decode inputs."""
        s = self.static
        return ModelInputs(is_prefill=False, input_ids=s.input_ids[:padded], positions=s.positions[:padded],
                           slot_mapping=s.slot_mapping[:padded], cu_seqlens_q=None, cu_seqlens_k=None,
                           max_seqlen_q=1, max_seqlen_k=s.max_seqlen_k, context_lens=s.context_lens[:padded],
                           block_tables=s.block_tables[:padded])

    def prepare(self, seqs: list[Sequence]) -> int:
        """The decode inputs of `seqs`, padded to the graph that holds them and to the tables' width, into
        the static buffers: built on the host, staged, then one asynchronous copy of the leading bytes;
        returns the padded batch size."""
        padded = self.padded_size(len(seqs))
        inputs = prepare_decode(seqs, "cpu", padded, self.max_num_blocks)
        turn = self.num_prepared % 2
        self.num_prepared += 1
        if self.cuda:
            self.staged[turn].synchronize()              # this buffer's copy of two steps ago has run
        for name, host in self.staging_fields[turn].items():
            host[:padded] = getattr(inputs, name).numpy()
        tables_at = self.layout["block_tables"][0]
        used = tables_at + inputs.block_tables.numel() * inputs.block_tables.element_size()  # fields, rows
        self.buffer[:used].copy_(self.staging[turn][:used], non_blocking=True)
        if self.cuda:
            self.staged[turn].record()
        return padded

    def forward(self, padded: int) -> None:
        """The decode forward over the static buffers' first `padded` rows, into the output buffer."""
        inputs = self.static_inputs(padded)
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
        """The decode forward of `seqs` by graph replay (`prepare`) -> hidden states [B, E], a view of the
        output buffer valid until the next replay. `future`: the previous step's token tensor, whose ids
        replace the placeholders in the static input ids."""
        padded = self.prepare(seqs)
        if future is not None:
            resolve_placeholders(self.static.input_ids[:padded], future)                  # [padded]
        if padded not in self.graphs:
            self.capture(padded)
        self.graphs[padded].replay()
        return self.outputs[: len(seqs)]
