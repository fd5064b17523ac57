"""The decode step as CUDA graphs (engine/decode_graphs.py): the ladder, the padded inputs, and that padding
changes nothing; on a GPU, graphed and eager engines generate the same greedy tokens.

On CPU the graph is not captured, but everything around it is the same code: the inputs staged in the host
buffers (checked against prepare_decode), and the padded forward over the static buffers (the Triton kernels
in the interpreter: slot -1 and context length 0 must write and read nothing).
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


def _assert_staged_like_prepare_decode(graphs, seqs, padded):
    got = graphs.staged_numpy(padded)
    want = prepare_decode(seqs)
    B, M = want.block_tables.shape
    for name in ("input_ids", "positions", "slot_mapping", "context_lens"):
        assert got[name][:B].tolist() == getattr(want, name).tolist(), name
    assert got["block_tables"][:B, :M].tolist() == want.block_tables.tolist()
    assert (got["block_tables"][:B, M:] == -1).all() and got["block_tables"].shape[1] == 64 // 4
    assert got["slot_mapping"][B:].tolist() == [-1] * (padded - B), "padding rows must write nothing"
    assert got["context_lens"][B:].tolist() == [0] * (padded - B), "padding rows must read nothing"
    assert (got["block_tables"][B:] == -1).all()


def test_staged_inputs_are_prepare_decodes_padded_with_slot_minus_one_and_length_zero():
    llm, seqs = _engine_mid_decode(use_triton=False)
    runner = llm.model_runner
    graphs = DecodeGraphs(runner.model, runner.kv_cache, 8, 64, 4)
    padded = graphs.stage(seqs)
    assert padded == 8
    _assert_staged_like_prepare_decode(graphs, seqs, padded)


def test_staging_step_after_step_rewrites_what_changed():
    """Tables grow a block every 4 tokens; requests finish and the rows shift: every step must still equal
    prepare_decode's inputs (the rows are rewritten incrementally, decode_graphs.DecodeGraphs.stage)."""
    llm, seqs = _engine_mid_decode(use_triton=False, num_seqs=7, seed=3)
    graphs = DecodeGraphs(llm.model_runner.model, llm.model_runner.kv_cache, 8, 64, 4)
    sizes = set()
    while True:
        padded = graphs.stage(seqs)
        _assert_staged_like_prepare_decode(graphs, seqs, padded)
        sizes.add(len(seqs))
        llm.scheduler.postprocess(seqs, [[t] for t in llm.model_runner.run(seqs, False, [0.0] * len(seqs))])
        if llm.is_finished():
            break
        seqs, is_prefill = llm.scheduler.schedule()
        assert not is_prefill
    assert len(sizes) > 2, "the workload was meant to change the batch"


@pytest.mark.skipif(not INTERPRETED, reason="the Triton kernels on CPU tensors: the interpreter")
def test_padded_forward_over_static_buffers_equals_the_eager_forward_of_the_real_rows():
    """What a replay computes, run eagerly: 5 sequences padded to 8 give the 5 rows of the unpadded step, and
    the padding rows leave the cache as the eager step leaves it."""
    llm, seqs = _engine_mid_decode(use_triton=True)
    runner = llm.model_runner
    with torch.inference_mode():
        want = runner.forward(seqs, is_prefill=False)                 # [5, E] eager: no graphs on CPU
        cache_after_eager = runner.kv_cache.clone()
        graphs = DecodeGraphs(runner.model, runner.kv_cache, 8, 64, 4)
        padded = graphs.stage(seqs)
        graphs.upload(padded)
        graphs.forward(padded)
    got = graphs.outputs[: len(seqs)]
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
