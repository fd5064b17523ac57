"""Does a bf16 or an FP8 KV cache change what the mini engine generates? Greedy tokens (notebook 13).

One model (random weights) generates greedily for a fixed prompt set three times, with three caches:
  - "float64": the cache holds exactly what the model computed (the reference);
  - "bf16":    every K/V element rounded to bf16 as it is stored (a float64 cache that holds the bf16-rounded
               values: the same numbers a bf16 cache would give back);
  - "fp8":     the engine's float8 e4m3 cache, scales 1.0 (vLLM's default).
The model computes in float64, so that the only rounding that differs between the three runs is the cache's.
In bf16 arithmetic (what an engine serves) the model's own rounding would add to it, and the bf16 kernels of
one CPU round differently from another's: the counts would change from machine to machine (they did, by up to
5 flips in 36). In float64 the arithmetic differs between CPUs only in the last bits, far below the smallest
top-2 margin here; the counts are the same under every instruction set and thread count the tests simulate.
Two measures, each cache against the reference:
  - free running: how many completions are identical, and at which step each first diverges (after the
    first difference the two continue from different contexts, so later positions are not compared);
  - teacher forced: every reference completion is fed back as ONE prefill through each cache, and at every
    position we ask whether the argmax is the reference's token. This is agreement per step, without
    compounding. The reference cache scores 100%: a prefill reproduces the tokens its decode steps chose.
At every position the reference logits' top-2 margin says how close the choice was: steps that a cache flips
should be near-ties. A random model's logits are flat (margins small), so it flips more easily than a
trained model would; the study shows the mechanism, not a trained model's figure.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

import torch

from pagedkv_lib.core.sampling_params import SamplingParams
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.engine.config import EngineConfig, ModelConfig
from pagedkv_lib.engine.llm_engine import LLM
from pagedkv_lib.engine.model_runner import ModelRunner

MODEL_DTYPE = torch.float64
CACHES = ("float64", "bf16", "fp8")     # the first is the reference


@dataclass(frozen=True)
class Flip:
    prompt: int          # index into the prompt set
    step: int            # completion position
    reference_token: int
    token: int           # the cache's argmax
    margin: float        # reference logits: top-1 minus top-2 at that step


@dataclass(frozen=True)
class GreedyAgreement:
    num_prompts: int
    max_tokens: int
    identical: dict               # cache -> free-running completions equal to the reference token for token
    first_divergence: dict        # cache -> per prompt: the first step that differs, or None
    teacher_forced: dict          # cache -> fraction of steps whose argmax is the reference's token
    flips: dict                   # cache -> a Flip per teacher-forced step whose argmax differs
    margins: list                 # reference top-2 margin of every step (all prompts, in order)

    @property
    def median_margin(self) -> float:
        return float(torch.tensor(self.margins).median()) if self.margins else float("nan")


def prompt_set(num_prompts: int = 12, min_len: int = 8, max_len: int = 40, vocab: int = 512,
               seed: int = 0) -> list[list[int]]:
    """Fixed random prompts: lengths uniform in [min_len, max_len], tokens uniform in [0, vocab)."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(min_len, max_len))] for _ in range(num_prompts)]


def engine_config(cache: str, block_size: int = 16) -> EngineConfig:
    """The float64 model with the engine's cache for `cache` (one of CACHES; "bf16" is a float64 cache that
    `round_stores_to_bf16` makes hold bf16 values)."""
    return EngineConfig(model=ModelConfig(dtype=MODEL_DTYPE), num_kvcache_blocks=96, block_size=block_size,
                        kv_cache_dtype="fp8" if cache == "fp8" else "auto")


def round_stores_to_bf16(runner: ModelRunner) -> None:
    """Make every layer of `runner` round K and V to bf16 before storing them (the cache keeps its dtype)."""
    for attn in runner.attention_layers:
        store = attn.kernels.store_kvcache

        def rounded(key, value, *args, _store=store, **kwargs):
            return _store(key.bfloat16().to(key.dtype), value.bfloat16().to(value.dtype), *args, **kwargs)

        attn.kernels = replace(attn.kernels, store_kvcache=rounded)


def model_runner(cache: str, block_size: int = 16) -> ModelRunner:
    runner = ModelRunner(engine_config(cache, block_size))
    if cache == "bf16":
        round_stores_to_bf16(runner)
    return runner


def generate(cache: str, prompts, max_tokens: int, block_size: int = 16) -> list[list[int]]:
    """Greedy completions through the engine with `cache`."""
    llm = LLM(engine_config(cache, block_size))
    if cache == "bf16":
        round_stores_to_bf16(llm.model_runner)
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    return llm.generate(prompts, params, use_tqdm=False)


@torch.inference_mode()
def teacher_forced_logits(runner: ModelRunner, prompts, completions) -> list[torch.Tensor]:
    """Each prompt + completion as one prefill through a fresh cache: logits [n, V] that predict the n
    completion tokens (positions len(prompt) - 1 .. end - 2)."""
    seqs = []
    next_block = 0
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        seq = Sequence(p + c[:-1], runner.config.block_size, seq_id=i)   # c[-1] predicts nothing we check
        seq.block_table = list(range(next_block, next_block + seq.num_blocks))
        next_block += seq.num_blocks
        seqs.append(seq)
    inputs = runner.to_device(runner.prepare(seqs, is_prefill=True))
    hidden = runner.model(inputs.input_ids, inputs.positions, inputs, runner.kv_cache)  # [T, E]
    logits = runner.model.compute_logits(hidden)                                        # [T, V]
    cu = inputs.cu_seqlens_q.tolist()
    return [logits[cu[i] + len(p) - 1 : cu[i + 1]] for i, p in enumerate(prompts)]      # [n_i, V] each


def greedy_agreement(prompts: list[list[int]], max_tokens: int = 24, *,
                     block_size: int = 16) -> GreedyAgreement:
    """Each cache of CACHES against the first, on the same float64 model and prompts (module docstring)."""
    runs = {cache: generate(cache, prompts, max_tokens, block_size) for cache in CACHES}
    reference = runs[CACHES[0]]
    first = {cache: [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), None)
                     for x, y in zip(reference, runs[cache])] for cache in CACHES[1:]}
    logits = {cache: teacher_forced_logits(model_runner(cache, block_size), prompts, reference)
              for cache in CACHES}
    top2 = [lg.topk(2, dim=-1).values for lg in logits[CACHES[0]]]                    # [n, 2] each
    margins = [t[:, 0] - t[:, 1] for t in top2]                                        # [n] each
    agree, flips = {}, {}
    for cache, per_prompt in logits.items():
        hits = [lg.argmax(-1) == torch.tensor(c) for lg, c in zip(per_prompt, reference)]   # [n] each
        agree[cache] = float(torch.cat(hits).double().mean())
        flips[cache] = [Flip(i, step, reference[i][step], int(lg[step].argmax()), float(margins[i][step]))
                        for i, (lg, hit) in enumerate(zip(per_prompt, hits))
                        for step in (~hit).nonzero().flatten().tolist()]
    return GreedyAgreement(len(prompts), max_tokens, {c: sum(d is None for d in f) for c, f in first.items()},
                           first, agree, flips, torch.cat(margins).tolist())
