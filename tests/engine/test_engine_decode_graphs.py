"""The decode step as CUDA graphs (engine/decode_graphs.py): the ladder, the padded inputs, and that padding
changes nothing; on a GPU, graphed and eager engines generate the same greedy tokens.

On CPU the graph is not captured, but everything around it is the same code: prepare_decode's padding, the
staging and copy into the static buffers, and the padded forward over them, run where the replay would run
(the Triton kernels in the interpreter: slot -1 and context length 0 must write and read nothing), for whole
generations compared token by token with the eager engine.
"""
from __future__ import annotations

import random

import pytest
import torch

from pagedkv_lib.core.model_inputs import prepare_decode
from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams
from pagedkv_lib.engine.decode_graphs import DecodeGraphs, graph_batch_sizes, padded_batch_size
from pagedkv_lib.engine.kernel_choice import triton_kernels_available

GPU = torch.cuda.is_available()
INTERPRETED = triton_kernels_available() and not GPU      # the Triton kernels run on CPU tensors


def test_ladder_is_nano_vllms_and_ends_at_the_first_size_that_holds_max_num_seqs():
    assert graph_batch_sizes(8) == [1, 2, 4, 8]
    assert graph_batch_sizes(5) == [1, 2, 4, 8]
    assert graph_batch_sizes(20) == [1, 2, 4, 8, 16, 32]
    assert graph_batch_sizes(256) == [1, 2, 4, 8] + list(range(16, 257, 16))
    ladder = graph_batch_sizes(64)
    assert [padded_batch_size(b, ladder) for b in (1, 3, 8, 9, 17, 64)] == [1, 4, 8, 16, 32, 64]
    with pytest.raises(ValueError, match="at most 64"):
        padded_batch_size(65, graph_batch_sizes(64))


def _engine_mid_decode(use_triton: bool, num_seqs: int = 5, seed: int = 0):
    """An engine after its prefill, and the sequences of its next (decode) step, scheduled."""
    rng = random.Random(seed)
    config = EngineConfig(block_size=4, num_kvcache_blocks=64, max_num_seqs=8, max_model_len=64,
                          use_triton=use_triton)
    llm = LLM(config)
    for _ in range(num_seqs):
        llm.add_request([rng.randrange(512) for _ in range(rng.randint(3, 13))],
                        SamplingParams(max_tokens=rng.randint(3, 10)))
    llm.step()                                                        # the prefill
    seqs, is_prefill = llm.scheduler.schedule()
    assert not is_prefill and len(seqs) == num_seqs
    return llm, seqs


