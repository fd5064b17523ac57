"""Hugging Face transformers on bench_engine_gpu.py's shapes: what a user would run instead of the engine.

    PYTHONPATH=. python benchmarks/bench_engine_hf.py --out OUT [--budget-s 150] [--new-tokens 32]

Writes OUT/engine_hf.json (bench_engine_gpu.py --hf puts it in its table). A separate process: its memory
and its torch.compile state stay out of the engine's run.

Model: `Qwen3ForCausalLM` from a Qwen3-0.6B-shaped `Qwen3Config` built in code (random weights, bf16, SDPA
attention, nothing downloaded). Prompts: B x 1024 random tokens; no end-of-sequence token, so every request
generates exactly the tokens asked for. Methods, in order (the budget may stop the later ones):

    dynamic          model.generate, the default dynamic cache
    static_eager     generate(cache_implementation="static", disable_compile=True)
    static_compiled  generate(cache_implementation="static"): transformers compiles its decode step with
                     torch.compile (its default on CUDA), once per batch size: warmed up before timing
    generate_batch   model.generate_batch (paged continuous batching), all B requests at once

A decode step's time is (time of N + 1 new tokens - time of 1 new token) / N: the prefill and the first
token cancel out; tokens/s = B / that. The figures are measured in ONE call of each (after a warm-up),
so they carry that call's noise; the engine's run gives the copy bandwidth they are compared against.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import gpu_harness as gh
import torch

BATCHES = (1, 8, 64, 256)
PROMPT_LEN = 1024


def build_model(tiny: bool):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    shape = dict(vocab_size=151_936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40_960)
    if tiny:
        shape = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048)
    config = Qwen3Config(**shape, tie_word_embeddings=True, rms_norm_eps=1e-6, eos_token_id=None,
                         pad_token_id=0, bos_token_id=None)
    torch.manual_seed(0)
    device = "cuda" if gh.CUDA else "cpu"
    with torch.device(device):
        model = Qwen3ForCausalLM(config)
    model = model.to(torch.bfloat16).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def timed(fn) -> float:
    gh.sync()
    t0 = time.perf_counter()
    fn()
    gh.sync()
    return time.perf_counter() - t0


def generate_fn(model, input_ids, new_tokens: int, **kwargs):
    mask = torch.ones_like(input_ids)

    def run():
        with torch.inference_mode():
            out = model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=new_tokens,
                                 do_sample=False, **kwargs)
        generated = out.shape[1] - input_ids.shape[1]
        assert generated == new_tokens, f"generated {generated} tokens, asked for {new_tokens}"
    return run


def batch_fn(model, prompts: list[list[int]], new_tokens: int):
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)

    def run():                              # no inference_mode: its manager thread makes its own tensors
        out = model.generate_batch(inputs=prompts, generation_config=config)
        assert len(out) == len(prompts) and all(len(o.generated_tokens) == new_tokens for o in out.values())
    return run


def measure(make, new_tokens: int, B: int, warm: bool = True) -> dict:
    """make(n) -> a call generating n tokens per request; one warm-up, then n = 1 and n = new_tokens + 1."""
    if warm:
        make(2)()
    t1 = timed(make(1))
    tn = timed(make(new_tokens + 1))
    ms = (tn - t1) / new_tokens * 1e3
    return dict(ms_per_step=ms, tokens_per_s=B / (ms / 1e3), first_token_ms=t1 * 1e3, new_tokens=new_tokens)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--compiled-batches", default="64,1", help="static_compiled: one compile each")
    args = ap.parse_args()
    budget = gh.Budget(args.budget_s)
    out = Path(args.out)
    import transformers

    result = dict(env=gh.environment(), version=transformers.__version__, prompt_len=PROMPT_LEN,
                  started=time.strftime("%Y-%m-%d %H:%M:%S"), methods={})
    model = build_model(tiny=not gh.CUDA)
    prompt_len = PROMPT_LEN if gh.CUDA else 32
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    batches = [int(b) for b in args.batches.split(",")]
    compiled = [int(b) for b in args.compiled_batches.split(",") if b]
    plan = ([("dynamic", B) for B in batches] + [("static_eager", B) for B in batches]
            + [("generate_batch", 64)] + [("static_compiled", B) for B in compiled])
    for method, B in plan:
        entry = result["methods"].setdefault(method, {"batches": {}})["batches"].setdefault(str(B), {})
        if budget.over():
            entry["error"] = "skipped: budget"
            continue
        ids = torch.randint(vocab, (B, prompt_len), generator=gen).to("cuda" if gh.CUDA else "cpu")
        if method == "dynamic":
            make = lambda n, ids=ids: generate_fn(model, ids, n)                      # noqa: E731
        elif method == "static_eager":
            make = lambda n, ids=ids: generate_fn(model, ids, n, cache_implementation="static",  # noqa: E731
                                                  disable_compile=True)
        elif method == "static_compiled":
            make = lambda n, ids=ids: generate_fn(model, ids, n, cache_implementation="static")  # noqa: E731
        else:
            prompts = ids.tolist()
            make = lambda n, p=prompts: batch_fn(model, p, n)                         # noqa: E731
        row = gh.attempt(entry, measure, make, args.new_tokens, B)
        if row:
            entry.update(row)
        done = "ms_per_step" in entry
        gh.log(f"{method:>16} B={B:<4} " + (f"{entry['ms_per_step']:8.2f} ms/step "
                                           f"{entry['tokens_per_s']:9.0f} tok/s" if done else
                                           entry.get("error", "")[:150]))
        gh.write_json(out / "engine_hf.json", result)
        if gh.CUDA:
            torch.cuda.empty_cache()
    result["seconds"] = budget.used()
    gh.write_json(out / "engine_hf.json", result)


if __name__ == "__main__":
    main()
