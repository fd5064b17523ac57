"""The mini engine end to end on one GPU: decode ms/step and tokens/s, eager and CUDA-graphed, next to the
step's floor and to Hugging Face transformers.

    PYTHONPATH=. python benchmarks/bench_engine_gpu.py --out OUT [--hf OUT/engine_hf.json] [--budget-s 200]
        [--modes graphed,overlap,eager] [--smoke]

Writes OUT/bench_engine.json (every step of every run) and OUT/bench_engine.txt (the table). `--smoke` (and
any run without a GPU): the tiny CPU model, 24 prompt + 4 generated tokens, batches 1 and 8, the PyTorch
reference kernels (the Triton interpreter would take minutes).

Modes: "eager" (no CUDA graphs), "graphed" (CUDA graphs for decode), "overlap" (graphs and
`overlap_scheduling`: the host schedules and launches step t+1 before it reads step t's tokens).

Model: the Qwen3-0.6B shape (28 layers, hidden 1024, 16 query heads, 8 KV heads, head dim 128, intermediate
3072, vocab 151,936, tied embeddings) with random bf16 weights (`pagedkv_lib.engine`, seeded). Workload per
batch B in 1, 8, 64, 256: B requests of 1024 random prompt tokens, 256 generated each (greedy), block size
16, one pool for the largest batch. Before each timed run a warm-up of B short requests compiles the kernels
and captures the graph of that batch size. Timed: every `LLM.step()` by the host clock (what a caller
waits: scheduling, inputs, forward, sampling, the readback of the tokens); decode steps are reported.

The floor of a decode step: the bytes it must read, over the copy bandwidth measured in the same run
(gpu_harness): every weight once (the embedding once, as the tied LM head; norms included) plus the K and
V of every context token of every layer. Also measured: the graph replay alone (CUDA events, the forward's
GPU time), and at B = 1 and 64 one profiled step per mode (kernels launched, GPU busy time, the kernels
that take the most GPU time). Greedy tokens of
the eager, graphed and overlapped runs are compared (same prompts, same weights). At B = 8 a few decode
steps of the graphed and the overlapped engine are traced: the host's phases by its clock (`LLM.timeline`)
and each step's device span between two CUDA events (recorded before the launch and after the tokens' copy),
both relative to one event recorded on an idle stream (notebook 14 draws them).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import time
from pathlib import Path

import gpu_harness as gh
import torch

from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams

QWEN3_0_6B = ModelConfig(vocab_size=151_936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                         num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                         rope_theta=1_000_000.0, max_position_embeddings=40_960, dtype=torch.bfloat16)
BLOCK_SIZE = 16
BATCHES = (1, 8, 64, 256)
TARGETS_X_FLOOR = {1: 2.0, 8: 1.6, 64: 1.25, 256: 1.15}      # issue 32: decode step / floor


@dataclasses.dataclass(frozen=True)
class Workload:
    prompt_len: int = 1024
    max_tokens: int = 256


MODES = ("graphed", "overlap", "eager")
TRACE_BATCH = 8
TRACE_STEPS = 6
PROFILED_BATCHES = (1, 64)      # one profiled decode step per mode: kernels launched, GPU busy time
TOP_KERNELS = 8                # the kernel names that take the most GPU time, listed for the graphed mode


def engine_config(max_batch: int, mode: str, model: ModelConfig, work: Workload) -> EngineConfig:
    max_len = work.prompt_len + work.max_tokens
    blocks = max_batch * (-(-max_len // BLOCK_SIZE)) + 64
    return EngineConfig(model=model, block_size=BLOCK_SIZE, num_kvcache_blocks=blocks, max_num_seqs=max_batch,
                        max_num_batched_tokens=max(16_384, max_len), max_model_len=max_len,
                        device="cuda" if gh.CUDA else "cpu", use_triton=gh.CUDA,
                        enforce_eager=mode == "eager", overlap_scheduling=mode == "overlap")


def prompts(B: int, seed: int, length: int, vocab: int):
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(length)] for _ in range(B)]


def weight_bytes(model) -> int:
    """Bytes of every parameter: a decode step reads each once (the tied embedding once, as the LM head)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def kv_bytes_per_token(config: EngineConfig) -> int:
    m = config.model
    return 2 * m.num_hidden_layers * m.num_key_value_heads * m.head_dim * torch.empty(
        0, dtype=config.kv_cache_torch_dtype).element_size()


