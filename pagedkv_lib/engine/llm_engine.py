"""LLMEngine: add requests, step until done; `generate` with a progress bar; statistics of every step.

nano-vllm's `nanovllm/engine/llm_engine.py` (and `llm.py`: `class LLM(LLMEngine)`), with token ids in and
out (no tokenizer) and a `StepStats` record per step: what was scheduled, how many tokens were computed or
found in the prefix cache, how many sequences were preempted, how full the pool is. The order inside a step
is nano-vllm's: schedule -> model runner (writes the K/V of the scheduled tokens, samples) -> postprocess
(finishes and frees). `step` runs it as schedule -> the CPU tier's copies -> launch (the forward and the
sampler queued; each sequence gets a placeholder for its token, engine/future_tokens.py) -> read (the host's
one wait) -> postprocess (each token put where its placeholder stands).

With `num_speculative_tokens` k > 0 a step first drafts up to k tokens for every running sequence
(`NgramProposer`, never past its max_tokens); a decode step with drafts verifies them (`ModelRunner.verify`,
`accept_greedy`) and a sequence gains 1 + its accepted drafts. `StepStats` counts the drafts and the
accepted ones: acceptance rate = accepted / drafted, tokens per sequence-step = 1 + accepted / num_seqs.

With a CPU tier (`num_cpu_blocks` > 0) a step hands the copies its scheduling queued (the block manager's
`take_transfers`) to the runner before the launch; `StepStats` counts the blocks saved and loaded.

With `overlap_scheduling` only the read moves: schedule step t+1 -> launch it (its input ids hold a
placeholder for each token step t is still computing, resolved on the device) -> read step t's tokens (the
wait for step t only) -> postprocess step t; without it the read is at once. So postprocessing lags one
step, as in SGLang's `event_loop_overlap` (`python/sglang/srt/managers/scheduler.py` at d51c1c2: `run_batch`
of the next batch, then `process_batch_result` of the last one) and vLLM's async scheduling (a batch queue
of depth 2 in `vllm/v1/engine/core.py`, `step_with_batch_queue`, at ac3cb2e):
    finished at t, scheduled for t+1   its token from t+1 is dropped when t's EOS is read (a wasted slot,
                                       as in both engines); a sequence whose max_tokens is reached at t is
                                       not scheduled for t+1 at all (Scheduler.schedule holds it back)
    preempted at t+1                   its blocks are freed while step t may still write into them (the
                                       stream runs t first); its token from t is read and kept (or ends it)
    prefill                            a prefilled sequence gets a placeholder like a decoded one; a prefill
                                       never holds one (a preempted sequence is resolved before it returns)
`stats[i]` describes the step launched by call i (`num_seqs` 0 for the last call, which only drains), and
its `num_finished` the sequences finished by that call (their last token came from step i - 1).
`timeline` holds a `HostSpan` (host clock) for each schedule, launch, read and postprocess of every step.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from pagedkv_lib.core.sampling_params import SamplingParams
from pagedkv_lib.core.sequence import Sequence, SequenceStatus

from .config import EngineConfig
from .future_tokens import InFlightStep, fill_placeholder, placeholder_id
from .kv_offload import KVTransfers
from .model_runner import ModelRunner
from .ngram_proposer import NgramProposer
from .rejection_sampler import accept_greedy
from .scheduler import Scheduler


@dataclass(frozen=True)
class StepStats:
    step: int
    is_prefill: bool
    num_seqs: int              # sequences scheduled
    num_computed_tokens: int   # tokens run through the model (prefill: uncached tokens; decode: 1 each)
    num_cached_tokens: int     # prompt tokens found in the prefix cache (prefill steps)
    num_preempted: int         # sequences preempted by recompute (decode steps)
    num_finished: int
    num_waiting: int           # after the step
    num_running: int
    num_free_blocks: int
    num_draft_tokens: int = 0      # drafts verified (speculative decode steps)
    num_accepted_tokens: int = 0   # of them, accepted
    num_saved_blocks: int = 0      # CPU tier: blocks written out (evicted from the pool) this step
    num_loaded_blocks: int = 0     # CPU tier: blocks loaded back (counted in num_cached_tokens)


@dataclass(frozen=True)
class HostSpan:
    step: int        # the step the work is for (with overlap, step t is read during the call of step t+1)
    phase: str       # "schedule", "launch", "read" (the wait for the tokens) or "postprocess"
    start: float     # time.perf_counter() seconds
    end: float


class Progress:
    """tqdm if it is installed, else one line on stderr rewritten in place."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled, self.bar = total, 0, enabled, None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, desc="Generating", dynamic_ncols=True)

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled and n:
            end = "\n" if self.done == self.total else ""
            print(f"\rGenerating: {self.done}/{self.total} requests", end=end, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class LLMEngine:
    def __init__(self, config: EngineConfig | None = None, seed: int = 0):
        self.config = config if config is not None else EngineConfig()
        self.scheduler = Scheduler(self.config)
        self.model_runner = ModelRunner(self.config, seed)
        self.stats: list[StepStats] = []
        self.timeline: list[HostSpan] = []
        self.in_flight: InFlightStep | None = None      # overlap scheduling: the step whose tokens are unread
        self._next_seq_id = 0
        c = self.config
        self.proposer = None
        if c.num_speculative_tokens:
            self.proposer = NgramProposer(c.num_speculative_tokens, c.prompt_lookup_min, c.prompt_lookup_max)

    @property
    def block_manager(self):
        return self.scheduler.block_manager

    def add_request(self, prompt: list[int], sampling_params: SamplingParams | None = None) -> int:
        """Queue a prompt (token ids); returns its sequence id."""
        params = sampling_params if sampling_params is not None else SamplingParams()
        vocab = self.config.model.vocab_size
        if not prompt or any(not 0 <= t < vocab for t in prompt):
            raise ValueError(f"prompt: expected a non-empty list of token ids in [0, {vocab}), "
                             f"got {prompt!r}")
        if len(prompt) + params.max_tokens > self.config.max_model_len:
            raise ValueError(f"prompt + max_tokens: expected <= max_model_len ({self.config.max_model_len}), "
                             f"got {len(prompt)} + {params.max_tokens}")
        if self.proposer is not None and params.temperature > 0:
            raise ValueError(f"temperature: expected 0 while speculating (num_speculative_tokens "
                             f"{self.config.num_speculative_tokens}: greedy verification only), "
                             f"got {params.temperature}")
        seq = Sequence(prompt, self.config.block_size, seq_id=self._next_seq_id, sampling_params=params)
        self._next_seq_id += 1
        self.scheduler.add(seq)
        return seq.seq_id

    def is_finished(self) -> bool:
        return self.scheduler.is_finished()

    def propose_drafts(self) -> None:
        """Drafts for every running sequence, at most max_tokens - completion - 1 (the bonus comes too)."""
        for seq in self.scheduler.running:
            room = seq.sampling_params.max_tokens - seq.num_completion_tokens - 1
            seq.draft_token_ids = self.proposer.propose(seq.token_ids, room)

    def record(self, step: int, phase: str, start: float) -> None:
        self.timeline.append(HostSpan(step, phase, start, time.perf_counter()))

    def transfer_kv(self) -> KVTransfers:
        """The CPU tier's copies that this step's scheduling queued: the scheduler side (the
        `TieredBlockManager`) hands them to the worker side (the runner's `OffloadWorker`) before the
        step's launch (engine/kv_offload.py)."""
        if not self.config.num_cpu_blocks:
            return KVTransfers()
        saves, loads = self.block_manager.take_transfers()
        transfers = KVTransfers(saves, loads)
        if transfers:
            self.model_runner.transfer_kv(transfers)
        return transfers

    def step(self) -> list[Sequence]:
        """Schedule step t, hand over its copies, launch it, read its tokens and postprocess it; returns the
        sequences that finished. With overlap scheduling only the read moves: this call reads and
        postprocesses the step launched by the call before (module docstring)."""
        if self.proposer is not None:
            self.propose_drafts()
        step, start = len(self.stats), time.perf_counter()
        seqs, is_prefill = self.scheduler.schedule()             # [] only while the held ones drain
        self.record(step, "schedule", start)
        counts = self.token_counts(seqs, is_prefill)
        transfers = self.transfer_kv()
        drafted = 0 if is_prefill else sum(len(s.draft_token_ids) for s in seqs)
        accepted = 0
        if drafted:                                  # a verification reads its tokens at once
            token_ids = self.verify(step, seqs)
            accepted = sum(len(t) - 1 for t in token_ids)
            start = time.perf_counter()
            finished = self.scheduler.postprocess(seqs, token_ids)
            self.record(step, "postprocess", start)
        else:
            launched = self.launch(step, seqs, is_prefill) if seqs else None
            if self.config.overlap_scheduling:
                done, self.in_flight = self.in_flight, launched  # read step t after launching step t+1
            else:
                done = launched                                  # read at once
            finished = self.postprocess_in_flight(done) if done is not None else []
        self.append_stats(is_prefill, seqs, counts, finished, transfers, drafted, accepted)
        return finished

    def verify(self, step: int, seqs: list[Sequence]) -> list[list[int]]:
        """A decode step with drafts: one forward over each sequence's last token and drafts, read at once
        -> each sequence's accepted drafts and bonus token (`accept_greedy`)."""
        start = time.perf_counter()
        targets = self.model_runner.verify(seqs)
        token_ids = [accept_greedy(s.draft_token_ids, t) for s, t in zip(seqs, targets, strict=True)]
        self.record(step, "launch", start)                       # a verification reads its tokens too
        return token_ids

    def launch(self, step: int, seqs: list[Sequence], is_prefill: bool) -> InFlightStep:
        """Launch a step (its placeholder input ids resolved on the device from the step in flight, if any)
        and append a placeholder to each sequence for the token it samples (engine/future_tokens.py)."""
        start = time.perf_counter()
        future = self.in_flight.pending.tokens if self.in_flight is not None else None
        temperatures = [s.sampling_params.temperature for s in seqs]
        pending = self.model_runner.launch(seqs, is_prefill, temperatures, future)
        positions = [s.num_tokens for s in seqs]
        for row, seq in enumerate(seqs):
            seq.append_token(placeholder_id(row))
        self.record(step, "launch", start)
        return InFlightStep(step, seqs, positions, pending)

    def token_counts(self, seqs: list[Sequence], is_prefill: bool) -> tuple[int, int]:
        """(computed, cached) tokens of a step: what the scheduler scheduled (`num_scheduled_tokens`: the
        uncached prompt tokens, or 1 + the drafts), and the prompt tokens found in the cache."""
        cached = sum(s.num_cached_tokens for s in seqs) if is_prefill else 0
        return sum(s.num_scheduled_tokens for s in seqs), cached

    def append_stats(self, is_prefill: bool, seqs: list[Sequence], counts: tuple[int, int],
                     finished: list[Sequence], transfers: KVTransfers, drafted: int = 0,
                     accepted: int = 0) -> None:
        computed, cached = counts
        self.stats.append(StepStats(
            step=len(self.stats), is_prefill=is_prefill, num_seqs=len(seqs), num_computed_tokens=computed,
            num_cached_tokens=cached, num_preempted=self.scheduler.num_preempted, num_finished=len(finished),
            num_waiting=len(self.scheduler.waiting), num_running=len(self.scheduler.running),
            num_free_blocks=self.block_manager.num_free_blocks, num_draft_tokens=drafted,
            num_accepted_tokens=accepted, num_saved_blocks=len(transfers.saves),
            num_loaded_blocks=len(transfers.loads)))

    def postprocess_in_flight(self, done: InFlightStep) -> list[Sequence]:
        """Read a launched step's tokens, put each where its placeholder stands, finish what EOS or
        max_tokens ends (`Scheduler.ends`); a finished sequence's placeholder from the step launched since
        (overlap scheduling) is cut off: its wasted token."""
        start = time.perf_counter()
        token_ids = done.pending.read()
        self.record(done.step, "read", start)
        start = time.perf_counter()
        finished = []
        for seq, position, token_id in zip(done.seqs, done.positions, token_ids, strict=True):
            if seq.status is SequenceStatus.FINISHED:       # ended by the step before: a wasted token
                continue
            fill_placeholder(self.block_manager, seq, position, token_id)
            if self.scheduler.ends(seq, token_id, position + 1 - seq.num_prompt_tokens):
                del seq.token_ids[position + 1:]
                self.scheduler.finish(seq)
                finished.append(seq)
        self.record(done.step, "postprocess", start)
        return finished

    def generate(self, prompts: list[list[int]], sampling_params: SamplingParams | list | None = None,
                 use_tqdm: bool = True) -> list[list[int]]:
        """Generate for every prompt; returns the completion token ids, in the order of `prompts`."""
        if not isinstance(sampling_params, list):
            sampling_params = [sampling_params] * len(prompts)
        if len(sampling_params) != len(prompts):
            raise ValueError(f"sampling_params: expected one per prompt ({len(prompts)}), "
                             f"got {len(sampling_params)}")
        ids = [self.add_request(p, sp) for p, sp in zip(prompts, sampling_params, strict=True)]
        outputs: dict[int, list[int]] = {}
        progress = Progress(len(prompts), use_tqdm)
        try:
            while not self.is_finished():
                finished = self.step()
                outputs.update((s.seq_id, s.completion_token_ids) for s in finished)
                progress.update(len(finished))
        finally:
            progress.close()
        return [outputs[i] for i in ids]


class LLM(LLMEngine):
    """The user-facing name, as in nano-vllm and vLLM: `LLM(config).generate(prompts, sampling_params)`."""
