"""LLMEngine: add requests, step until done; `generate` with a progress bar; statistics of every step.

nano-vllm's `nanovllm/engine/llm_engine.py` (and `llm.py`: `class LLM(LLMEngine)`), with token ids in and
out (no tokenizer) and a `StepStats` record per step: what was scheduled, how many tokens were computed or
found in the prefix cache, how many sequences were preempted, how full the pool is. The order inside a step
is nano-vllm's: schedule -> model runner (writes the K/V of the scheduled tokens, samples) -> postprocess
(appends the sampled tokens, finishes and frees).

With `num_speculative_tokens` k > 0 a step first drafts up to k tokens for every running sequence
(`NgramProposer`, never past its max_tokens); a decode step with drafts verifies them (`ModelRunner.verify`,
`accept_greedy`) and a sequence gains 1 + its accepted drafts. `StepStats` counts the drafts and the
accepted ones: acceptance rate = accepted / drafted, tokens per sequence-step = 1 + accepted / num_seqs.

With a CPU tier (`num_cpu_blocks` > 0) a step hands the copies its scheduling queued (`OffloadScheduler`)
to the runner before the forward; `StepStats` counts the blocks saved and loaded.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from pagedkv_lib.core.sequence import Sequence

from .config import EngineConfig
from .kv_offload import KVTransfers, OffloadScheduler
from .model_runner import ModelRunner
from .ngram_proposer import NgramProposer
from .rejection_sampler import accept_greedy
from .sampler import SamplingParams
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
        self._next_seq_id = 0
        c = self.config
        self.offload = OffloadScheduler(self.block_manager) if c.num_cpu_blocks else None
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
        seq = Sequence(prompt, self.config.block_size, seq_id=self._next_seq_id)
        self._next_seq_id += 1
        self.scheduler.add(seq, params)
        return seq.seq_id

    def is_finished(self) -> bool:
        return self.scheduler.is_finished()

    def propose_drafts(self) -> None:
        """Drafts for every running sequence, at most max_tokens - completion - 1 (the bonus comes too)."""
        params = self.scheduler.sampling_params
        for seq in self.scheduler.running:
            room = params[seq.seq_id].max_tokens - seq.num_completion_tokens - 1
            seq.draft_token_ids = self.proposer.propose(seq.token_ids, room)

    def step(self) -> list[Sequence]:
        """Schedule, run the model, postprocess; returns the sequences that finished in this step."""
        if self.proposer is not None:
            self.propose_drafts()
        seqs, is_prefill = self.scheduler.schedule()
        params = self.scheduler.sampling_params
        cached = sum(s.num_cached_tokens for s in seqs) if is_prefill else 0
        drafted = sum(len(s.draft_token_ids) for s in seqs) if not is_prefill else 0
        computed = sum(len(s) for s in seqs) - cached if is_prefill else len(seqs) + drafted
        transfers = self.offload.build_transfers() if self.offload is not None else KVTransfers()
        if transfers:
            self.model_runner.transfer_kv(transfers)
        if drafted:
            targets = self.model_runner.verify(seqs)
            token_ids = [accept_greedy(s.draft_token_ids, t) for s, t in zip(seqs, targets, strict=True)]
        else:
            sampled = self.model_runner.run(seqs, is_prefill, [params[s.seq_id].temperature for s in seqs])
            token_ids = [[t] for t in sampled]
        accepted = sum(len(t) - 1 for t in token_ids)
        finished = self.scheduler.postprocess(seqs, token_ids)
        self.stats.append(StepStats(
            step=len(self.stats), is_prefill=is_prefill, num_seqs=len(seqs), num_computed_tokens=computed,
            num_cached_tokens=cached, num_preempted=self.scheduler.num_preempted, num_finished=len(finished),
            num_waiting=len(self.scheduler.waiting), num_running=len(self.scheduler.running),
            num_free_blocks=self.block_manager.num_free_blocks, num_draft_tokens=drafted,
            num_accepted_tokens=accepted, num_saved_blocks=len(transfers.saves),
            num_loaded_blocks=len(transfers.loads)))
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