def run_batch(llm: LLM, B: int, seed: int, work: Workload) -> dict:
    """Warm up (B requests of 16 tokens, 2 generated), then B x prompt_len prompt tokens, max_tokens
    generated; every step timed by the host clock."""
    vocab = llm.config.model.vocab_size
    llm.generate(prompts(B, seed + 1, 16, vocab), SamplingParams(max_tokens=2), use_tqdm=False)
    gh.sync()
    ids = [llm.add_request(p, SamplingParams(max_tokens=work.max_tokens))
           for p in prompts(B, seed, work.prompt_len, vocab)]
    steps, outputs = [], {}
    while not llm.is_finished():
        context = sum(len(s) for s in llm.scheduler.running)         # a decode step reads these tokens
        t0 = time.perf_counter()
        finished = llm.step()
        ms = (time.perf_counter() - t0) * 1e3
        st = llm.stats[-1]
        steps.append(dict(prefill=st.is_prefill, seqs=st.num_seqs, ms=ms,
                          context_tokens=0 if st.is_prefill else context))
        outputs.update((s.seq_id, s.completion_token_ids) for s in finished)
    return dict(steps=steps, tokens=[outputs[i] for i in ids])


def graph_replay_ms(llm: LLM, B: int, reps: int = 20) -> float | None:
    """GPU time of one replay of the batch's graph, on the inputs of its last step (CUDA events, median)."""
    graphs = llm.model_runner.graphs
    if graphs is None or not gh.CUDA:
        return None
    from pagedkv_lib.engine.decode_graphs import padded_batch_size

    graph = graphs.graphs.get(padded_batch_size(B, graphs.batch_sizes))
    return statistics.median(gh.event_ms(graph.replay, reps)) if graph is not None else None


