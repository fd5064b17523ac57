#!/usr/bin/env bash
# The whole GPU run in ONE call of at most 9 minutes (a machine with python, torch, triton, pytest and
# matplotlib; no Jupyter, no network). From the repository root:
#
#     bash benchmarks/run_h200.sh "$OUT"
#
# 1. the Triton kernels' tests natively (decode, prefill, store, the fp8 store, MLA decode), the engine's
#    greedy equivalence on the Triton kernels (prefill included) and with an fp8 cache, the judge's GPU-only
#    tests
# 2. sweep_kernels.py: correctness on awkward batches, then a short re-check of the defaults -> sweep.json
# 3. bench_decode.py, bench_prefill.py: the kernels against every SDPA backend       -> bench_*.json / .txt
# 4. the judge on the GPU case sets with --bench: exercises 130, 131, 133 (the reference solutions)
# Every step has its own time limit, cut further so that the whole run ends by DEADLINE_S; a step that
# fails or times out is recorded and the run goes on. The device returns only a few files, so everything
# goes into $OUT/h200_run.tar.gz, and the tables and verdicts into $OUT/summary.txt. To commit:
#     tar -xzf h200_run.tar.gz -C benchmarks/results     (then rebuild notebooks 11 and 12 on a CPU)
set -u
OUT="${1:-${OUT:-/tmp}}"
PY="${PYTHON:-python}"
DEADLINE_S="${DEADLINE_S:-530}"
TARBALL=h200_run.tar.gz
SUMMARY_TAIL=25
source "$(dirname "$0")/gpu_run_steps.sh"

{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  "$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  git rev-parse HEAD 2>/dev/null; } > "$RUN/env.txt" 2>&1
cat "$RUN/env.txt"

step gpu_tests 170 "${PYTEST[@]}" tests/kernels/test_kernels_decode_attention.py tests/kernels/test_kernels_prefill_attention.py \
    tests/kernels/test_kernels_store_kvcache.py tests/kernels/test_kv_quant_triton.py tests/kernels/test_kernels_mla_decode.py
step engine_tests 90 "${PYTEST[@]}" tests/engine/test_engine_equivalence.py tests/engine/test_engine_fp8.py
step judge_gpu_tests 40 "${PYTEST[@]}" tests/judge/test_judge_130_131.py -k "tl_dot or cuda"
step sweep 90 "$PY" -u benchmarks/sweep_kernels.py --out "$RUN" --budget-s 70
step bench_decode 60 "$PY" -u benchmarks/bench_decode.py --out "$RUN" --tuned "$RUN/sweep.json" --budget-s 45
step bench_prefill 45 "$PY" -u benchmarks/bench_prefill.py --out "$RUN" --tuned "$RUN/sweep.json" --budget-s 30
step judge_133 70 "$PY" judge.py 133 solutions/133_triton_paged_prefill.py --device cuda --bench -v
step judge_131 50 "$PY" judge.py 131 solutions/131_triton_paged_decode.py --device cuda --bench -v
step judge_130 40 "$PY" judge.py 130 solutions/130_triton_store_kvcache.py --device cuda --bench -v
echo "done in $(( $(date +%s) - START )) s"
