"""What n-gram speculation buys the mini engine: acceptance rate and tokens per step, on the course's
workloads, with the greedy outputs compared against plain decoding.

`engine_speculation` serves the prefix-cache study's workloads (prefix_cache_comparison: a shared system
prompt, few-shot headers, multi-turn chat), scaled to the tiny engine (token ids folded into its vocabulary,
shorter headers and turns), once without speculation and once with k drafts per step, and reports:
    acceptance          accepted drafts / drafted tokens
    tokens per step     tokens a running sequence gains per decode step, 1 + accepted / sequence-steps
    sequence-steps      decode forwards summed over sequences, without and with speculation
    same_outputs        whether the greedy tokens are identical (None for a replay: they are by design)
The engine's model has random weights: its continuations repeat little, so prompt lookup seldom guesses
them. `replay_speculation` separates the drafter from the model: it replays a KNOWN target text (greedy
verification accepts a draft exactly when it equals the target's next tokens) on "edit" requests, whose
answer restates the prompt with a few changes (the case prompt lookup was made for: code edits, quoting a
document), so the same rule is measured on text that repeats.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams
from pagedkv_lib.engine.ngram_proposer import NgramProposer
from pagedkv_lib.engine.rejection_sampler import accept_greedy

from .prefix_cache_comparison import chat_turns, few_shot, shared_system_prompt

VOCAB = 512                      # the engine's tiny model


@dataclass(frozen=True)
class SpeculationStats:
    workload: str
    num_requests: int
    num_drafted: int
    num_accepted: int
    seq_steps_plain: int         # decode forwards summed over the sequences, one token each
    seq_steps_speculative: int   # the same with speculation
    same_outputs: bool | None    # None: a replay, the answer is given

    @property
    def acceptance(self) -> float:
        return self.num_accepted / self.num_drafted if self.num_drafted else 0.0

    @property
    def tokens_per_step(self) -> float:
        return 1 + self.num_accepted / self.seq_steps_speculative


def engine_workload(name: str, seed: int = 0) -> tuple[list[list[int]], list[int]]:
    """(prompts, max_tokens) of a course workload, scaled to the engine: ids mod 512, short headers."""
    if name == "system":
        requests = shared_system_prompt(num_requests=8, system_len=100, seed=seed)
    elif name == "few_shot":
        requests = few_shot(num_requests=8, headers=(160, 120, 96, 80), seed=seed)
    elif name == "chat":
        requests = chat_turns(num_conversations=3, num_turns=3, seed=seed, user=(8, 24), answer=(8, 24))
    else:
        raise ValueError(f"workload: expected 'system', 'few_shot' or 'chat', got {name!r}")
    prompts = [[t % VOCAB for t in r.prompt] for r in requests]
    return prompts, [min(len(r.output), 32) for r in requests]


def _seq_steps(llm: LLM) -> int:
    return sum(s.num_seqs for s in llm.stats if not s.is_prefill)


def engine_speculation(name: str, k: int = 4, block_size: int = 16, num_kvcache_blocks: int = 48,
                       seed: int = 0) -> SpeculationStats:
    """Serve workload `name` without and with k-token n-gram speculation (module docstring)."""
    prompts, max_tokens = engine_workload(name, seed)
    params = [SamplingParams(max_tokens=n) for n in max_tokens]
    runs = {}
    for num_speculative_tokens in (0, k):
        config = EngineConfig(block_size=block_size, num_kvcache_blocks=num_kvcache_blocks, max_num_seqs=8,
                              num_speculative_tokens=num_speculative_tokens)
        llm = LLM(config, seed=seed)
        runs[num_speculative_tokens] = (llm, llm.generate(prompts, params, use_tqdm=False))
    (plain, plain_out), (spec, spec_out) = runs[0], runs[k]
    return SpeculationStats(name, len(prompts), sum(s.num_draft_tokens for s in spec.stats),
                            sum(s.num_accepted_tokens for s in spec.stats), _seq_steps(plain),
                            _seq_steps(spec), plain_out == spec_out)


def edit_requests(num_requests: int = 8, length: int = 96, num_edits: int = 4,
                  seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """(prompt, answer) pairs: the answer is the prompt's text with `num_edits` tokens replaced."""
    rng = random.Random(f"edit/{seed}")
    out = []
    for _ in range(num_requests):
        text = [rng.randrange(VOCAB) for _ in range(length)]
        answer = list(text)
        for i in rng.sample(range(length), num_edits):
            answer[i] = rng.randrange(VOCAB)
        out.append((text + [0], answer))               # token 0 separates the document from its edit
    return out


def replay_speculation(requests: list[tuple[list[int], list[int]]], k: int = 4,
                       proposer: NgramProposer | None = None) -> SpeculationStats:
    """Greedy verification replayed against known answers: every step drafts up to k tokens from the
    tokens so far, keeps the drafts equal to the answer's next tokens, and gains them plus one."""
    proposer = proposer if proposer is not None else NgramProposer(k)
    drafted = 0
    accepted = 0
    seq_steps = 0
    for prompt, answer in requests:
        done = 0
        while done < len(answer):
            tokens = prompt + answer[:done]
            drafts = proposer.propose(tokens, len(answer) - done - 1)
            emitted = accept_greedy(drafts, answer[done: done + len(drafts) + 1])
            drafted += len(drafts)
            accepted += len(emitted) - 1
            seq_steps += 1
            done += len(emitted)
    return SpeculationStats("edit (replayed)", len(requests), drafted, accepted,
                            sum(len(a) for _, a in requests), seq_steps, None)


def speculation_table(k: int = 4, seed: int = 0) -> list[SpeculationStats]:
    return [*(engine_speculation(name, k, seed=seed) for name in ("system", "few_shot", "chat")),
            replay_speculation(edit_requests(seed=seed), k)]


def format_table(rows: list[SpeculationStats]) -> str:
    """One row per workload; sequence-steps: decode forwards summed over the sequences."""
    lines = [f"{'workload':<16} {'requests':>8} {'drafted':>8} {'accepted':>8} {'acceptance':>10} "
             f"{'tokens/step':>11} {'seq-steps plain':>15} {'seq-steps spec':>14} {'same tokens':>11}"]
    for r in rows:
        same = "-" if r.same_outputs is None else str(r.same_outputs)
        lines.append(f"{r.workload:<16} {r.num_requests:>8} {r.num_drafted:>8} {r.num_accepted:>8} "
                     f"{r.acceptance:>10.1%} {r.tokens_per_step:>11.2f} {r.seq_steps_plain:>15} "
                     f"{r.seq_steps_speculative:>14} {same:>11}")
    return "\n".join(lines)
