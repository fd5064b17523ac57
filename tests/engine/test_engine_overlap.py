"""Overlap scheduling (EngineConfig.overlap_scheduling): the same greedy tokens as the engine without it, and
the overlap really happens (step t+1 is launched before step t's tokens are read).

The workload is the equivalence test's kind: requests sharing a system prompt (two identical), a pool too
small for all of them, so the runs preempt and hit the prefix cache; an EOS token chosen from the
non-overlapped run's own output (a token some completion holds before its max_tokens), so that requests end
both by EOS and by max_tokens. The same tests run on CUDA when a GPU is present (graphed and eager).
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
import torch

from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.core.tiered_block_manager import TieredBlockManager
from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams
from pagedkv_lib.engine.future_tokens import fill_placeholder, placeholder_id, resolve_placeholders
from pagedkv_lib.engine.kernel_choice import triton_kernels_available

POOL_TOKENS = 96
MAX_MODEL_LEN = 64
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def make_requests(seed: int = 0) -> tuple[list[list[int]], list[SamplingParams]]:
    rng = random.Random(seed)
    system = [rng.randrange(512) for _ in range(16)]
    prompts = [system + [rng.randrange(512) for _ in range(rng.randint(1, 12))] for _ in range(5)]
    prompts.append(list(prompts[2]))                                       # an identical prompt
    prompts += [[rng.randrange(512) for _ in range(rng.randint(10, 30))] for _ in range(3)]
    return prompts, [SamplingParams(max_tokens=rng.randint(8, 24)) for _ in prompts]


def engine_config(block_size: int, device: str, overlap: bool, eos: int | None = None,
                  enforce_eager: bool = False) -> EngineConfig:
    model = ModelConfig(eos_token_id=eos, dtype=torch.float32)
    return EngineConfig(model=model, block_size=block_size, num_kvcache_blocks=POOL_TOKENS // block_size,
                        max_num_seqs=8, max_num_batched_tokens=128, max_model_len=MAX_MODEL_LEN,
                        device=device, use_triton=device == "cuda" and triton_kernels_available(),
                        enforce_eager=enforce_eager, overlap_scheduling=overlap)


def early_token(outputs: list[list[int]], params: list[SamplingParams]) -> int:
    """The token that most completions hold before their last position: as EOS it ends several early."""
    early = [set(out[: sp.max_tokens - 1]) for out, sp in zip(outputs, params, strict=True)]
    counts = Counter(t for tokens in early for t in tokens)
    return counts.most_common(1)[0][0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_overlap_scheduling_gives_the_tokens_of_the_sequential_engine(block_size, device):
    prompts, params = make_requests()
    plain = LLM(engine_config(block_size, device, False)).generate(prompts, params, use_tqdm=False)
    eos = early_token(plain, params)
    runs = {}
    for overlap in (False, True):
        llm = LLM(engine_config(block_size, device, overlap, eos))
        runs[overlap] = llm.generate(prompts, params, use_tqdm=False)
        bm = llm.block_manager
        assert bm.num_free_blocks == llm.config.num_kvcache_blocks and not bm.used_block_ids
        assert llm.in_flight is None or all(s.status.name == "FINISHED" for s in llm.in_flight.seqs)
    for i, (seq_out, ovl_out) in enumerate(zip(runs[False], runs[True], strict=True)):
        assert ovl_out == seq_out, f"request {i}, block_size {block_size}: overlap {ovl_out} != {seq_out}"
    assert all(t >= 0 for out in runs[True] for t in out), "a placeholder reached the output"
    ended_by_eos = sum(out[-1] == eos and len(out) < sp.max_tokens for out, sp in zip(runs[True], params))
    ended_by_max = sum(len(out) == sp.max_tokens for out, sp in zip(runs[True], params))
    assert ended_by_eos and ended_by_max, f"expected both endings, got {ended_by_eos} EOS, {ended_by_max} max"
    llm = LLM(engine_config(block_size, device, True, eos))
    llm.generate(prompts, params, use_tqdm=False)
    assert sum(s.num_preempted for s in llm.stats) > 0, "the workload was meant to run the pool dry"
    assert sum(s.num_cached_tokens for s in llm.stats) > 0, "the workload was meant to hit the prefix cache"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the eager path next to the graphs")
def test_overlap_scheduling_eager_on_the_gpu_gives_the_same_tokens():
    prompts, params = make_requests(1)
    runs = [LLM(engine_config(16, "cuda", overlap, enforce_eager=True)).generate(prompts, params,
                                                                                   use_tqdm=False)
            for overlap in (False, True)]
    assert runs[0] == runs[1]


def test_only_an_eos_ending_costs_a_wasted_slot():
    """A sequence that reached max_tokens is not scheduled again while its last token is in flight; one
    that ends by EOS was scheduled once more (its token dropped). A pool that never preempts: the sequential
    engine's decode slots are exactly the completions' tokens after the first."""
    prompts, params = make_requests()
    plain = LLM(engine_config(16, "cpu", False)).generate(prompts, params, use_tqdm=False)
    eos = early_token(plain, params)
    slots, outputs = {}, {}
    for overlap in (False, True):
        llm = LLM(replace(engine_config(16, "cpu", overlap, eos), num_kvcache_blocks=64))
        outputs[overlap] = llm.generate(prompts, params, use_tqdm=False)
        assert sum(s.num_preempted for s in llm.stats) == 0
        slots[overlap] = sum(s.num_seqs for s in llm.stats if not s.is_prefill)
    ended_by_eos = sum(len(out) < sp.max_tokens for out, sp in zip(outputs[True], params, strict=True))
    assert outputs[True] == outputs[False] and ended_by_eos > 0
    assert slots[False] == sum(len(out) - 1 for out in outputs[False])
    assert 0 < slots[True] - slots[False] <= ended_by_eos, (slots, ended_by_eos)


def test_overlap_scheduling_and_speculation_are_exclusive():
    with pytest.raises(ValueError, match="overlap_scheduling: expected num_speculative_tokens 0"):
        EngineConfig(overlap_scheduling=True, num_speculative_tokens=2)


def event_log(llm: LLM) -> list[tuple[str, int]]:
    """Wrap the runner's launch and the tokens' read: ("launch", step) / ("read", step), in call order."""
    log: list[tuple[str, int]] = []
    launch = llm.model_runner.launch

    def logged_launch(*args, **kwargs):
        step = sum(1 for e in log if e[0] == "launch")
        pending = launch(*args, **kwargs)
        log.append(("launch", step))
        read = pending.read

        def logged_read():
            log.append(("read", step))
            return read()
        pending.read = logged_read
        return pending
    llm.model_runner.launch = logged_launch
    return log


@pytest.mark.parametrize("overlap", [False, True])
def test_step_t_plus_1_is_launched_before_step_t_is_read_only_with_overlap(overlap):
    prompts, params = make_requests()
    llm = LLM(engine_config(4, "cpu", overlap))
    log = event_log(llm)
    llm.generate(prompts, params, use_tqdm=False)
    order: dict[tuple[str, int], int] = {}
    for i, event in enumerate(log):
        order.setdefault(event, i)                                # the first read of a step counts
    launches = [s for kind, s in log if kind == "launch"]
    assert len(launches) > 10
    for t in launches[:-1]:
        launched_next_first = order[("launch", t + 1)] < order[("read", t)]
        assert launched_next_first == overlap, f"step {t}: {log[max(0, order[('read', t)] - 2):][:5]}"


def test_placeholders_resolve_from_the_previous_steps_tokens_on_the_device():
    future = torch.tensor([40, 41, 42], dtype=torch.int64)               # [B_prev] step t's tokens
    input_ids = torch.tensor([placeholder_id(2), 7, placeholder_id(0), 0], dtype=torch.int64)  # [T]
    assert resolve_placeholders(input_ids, future).tolist() == [42, 7, 40, 0]
    assert input_ids.tolist() == [42, 7, 40, 0]                          # in place


def test_a_prefill_with_a_placeholder_is_refused():
    llm = LLM(engine_config(4, "cpu", False))
    llm.add_request([1, 2, 3], SamplingParams(max_tokens=4))
    seqs, is_prefill = llm.scheduler.schedule()
    seqs[0].append_token(placeholder_id(0))
    with pytest.raises(ValueError, match="placeholders"):
        llm.model_runner.launch(seqs, True, [0.0], torch.zeros(1, dtype=torch.int64))


@pytest.mark.parametrize("max_tokens", [11, 12])
def test_generated_blocks_are_hit_by_a_later_prompt_with_overlap_as_without(max_tokens):
    """The block a placeholder completes is registered once the token is known: a prompt that repeats a
    request, its completion and one more token finds as many cached tokens as in the sequential engine.
    With 11 tokens out, the last one completes block 3 and its K/V is never written: neither engine may
    register that block."""
    prompt = [5, 9, 2, 7, 1]
    cached = {}
    for overlap in (False, True):
        llm = LLM(replace(engine_config(4, "cpu", overlap), max_num_seqs=1))
        (out,) = llm.generate([prompt], SamplingParams(max_tokens=max_tokens), use_tqdm=False)
        num_steps = len(llm.stats)
        llm.generate([prompt + out + [3]], SamplingParams(max_tokens=1), use_tqdm=False)
        (prefill,) = [s for s in llm.stats[num_steps:] if s.is_prefill]
        cached[overlap] = prefill.num_cached_tokens
    assert cached[False] >= 12 and cached[True] == cached[False], cached


def test_the_timeline_holds_every_phase_of_every_step_in_host_order():
    prompts, params = make_requests()
    llm = LLM(engine_config(16, "cpu", True))
    llm.generate(prompts, params, use_tqdm=False)
    spans = llm.timeline
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))
    launched = {s.step for s in spans if s.phase == "launch"}
    for phase in ("read", "postprocess"):
        assert {s.step for s in spans if s.phase == phase} == launched


def test_a_block_a_placeholder_completes_is_not_written_out_when_its_sequence_is_preempted_before_the_read():
    """Overlap with a CPU tier: the block that a step's placeholder completes holds no hash until the token
    is read. Preempted before the read, the sequence gives the block back unhashed, so reusing it writes
    nothing out: a hash taken over the placeholder could never be hit, and its copy would push a useful
    block out of the CPU tier."""
    bm = TieredBlockManager(num_blocks=2, block_size=2, num_cpu_blocks=4)
    seq = Sequence([1, 2, 3], 2, seq_id=0)
    bm.allocate(seq)                                   # block 0 [1, 2] registered, block 1 [3] partial
    seq.append_token(placeholder_id(0))                # step t launched: its token is position 3
    bm.may_append(seq)                                 # the placeholder completes block 1
    assert bm.blocks[seq.block_table[1]].hash == -1
    bm.deallocate(seq)                                 # preempted: free queue [1, 0]
    fill_placeholder(bm, seq, 3, 7)                    # step t read: no table to register into
    other = Sequence([5, 5, 5], 2, seq_id=1)
    bm.allocate(other)                                 # reuses block 1, then block 0 (cached: written out)
    saves, _ = bm.take_transfers()
    assert saves == [(0, 0)] and len(bm.cpu) == 1, saves


@pytest.mark.parametrize("scheduled_since", [False, True])
def test_fill_placeholder_registers_the_block_once_the_step_that_writes_its_last_token_is_scheduled(
        scheduled_since):
    """Step t samples position 3, which completes block 1; its K/V is written by the next step that holds
    the sequence. Already launched (a placeholder at position 4): the read registers the block. Not yet:
    may_append registers it when that step is scheduled."""
    bm = TieredBlockManager(num_blocks=4, block_size=2, num_cpu_blocks=1)
    seq = Sequence([1, 2, 3], 2, seq_id=0)
    bm.allocate(seq)
    seq.append_token(placeholder_id(0))                # step t launched: its token is position 3
    again = Sequence([1, 2, 3, 7, 9], 2, seq_id=1)
    if scheduled_since:
        bm.may_append(seq)                             # step t + 1 writes position 3: nothing known to hash
        seq.append_token(placeholder_id(0))
    fill_placeholder(bm, seq, 3, 7)
    if not scheduled_since:
        assert len(bm.cached_prefix(again)) == 1       # position 3's K/V is not written by any step yet
        bm.may_append(seq)
    assert bm.cached_prefix(again) == [("gpu", seq.block_table[0]), ("gpu", seq.block_table[1])]


def test_a_held_sequence_keeps_its_seat_under_max_num_seqs():
    """Scheduler.schedule leaves a held sequence (its last token in flight) out of the step, not out of the
    running queue's count: with max_num_seqs 2, one held and one decoding, a waiting prompt is not
    admitted."""
    llm = LLM(replace(engine_config(4, "cpu", True), max_num_seqs=2))
    llm.add_request([1, 2, 3], SamplingParams(max_tokens=1))             # held after its prefill
    llm.add_request([4, 5, 6], SamplingParams(max_tokens=8))
    scheduler = llm.scheduler
    seqs, is_prefill = scheduler.schedule()
    assert is_prefill and len(seqs) == 2
    for seq in seqs:
        seq.append_token(7)                                              # as if their tokens were in
    llm.add_request([8, 9, 10], SamplingParams(max_tokens=8))
    seqs, is_prefill = scheduler.schedule()
    running = len(scheduler.running)
    assert running <= 2, f"expected at most max_num_seqs 2 running, got {running}"
    assert not is_prefill and [s.seq_id for s in seqs] == [1] and len(scheduler.waiting) == 1


def test_no_step_of_an_overlapped_engine_runs_more_than_max_num_seqs():
    """The running queue right after each scheduling, held sequences included, over a whole generation."""
    prompts, params = make_requests()
    llm = LLM(replace(engine_config(16, "cpu", True), max_num_seqs=3, num_kvcache_blocks=64))
    schedule = llm.scheduler.schedule
    running = []

    def counted_schedule():
        scheduled = schedule()
        running.append(len(llm.scheduler.running))
        return scheduled
    llm.scheduler.schedule = counted_schedule
    llm.generate(prompts, [replace(sp, max_tokens=sp.max_tokens % 5 + 1) for sp in params], use_tqdm=False)
    assert max(running) <= 3, running


class RecordedTokens(list):
    """A sequence's token_ids that record every deletion that removes tokens: (seq id, tokens removed)."""

    def __init__(self, tokens: list[int], seq_id: int, cuts: list[tuple[int, list[int]]]):
        super().__init__(tokens)
        self.seq_id = seq_id
        self.cuts = cuts

    def __delitem__(self, key):
        if self[key]:
            self.cuts.append((self.seq_id, list(self[key])))
        super().__delitem__(key)


def test_a_read_token_replaces_its_placeholder_where_it_stands():
    """Overlapped, with no EOS: the step after a token's step is already launched, yet postprocessing never
    cuts a sequence's tokens (the token takes its placeholder's place, the next placeholder stays)."""
    prompts, params = make_requests()
    llm = LLM(replace(engine_config(4, "cpu", True), num_kvcache_blocks=64))
    cuts: list[tuple[int, list[int]]] = []
    for prompt, sp in zip(prompts, params, strict=True):
        llm.add_request(prompt, sp)
    for seq in llm.scheduler.waiting:
        seq.token_ids = RecordedTokens(seq.token_ids, seq.seq_id, cuts)
    while not llm.is_finished():
        llm.step()
    assert sum(s.num_seqs for s in llm.stats if not s.is_prefill) > len(prompts), "decode steps overlapped"
    assert cuts == [], f"tokens cut from sequences: {cuts[:3]}"
