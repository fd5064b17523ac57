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

The step's inputs are the one `prepare_decode` (core/model_inputs.py), which adds the padding rows and
the width when the model runner asks for them; this module only copies them into the static buffers:

    step t:  prepare_decode(seqs, padded_batch_size, max_num_blocks) on the host -> async copies to the
             device (ModelRunner.to_device; placeholder ids resolved there, engine/future_tokens.py) ->
             `run`: one device copy per field into the static buffers -> replay the graph of that size ->
             hidden states of the padded rows, of which the runner keeps the first B

nano-vllm copies its prepared tensors into the graph variables the same way (`graph_vars[...][:bs] =`).
Each step's host tensors are fresh pinned memory, so with overlap scheduling the host may prepare step t+1
while step t's copies still wait in the stream.

A graph is captured the first time its size is needed (nano-vllm captures the whole ladder at start-up):
by then the first prefill has set an fp8 cache's scales, which the graph bakes in. Before each capture one
eager run on the same buffers compiles the Triton kernels and lets cuBLAS pick its algorithms; the padded
rows write nothing, so that run changes no cache entry the replay does not write identically. Prefill
stays eager: its token count changes every step. All graphs share one memory pool; their outputs live
in a buffer allocated outside it, so nothing a later capture reuses is read after a replay.
"""
from __future__ import annotations

import torch

from pagedkv_lib.core.model_inputs import ModelInputs

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
        self.model = model
        self.kv_cache = kv_cache
        self.batch_sizes = graph_batch_sizes(max_num_seqs)
        max_bs = self.batch_sizes[-1]
        self.max_num_blocks = -(-max_model_len // block_size)             # M: every table's width
        device = kv_cache.device
        # the buffers the graphs read, allocated once; max_seqlen_k is an int the capture bakes in
        self.static = ModelInputs(
            is_prefill=False,
            input_ids=torch.zeros(max_bs, dtype=torch.int64, device=device),               # [max_bs]
            positions=torch.zeros(max_bs, dtype=torch.int64, device=device),               # [max_bs]
            slot_mapping=torch.zeros(max_bs, dtype=torch.int32, device=device),            # [max_bs]
            cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=1, max_seqlen_k=max_model_len,
            context_lens=torch.zeros(max_bs, dtype=torch.int32, device=device),            # [max_bs]
            block_tables=torch.zeros(max_bs, self.max_num_blocks, dtype=torch.int32,
                                     device=device))                                       # [max_bs, M]
        self.outputs = torch.zeros(max_bs, model.config.hidden_size, dtype=model.config.dtype,
                                   device=device)                        # [max_bs, E]
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.pool = None

    def padded_size(self, batch_size: int) -> int:
        """The captured batch size a decode of `batch_size` sequences replays (prepare_decode pads to it)."""
        return padded_batch_size(batch_size, self.batch_sizes)

    def static_inputs(self, padded: int) -> ModelInputs:
        """The static buffers' first `padded` rows as the model's decode inputs."""
        s = self.static
        return ModelInputs(is_prefill=False, input_ids=s.input_ids[:padded], positions=s.positions[:padded],
                           slot_mapping=s.slot_mapping[:padded], cu_seqlens_q=None, cu_seqlens_k=None,
                           max_seqlen_q=1, max_seqlen_k=s.max_seqlen_k, context_lens=s.context_lens[:padded],
                           block_tables=s.block_tables[:padded])

    def load(self, inputs: ModelInputs) -> int:
        """Copy a padded decode's inputs (prepare_decode's, on the device) into the static buffers, one
        copy per field, queued on the stream; returns the padded batch size."""
        padded, width = inputs.block_tables.shape
        if inputs.is_prefill or padded not in self.batch_sizes or width != self.max_num_blocks:
            raise ValueError(f"inputs: expected a decode padded to a captured batch size {self.batch_sizes} "
                             f"with tables {self.max_num_blocks} wide, got is_prefill={inputs.is_prefill}, "
                             f"{padded} rows, tables {width} wide")
        target = self.static_inputs(padded)
        for name in ("input_ids", "positions", "slot_mapping", "context_lens", "block_tables"):
            getattr(target, name).copy_(getattr(inputs, name))
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

    def run(self, inputs: ModelInputs) -> torch.Tensor:
        """The decode forward by graph replay over `inputs` (`load`) -> hidden states [padded, E], a view of
        the output buffer valid until the next replay; the first len(seqs) rows are the sequences'."""
        padded = self.load(inputs)
        if padded not in self.graphs:
            self.capture(padded)
        self.graphs[padded].replay()
        return self.outputs[:padded]
