"""Notebook 14's engine pictures: engine statistics, the pool frame by frame."""
from __future__ import annotations

import pytest
import torch
from matplotlib.figure import Figure

from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams
from pagedkv_lib.viz import engine_plots as ep
from pagedkv_lib.viz.prefix_cache import RELEASED, SHARED

TINY = ModelConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16)
SYSTEM = list(range(100, 108))                     # two full blocks of 4, shared by every request
PROMPTS = [SYSTEM + [200 + i, 300 + i] for i in range(4)]


def tiny_engine():
    config = EngineConfig(model=TINY, block_size=4, num_kvcache_blocks=12, max_model_len=40)
    llm = LLM(config)
    for p in PROMPTS:
        llm.add_request(p, SamplingParams(max_tokens=14))
    return llm


@pytest.fixture(scope="module")
def run():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    llm = tiny_engine()
    frames, outputs = ep.engine_frames(llm)
    yield llm, frames, outputs
    torch.set_num_threads(threads)


def test_engine_frames_follow_the_block_manager(run):
    llm, frames, outputs = run
    assert len(frames) == len(llm.stats) + 1
    after_prefill = frames[1]
    assert after_prefill.owners[:2] == [SHARED, SHARED] and after_prefill.labels[:2] == ["x4", "x4"]
    assert after_prefill.tables["s1"][:2] == after_prefill.tables["s0"][:2]
    assert "prefill 4 seq(s), 24 prompt tokens from the prefix cache" in after_prefill.description
    assert any("preempted" in f.description for f in frames)
    last = frames[-1]
    assert last.tables == {} and len(last.free_queue) == 12
    assert all(o in (None, RELEASED) for o in last.owners)          # released blocks keep their hashes
    fresh = tiny_engine().generate(PROMPTS, SamplingParams(max_tokens=14), use_tqdm=False)
    assert [outputs[i] for i in range(4)] == fresh


def test_engine_frames_refuses_more_requests_than_colours():
    llm = LLM(EngineConfig(model=TINY, block_size=4, num_kvcache_blocks=64, max_model_len=40))
    for i in range(RELEASED + 1):
        llm.add_request([i + 1], SamplingParams(max_tokens=1))
    with pytest.raises(ValueError, match="at most 7 requests"):
        ep.engine_frames(llm)


def test_plot_engine_stats_draws_every_step(run):
    llm, _, _ = run
    fig = ep.plot_engine_stats(llm.stats)
    ax_batch, ax_tokens, ax_pre, _ = fig.axes
    assert [p.get_height() for p in ax_batch.patches] == [s.num_seqs for s in llm.stats]
    cached = [p.get_height() for p in ax_tokens.patches[len(llm.stats):]]
    assert cached == [s.num_cached_tokens for s in llm.stats]
    assert sum(p.get_height() for p in ax_pre.patches) == sum(s.num_preempted for s in llm.stats) > 0


def test_stepper_and_frame_figure(run):
    _, frames, _ = run
    stepper = ep.EngineStepper(frames)
    stepper.step()
    assert stepper.index == 1 and "step 0: prefill" in stepper.text.value
    images = {1: bytes(stepper.image.value)}
    changed = next(i for i in range(2, len(frames)) if frames[i].labels != frames[1].labels)
    stepper.show(changed)
    assert bytes(stepper.image.value) != images[1]
    stepper.back()
    assert stepper.index == changed - 1
    assert isinstance(ep.frame_figure(frames[1]), Figure)


def test_the_pictures_draw_into_a_given_figure(run):
    """A notebook hands in a pyplot figure so that plt.show() stores the picture as an image."""
    llm, frames, _ = run
    draws = (lambda fig: ep.plot_engine_stats(llm.stats, fig), lambda fig: ep.frame_figure(frames[1], fig))
    for draw in draws:
        fig = Figure()
        assert draw(fig) is fig and fig.axes and fig.axes[0].has_data()


def test_decode_step_rows_read_the_engine_benchmark_and_plot():
    """bench_engine.json's layout (JSON keys are strings): one row per batch, transformers' fastest method."""
    step = {"ms_per_step": 2.0, "floor_ms": 1.0, "graph_replay_ms": 1.5, "replay_floor_ms": 1.2}
    result = {"batches": [1, 8], "modes": {
        "eager": {"batches": {"1": {"ms_per_step": 20.0}, "8": {"ms_per_step": 21.0}}},
        "graphed": {"batches": {"1": step, "8": dict(step, profile={"kernels": 340})}}},
        "hf": {"methods": {"dynamic": {"batches": {"1": {"ms_per_step": 30.0}}},
                           "static_compiled": {"batches": {"1": {"ms_per_step": 5.0}, "8": {"error": "x"}}}}}}
    rows = ep.decode_step_rows(result)
    assert [(r["B"], r["hf_method"], r["hf_ms"]) for r in rows] == [(1, "static_compiled", 5.0),
                                                                     (8, None, None)]
    assert rows[1]["kernels"] == 340 and rows[0]["graphed_ms"] / rows[0]["floor_ms"] == 2.0
    assert isinstance(ep.plot_decode_steps(rows), Figure)


def test_step_timeline_draws_every_span_of_both_runs_in_host_order():
    runs = {}
    for overlap in (False, True):
        llm = LLM(EngineConfig(model=TINY, block_size=4, num_kvcache_blocks=12, max_model_len=40,
                               overlap_scheduling=overlap))
        llm.generate(PROMPTS, SamplingParams(max_tokens=6), use_tqdm=False)
        spans = ep.ordinal_spans(ep.host_spans(llm.timeline, 2, 3))
        host = [s for s in spans if s["lane"] == "host"]
        assert [s["start_ms"] for s in host] == list(range(len(host)))          # one unit each, in order
        device = [s for s in spans if s["lane"] == "device"]
        assert [(s["step"], s["start_ms"]) for s in device] == [(s["step"], s["start_ms"]) for s in host
                                                                  if s["phase"] == "launch"]
        runs["overlapped" if overlap else "sequential"] = spans
    order = [(s["phase"], s["step"]) for s in runs["overlapped"] if s["lane"] == "host"]
    assert order.index(("launch", 3)) < order.index(("read", 2))              # the overlap, drawn
    fig = ep.plot_step_timeline(runs)
    drawn = [len(ax.patches) for ax in fig.axes]
    assert drawn == [len(runs["sequential"]), len(runs["overlapped"])]