def profile_decode_step(llm: LLM, B: int, seed: int, work: Workload) -> dict:
    """Kernels launched and GPU busy time of one decode step (torch.profiler): the second decode step of B
    fresh requests."""
    if not gh.CUDA:
        return {}
    from torch.profiler import ProfilerActivity, profile

    for p in prompts(B, seed, work.prompt_len, llm.config.model.vocab_size):
        llm.add_request(p, SamplingParams(max_tokens=4))
    llm.step()
    while llm.stats[-1].is_prefill:                                   # through the prefills and one decode
        llm.step()
    gh.sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        llm.step()
        gh.sync()
    kernels = [e for e in prof.events() if "CUDA" in str(getattr(e, "device_type", ""))
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    busy_us = sum(e.device_time for e in kernels) if kernels else 0.0
    while not llm.is_finished():
        llm.step()
    return dict(kernels=len(kernels), gpu_busy_ms=busy_us / 1e3, top=top_kernels(kernels))


def top_kernels(kernels, n: int = TOP_KERNELS) -> list[dict]:
    """The n kernel names that take the most GPU time in the profiled step: name, launches, total us."""
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        by_name.setdefault(e.name, []).append(e.device_time)
    ranked = sorted(by_name.items(), key=lambda item: -sum(item[1]))[:n]
    return [dict(name=name, launches=len(times), us=sum(times)) for name, times in ranked]


def trace_timeline(llm: LLM, B: int, seed: int, work: Workload, num_steps: int = TRACE_STEPS) -> list[dict]:
    """Host phases (LLM.timeline) and device spans (CUDA events around each launch) of `num_steps` decode
    steps of B fresh requests, in ms from one reference point; on a CPU the device lane is left empty."""
    for p in prompts(B, seed, work.prompt_len, llm.config.model.vocab_size):
        llm.add_request(p, SamplingParams(max_tokens=work.max_tokens))
    while not llm.stats or llm.stats[-1].is_prefill or llm.stats[-1].num_seqs < B:
        llm.step()
    runner, events = llm.model_runner, []
    launch = runner.launch

    def traced_launch(*args, **kwargs):
        start = torch.cuda.Event(enable_timing=True) if gh.CUDA else None
        if start is not None:
            start.record()
        pending = launch(*args, **kwargs)
        if start is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            events.append((len(llm.stats), start, end))
        return pending

    gh.sync()
    base = torch.cuda.Event(enable_timing=True) if gh.CUDA else None
    if base is not None:
        base.record()
    host0, first_span, first_step = time.perf_counter(), len(llm.timeline), len(llm.stats)
    runner.launch = traced_launch
    try:
        for _ in range(num_steps):
            if llm.is_finished():
                break
            llm.step()
    finally:
        del runner.launch                                             # the class's method again
    gh.sync()
    spans = [dict(lane="host", step=h.step, phase=h.phase, start_ms=(h.start - host0) * 1e3,
                  end_ms=(h.end - host0) * 1e3) for h in llm.timeline[first_span:] if h.step >= first_step]
    spans += [dict(lane="device", step=step, phase="forward", start_ms=base.elapsed_time(a),
                   end_ms=base.elapsed_time(b)) for step, a, b in events]
    while not llm.is_finished():
        llm.step()
    return spans


def summarize(run: dict, B: int, weights: int, kv_per_token: int, copy_gbs: float) -> dict:
    decode = [s for s in run["steps"] if not s["prefill"]]
    prefill = [s for s in run["steps"] if s["prefill"]]
    out = dict(B=B, prefill_steps=len(prefill), prefill_ms=sum(s["ms"] for s in prefill),
               decode_steps=len(decode))
    for label, part in (("", decode), ("_first32", decode[:32])):
        if not part:
            continue
        ms = [s["ms"] for s in part]
        floor = [(weights + s["context_tokens"] * kv_per_token) / (copy_gbs * 1e9) * 1e3 for s in part]
        out[f"ms_per_step{label}"] = statistics.mean(ms)
        out[f"median_ms{label}"] = statistics.median(ms)
        out[f"floor_ms{label}"] = statistics.mean(floor)
        out[f"x_floor{label}"] = statistics.mean(ms) / statistics.mean(floor)
        out[f"tokens_per_s{label}"] = B * len(part) / (sum(ms) / 1e3)
    return out


def bench_mode(mode: str, batches, budget: gh.Budget, copy_gbs: float, model: ModelConfig,
               work: Workload) -> dict:
    llm = LLM(engine_config(max(batches), mode, model, work))
    weights = weight_bytes(llm.model_runner.model)
    kv_per_token = kv_bytes_per_token(llm.config)
    result = dict(mode=mode, weight_bytes=weights, kv_bytes_per_token=kv_per_token, batches={})
    for B in batches:
        if budget.over():
            result.setdefault("skipped", []).append(B)
            continue
        entry = {}
        run = gh.attempt(entry, run_batch, llm, B, 100 + B, work)
        if run:
            entry.update(summarize(run, B, weights, kv_per_token, copy_gbs), tokens=run["tokens"],
                         steps=run["steps"])
            entry["graph_replay_ms"] = graph_replay_ms(llm, B)
            if entry["graph_replay_ms"]:
                last = run["steps"][-1]["context_tokens"]
                entry["replay_floor_ms"] = (weights + last * kv_per_token) / (copy_gbs * 1e9) * 1e3
            if B in PROFILED_BATCHES:
                entry["profile"] = gh.attempt(entry, profile_decode_step, llm, B, 900, work)
            if B == TRACE_BATCH and mode != "eager":
                result["timeline"] = gh.attempt(entry, trace_timeline, llm, B, 700, work)
                gh.log(f"{mode:>7} B={B:<4} traced {len(result['timeline'] or [])} spans")
        result["batches"][B] = entry
        gh.log(f"{mode:>7} B={B:<4} " + (
            f"{entry['ms_per_step']:7.2f} ms/step  {entry['tokens_per_s']:9.0f} tok/s  "
            f"{entry['x_floor']:5.2f}x floor ({entry['floor_ms']:.2f} ms)"
            + (f"  replay {entry['graph_replay_ms']:.2f} ms" if entry.get("graph_replay_ms") else "")
            if "ms_per_step" in entry else entry.get("error", "")[:120]))
    del llm
    if gh.CUDA:
        torch.cuda.empty_cache()
    return result


def table(result: dict) -> str:
    hf = result.get("hf", {})
    lines = [f"{result['env'].get('device', 'cpu')}: copy {result['copy_gbs']:.0f} GB/s; model "
             f"{result['model']['name']}; weights {result['weight_bytes'] / 1e9:.3f} GB; "
             f"{result['workload']['prompt_len']} prompt + {result['workload']['max_tokens']} generated "
             f"tokens per request",
             f"{'B':>4} {'mode':>8} {'ms/step':>8} {'tok/s':>9} {'floor ms':>8} {'x floor':>7} "
             f"{'replay ms':>9} {'x floor':>7}  {'tokens = eager':>14}"]
    for B in result["batches"]:
        for mode in MODES[::-1]:
            e = result["modes"].get(mode, {}).get("batches", {}).get(B, {})
            if "ms_per_step" not in e:
                lines.append(f"{B:>4} {mode:>8}  {e.get('error', 'not run')[:80]}")
                continue
            rep = e.get("graph_replay_ms")
            same = result.get("tokens_equal", {}).get(B)             # {mode: "n/m requests"}
            replay = f"{rep:9.2f} {rep / e['replay_floor_ms']:7.2f}" if rep else f"{'-':>9} {'-':>7}"
            lines.append(f"{B:>4} {mode:>8} {e['ms_per_step']:8.2f} {e['tokens_per_s']:9.0f} "
                         f"{e['floor_ms']:8.2f} {e['x_floor']:7.2f} {replay}"
                         + (f"  {same[mode]:>14}" if same and mode in same else ""))
        for name, m in hf.get("methods", {}).items():
            h = m.get("batches", {}).get(str(B), {})
            if "ms_per_step" in h:
                lines.append(f"{B:>4} {name[:8]:>8} {h['ms_per_step']:8.2f} {h['tokens_per_s']:9.0f}   "
                             f"(transformers {hf.get('version', '?')}, {h.get('new_tokens', '?')} new "
                             f"tokens)")
            elif h:
                lines.append(f"{B:>4} {name[:8]:>8}  {h.get('error', '')[:80]}")
    for B in PROFILED_BATCHES:
        for mode in MODES[::-1]:
            prof = result["modes"].get(mode, {}).get("batches", {}).get(B, {}).get("profile")
            if prof:
                lines.append(f"B={B} {mode}: {prof['kernels']} kernels per decode step, GPU busy "
                             f"{prof['gpu_busy_ms']:.2f} ms")
        graphed = result["modes"].get("graphed", {}).get("batches", {}).get(B, {}).get("profile") or {}
        for k in graphed.get("top", []):
            lines.append(f"    {k['us']:8.1f} us {k['launches']:4d}x  {k['name'][:90]}")
    targets = []
    for mode in ("graphed", "overlap"):
        for B, limit in TARGETS_X_FLOOR.items():
            e = result["modes"].get(mode, {}).get("batches", {}).get(B, {})
            if "x_floor" in e:
                targets.append(f"{mode} decode step at B={B} <= {limit}x the floor: {e['x_floor']:.2f}x "
                               f"({'MET' if e['x_floor'] <= limit else 'missed'})")
    lines += ["targets (same run):"] + [f"  {t}" for t in targets]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--hf", help="engine_hf.json written by bench_engine_hf.py (the transformers baseline)")
    ap.add_argument("--budget-s", type=float, default=200.0)
    ap.add_argument("--batches", default=None, help=f"default {','.join(map(str, BATCHES))} (smoke: 1,8)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--smoke", action="store_true", help="the tiny CPU model and workload (also without GPU)")
    args = ap.parse_args()
    budget = gh.Budget(args.budget_s)
    out = Path(args.out)
    smoke = args.smoke or not gh.CUDA
    batches = [int(b) for b in (args.batches or ("1,8" if smoke else ",".join(map(str, BATCHES)))).split(",")]
    modes = args.modes.split(",")
    if any(m not in MODES for m in modes):
        raise SystemExit(f"--modes: expected names from {MODES}, got {args.modes}")
    work = Workload(24, 4) if smoke else Workload()                   # smoke: tiny model, tiny work
    model = ModelConfig() if smoke else QWEN3_0_6B
    copy_gbs = gh.measure_copy_bandwidth() if gh.CUDA else 1.0
    result = dict(env=gh.environment(), copy_gbs=copy_gbs, started=time.strftime("%Y-%m-%d %H:%M:%S"),
                  model=dict(name="Qwen3-0.6B shape, random bf16 weights" if gh.CUDA else "tiny (CPU smoke)",
                             **{k: str(v) for k, v in dataclasses.asdict(model).items()}),
                  workload=dict(prompt_len=work.prompt_len, max_tokens=work.max_tokens,
                                block_size=BLOCK_SIZE),
                  batches=batches, modes={})
    if args.hf and Path(args.hf).exists():
        result["hf"] = json.loads(Path(args.hf).read_text())
    gh.log(f"copy {copy_gbs:.0f} GB/s")
    for mode in modes:
        result["modes"][mode] = bench_mode(mode, batches, budget, copy_gbs, model, work)
        result["weight_bytes"] = result["modes"][mode]["weight_bytes"]
        if "timeline" in result["modes"][mode]:
            result.setdefault("timeline", {})[mode] = result["modes"][mode].pop("timeline")
        gh.write_json(out / "bench_engine.json", result)
    result["tokens_equal"] = {}
    for B in batches:
        base = result["modes"].get("eager", {}).get("batches", {}).get(B, {}).get("tokens")
        for mode in ("graphed", "overlap"):                           # each against eager's tokens
            got = result["modes"].get(mode, {}).get("batches", {}).get(B, {}).get("tokens")
            if base and got:
                same = sum(a == b for a, b in zip(base, got, strict=True))
                result["tokens_equal"].setdefault(B, {})[mode] = f"{same}/{len(base)} requests"
    for mode in result["modes"].values():                              # the tokens themselves are not kept
        for entry in mode["batches"].values():
            entry.pop("tokens", None)
    gh.finish(result, budget, out, "bench_engine", table)


if __name__ == "__main__":
    main()
