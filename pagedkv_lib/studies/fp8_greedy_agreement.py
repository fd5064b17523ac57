"""Does an FP8 KV cache change what the mini engine generates? Greedy tokens, bf16 cache vs fp8 (notebook 13).

The same bf16 model (random weights, `ModelConfig(dtype=bfloat16)`) generates greedily for a fixed prompt set
twice: with a bf16 cache and with an fp8 cache. Two measures:
  - free running: how many completions are identical, and at which step each first diverges (after the
    first difference the two continue from different contexts, so later positions are not compared);
  - teacher forced: every bf16 completion is fed back as ONE prefill through each cache, and at every
    position we ask whether the model's argmax is the bf16 token. This is agreement per step, without
    compounding. The bf16 cache's own score is below 100% too: a prefill batches the projections
    differently from the decode steps that made the tokens, and bf16 rounds differently; that is the
    floor the fp8 figure is measured against.
At every position the bf16 logits' top-2 margin says how close the choice was: steps that flip under fp8
should be near-ties. A random model's logits are flat (margins small), so it flips more easily than a
trained model would; the study shows the mechanism, not a trained model's figure.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

import torch

from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.engine.config import EngineConfig, ModelConfig
from pagedkv_lib.engine.llm_engine import LLM
from pagedkv_lib.engine.model_runner import ModelRunner
from pagedkv_lib.engine.sampler import SamplingParams


@dataclass(frozen=True)
class Flip:
    prompt: int          # index into the prompt set
    step: int            # completion position
    bf16_token: int
    fp8_token: int
    margin: float        # bf16 logits: top-1 minus top-2 at that step


@dataclass(frozen=True)
class GreedyAgreement:
    num_prompts: int
    max_tokens: int
    identical: int                # free-running completions equal token for token
    first_divergence: list        # per prompt: the first differing step, or None
    teacher_forced: dict          # "bf16", "fp8" -> fraction of steps whose argmax is the bf16 run's token
    flips: list                   # a Flip per teacher-forced step where fp8's argmax differs from bf16's
    margins: list                 # bf16 top-2 margin of every step (all prompts, in order)

    @property
    def median_margin(self) -> float:
        return float(torch.tensor(self.margins).median()) if self.margins else float("nan")


def prompt_set(num_prompts: int = 12, min_len: int = 8, max_len: int = 40, vocab: int = 512,
               seed: int = 0) -> list[list[int]]:
    """Fixed random prompts: lengths uniform in [min_len, max_len], tokens uniform in [0, vocab)."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(min_len, max_len))] for _ in range(num_prompts)]


def engine_config(kv_cache_dtype: str, calculate_kv_scales: bool = False) -> EngineConfig:
    return EngineConfig(model=ModelConfig(dtype=torch.bfloat16), num_kvcache_blocks=96, block_size=16,
                        kv_cache_dtype=kv_cache_dtype, calculate_kv_scales=calculate_kv_scales)


@torch.inference_mode()
def teacher_forced_logits(config: EngineConfig, prompts, completions) -> list[torch.Tensor]:
    """Each prompt + completion as one prefill through a fresh cache: logits [n, V] that predict the n
    completion tokens (positions len(prompt) - 1 .. end - 2)."""
    runner = ModelRunner(config)
    seqs, next_block = [], 0
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        seq = Sequence(p + c[:-1], config.block_size, seq_id=i)      # c[-1] predicts nothing we check
        seq.block_table = list(range(next_block, next_block + seq.num_blocks))
        next_block += seq.num_blocks
        seqs.append(seq)
    inputs = runner.prepare(seqs, is_prefill=True)
    hidden = runner.model(inputs.input_ids, inputs.positions, inputs, runner.kv_cache)  # [T, E]
    logits = runner.model.compute_logits(hidden)                                        # [T, V]
    cu = inputs.cu_seqlens_q.tolist()
    return [logits[cu[i] + len(p) - 1 : cu[i + 1]] for i, p in enumerate(prompts)]      # [n_i, V] each


def greedy_agreement(prompts: list[list[int]], max_tokens: int = 24, *, calculate_kv_scales: bool = False,
                     block_size: int = 16) -> GreedyAgreement:
    """bf16 cache vs fp8 cache on the same bf16 model and prompts (see the module docstring)."""
    configs = {"bf16": replace(engine_config("auto"), block_size=block_size),
               "fp8": replace(engine_config("fp8", calculate_kv_scales), block_size=block_size)}
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    runs = {name: LLM(cfg).generate(prompts, params, use_tqdm=False) for name, cfg in configs.items()}
    first = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), None)
             for x, y in zip(runs["bf16"], runs["fp8"])]
    reference = runs["bf16"]
    logits = {name: teacher_forced_logits(cfg, prompts, reference) for name, cfg in configs.items()}
    agree, flips, margins = {}, [], []                                                 # margins: [n] each
    for name, per_prompt in logits.items():
        hits = [lg.argmax(-1) == torch.tensor(c) for lg, c in zip(per_prompt, reference)]
        agree[name] = float(torch.cat(hits).float().mean())
    for i, (lb, lf) in enumerate(zip(logits["bf16"], logits["fp8"])):
        top2 = lb.topk(2, dim=-1).values                                               # [n, 2]
        margin = top2[:, 0] - top2[:, 1]                                               # [n]
        margins.append(margin)
        for step in (lf.argmax(-1) != lb.argmax(-1)).nonzero().flatten().tolist():
            flips.append(Flip(i, step, int(lb[step].argmax()), int(lf[step].argmax()), float(margin[step])))
    return GreedyAgreement(len(prompts), max_tokens, sum(d is None for d in first), first, agree, flips,
                           torch.cat(margins).tolist())