def test_prepare_decode_pads_for_a_graph_with_rows_that_read_and_write_nothing():
    """The graph path's inputs are prepare_decode's own: the real rows unchanged, the padding in one place."""
    llm, seqs = _engine_mid_decode(use_triton=False)
    want = prepare_decode(seqs)
    got = prepare_decode(seqs, "cpu", padded_batch_size=8, max_num_blocks=64 // 4)
    B, M = want.block_tables.shape
    for name in ("input_ids", "positions", "slot_mapping", "context_lens"):
        assert getattr(got, name)[:B].tolist() == getattr(want, name).tolist(), name
    assert got.block_tables.shape == (8, 16)
    assert got.block_tables[:B, :M].tolist() == want.block_tables.tolist()
    assert (got.block_tables[:B, M:] == -1).all() and (got.block_tables[B:] == -1).all()
    assert got.slot_mapping[B:].tolist() == [-1] * (8 - B), "padding rows must write nothing"
    assert got.context_lens[B:].tolist() == [0] * (8 - B), "padding rows must read nothing"
    assert got.input_ids[B:].tolist() == [0] * (8 - B) and got.positions[B:].tolist() == [0] * (8 - B)
    with pytest.raises(ValueError, match="at most 4 tables"):
        prepare_decode(seqs, "cpu", padded_batch_size=4, max_num_blocks=16)


def test_the_graphs_prepare_their_own_padded_inputs_and_refuse_a_batch_no_graph_holds():
    """`prepare` pads the scheduled sequences to the graph that holds them, as prepare_decode pads (above),
    through the staging buffer into the static buffers; a batch above the ladder is refused."""
    llm, seqs = _engine_mid_decode(use_triton=False)
    graphs = DecodeGraphs(llm.model_runner.model, llm.model_runner.kv_cache, 8, 64, 4)
    want = prepare_decode(seqs, "cpu", padded_batch_size=8, max_num_blocks=16)
    for _ in range(3):                                                # both staging buffers, in turn
        assert graphs.prepare(seqs) == 8
        static = graphs.static_inputs(8)
        for name in ("input_ids", "positions", "slot_mapping", "context_lens", "block_tables"):
            assert torch.equal(getattr(static, name), getattr(want, name)), name
    small = DecodeGraphs(llm.model_runner.model, llm.model_runner.kv_cache, 4, 64, 4)
    with pytest.raises(ValueError, match="at most 4"):
        small.prepare(seqs)                                           # 5 sequences, graphs up to 4


class EagerReplay:
    """What a captured graph replays, run eagerly on a CPU: the same forward over the same static buffers."""

    def __init__(self, graphs: DecodeGraphs, padded: int):
        self.graphs = graphs
        self.padded = padded

    def replay(self) -> None:
        self.graphs.forward(self.padded)


def graphed_on_cpu(llm) -> DecodeGraphs:
    """Give a CPU engine's runner the graph path: DecodeGraphs whose 'capture' records an EagerReplay."""
    runner, config = llm.model_runner, llm.config
    graphs = DecodeGraphs(runner.model, runner.kv_cache, config.max_num_seqs, config.max_model_len,
                          config.block_size)

    def capture(padded: int) -> None:
        graphs.graphs[padded] = EagerReplay(graphs, padded)

    graphs.capture = capture
    runner.graphs = graphs
    return graphs


@pytest.mark.skipif(not INTERPRETED, reason="the Triton kernels on CPU tensors: the interpreter")
@pytest.mark.parametrize("overlap", [False, True])
def test_the_graph_path_generates_the_eager_paths_greedy_tokens_on_a_cpu(overlap):
    """The whole graph path but the capture (prepare_decode padded -> staged -> the forward over
    them), step after step as batches shrink from 5 to 1, placeholders too with overlap scheduling: the same
    greedy tokens as the eager engine, and every padded size that occurred was 'captured'."""
    rng = random.Random(2)
    prompts = [[rng.randrange(512) for _ in range(rng.randint(3, 13))] for _ in range(5)]
    params = [SamplingParams(max_tokens=n) for n in (2, 3, 5, 6, 7)]
    config = EngineConfig(block_size=4, num_kvcache_blocks=64, max_num_seqs=8, max_model_len=64,
                          use_triton=True, overlap_scheduling=overlap)
    eager = LLM(config).generate(prompts, params, use_tqdm=False)
    llm = LLM(config)
    graphs = graphed_on_cpu(llm)
    assert llm.generate(prompts, params, use_tqdm=False) == eager
    assert sorted(graphs.graphs) == [1, 2, 4, 8], "a graph per padded batch size that occurred"


@pytest.mark.skipif(not INTERPRETED, reason="the Triton kernels on CPU tensors: the interpreter")
def test_padded_forward_over_static_buffers_equals_the_eager_forward_of_the_real_rows():
    """What a replay computes, run eagerly: 5 sequences padded to 8 give the 5 rows of the unpadded step, and
    the padding rows leave the cache as the eager step leaves it."""
    llm, seqs = _engine_mid_decode(use_triton=True)
    runner = llm.model_runner
    with torch.inference_mode():
        want = runner.forward(seqs, is_prefill=False)                 # [5, E] eager: no graphs on CPU
        cache_after_eager = runner.kv_cache.clone()
        graphs = graphed_on_cpu(llm)
        got = runner.forward(seqs, is_prefill=False)                  # [5, E] over the static buffers
    assert sorted(graphs.graphs) == [8]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(runner.kv_cache, cache_after_eager)


@pytest.mark.skipif(not GPU, reason="needs a GPU: CUDA graphs")
@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_graphed_and_eager_engines_generate_the_same_greedy_tokens(kv_cache_dtype):
    """Every decode batch size from 12 down to 1 (requests finish at different lengths): 8 graphs, padding."""
    rng = random.Random(1)
    prompts = [[rng.randrange(512) for _ in range(rng.randint(5, 40))] for _ in range(12)]
    params = [SamplingParams(max_tokens=rng.randint(4, 30)) for _ in prompts]
    outs = {}
    for eager in (True, False):
        config = EngineConfig(block_size=16, num_kvcache_blocks=64, max_num_seqs=12, max_model_len=128,
                              device="cuda", use_triton=True, enforce_eager=eager,
                              kv_cache_dtype=kv_cache_dtype)
        llm = LLM(config)
        outs[eager] = llm.generate(prompts, params, use_tqdm=False)
        graphs = llm.model_runner.graphs
        assert (graphs is None) == eager
    assert sorted(graphs.graphs) == [1, 2, 4, 8, 16], "a graph per padded batch size that occurred"
    assert outs[False] == outs[True]
