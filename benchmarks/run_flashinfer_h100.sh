#!/usr/bin/env bash
# FlashInfer beside the course's kernels (issue 39) and every notebook natively, in ONE call of at most
# 9.5 minutes on an H100 or H200. From the repository root, with FlashInfer's two wheels in FI_WHEELS and
# the notebooks' wheelhouse (benchmarks/run_notebooks_gpu.sh says which) in NB_WHEELS:
#
#     FI_WHEELS=.fiwhl NB_WHEELS=.whl bash benchmarks/run_flashinfer_h100.sh "$OUT" [notebooks|none] \
#         [mla,decode,cascade,prefill,profile,profile_prefill,profile_decode]
#
# WARM_JOBS (flashinfer_baselines.py --jobs) and DECODE_SHAPES (bench_decode.py --shapes) narrow a run;
# CASCADE_SUFFIX is the cascade's own tokens per sequence (default 256, issue 39's shape).
#
# 1. FlashInfer's modules JIT-compiled in the background (flashinfer_baselines.py --warm) while the MLA
#    kernel tests and the notebooks (4 at a time, nbclient; "none" skips them) run; then, alone on the GPU,
# 2. bench_mla.py (C = 4096, B 1/8/64/128), bench_decode.py, bench_cascade.py (prefix 4096),
#    bench_prefill.py, each with its FlashInfer rows (and vLLM's kernel's, where `.vllm` holds it). The
#    profiles run during step 1: `profile`: Nsight Compute's sections of the tuned MLA kernel at B = 64
#    (pointers, then TMA); `profile_prefill`: of the prefill kernel at cold 8x2048 and 32x512;
#    `profile_decode`: of the decode kernel and its merge at 1x4096 (benchmarks/profile_kernels.py).
# FLASHINFER_WORKSPACE_BASE=$FI_CACHE (default /tmp/fi_ws) holds the compiled modules (too large to bring
# back within the device's 64 MiB: every call builds them again, in the background).
# Everything lands in $OUT/fi_run.tar.gz (extract into benchmarks/results/flashinfer_run) and the tables
# and logs' tails in $OUT/summary.txt.
set -u
OUT="${1:-${OUT:-/tmp}}"
NOTEBOOKS="${2:-notebooks}"
BENCHES="${3:-mla,decode,cascade,prefill}"
PY="${PYTHON:-python3}"
DEADLINE_S="${DEADLINE_S:-560}"
TARBALL=fi_run.tar.gz
SUMMARY_TAIL=30
source "$(dirname "$0")/gpu_run_steps.sh"
NCU=(ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
     --section SchedulerStats --section MemoryWorkloadAnalysis --launch-skip 2)
export FI_CACHE="${FI_CACHE:-/tmp/fi_ws}"
export FLASHINFER_WORKSPACE_BASE="$FI_CACHE" FLASHINFER_CUDA_ARCH_LIST=9.0a TORCH_CUDA_ARCH_LIST=9.0a
export MAX_JOBS=$(nproc)
[ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ] && export CUDA_HOME=/usr/local/cuda
mkdir -p "$FI_CACHE"
if [ -d "${FI_WHEELS:-.fiwhl}" ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fi-site \
        "${FI_WHEELS:-.fiwhl}"/*.whl 2>&1 | tail -2
    export PYTHONPATH="$PYTHONPATH:/tmp/fi-site"
fi
write_env
"$PY" benchmarks/flashinfer_baselines.py | tee -a "$RUN/env.txt"

"$PY" -u benchmarks/flashinfer_baselines.py --warm ${WARM_JOBS:+--jobs "$WARM_JOBS"} > "$RUN/flashinfer_warm.log" 2>&1 &
if [ "$NOTEBOOKS" = notebooks ] && [ -d "${NB_WHEELS:-.whl}" ]; then
    "$PY" -m pip install -q --no-index --find-links "${NB_WHEELS:-.whl}" --target /tmp/nb-site nbclient \
        ipykernel ipywidgets xxhash 2>&1 | tail -2
    ( export PYTHONPATH="/tmp/nb-site:$PYTHONPATH" JUPYTER_PATH=/tmp/nb-site/share/jupyter MPLBACKEND=Agg
      for group in "00 01 02 03 04 05" "06 07 08 09 10 11" "12 13 14 15 16 17" "18 19 20 21 22"; do
          name="notebooks_gpu_${group%% *}"
          timeout 240 "$PY" -u benchmarks/bench_notebooks.py --no-callbacks --json "$RUN/$name.json" $group \
              > "$RUN/$name.log" 2>&1 &
      done
      wait ) &
fi
# bench NAME: one entry of the third argument
bench() {
    case $1 in
        mla) step bench_mla 170 "$PY" -u benchmarks/bench_mla.py --out "$RUN" --contexts 4096 \
                 --batches 1,8,64,128 --budget-s 150 ;;
        decode) step bench_decode 110 "$PY" -u benchmarks/bench_decode.py --out "$RUN" --budget-s 90 \
                    ${DECODE_SHAPES:+--shapes "$DECODE_SHAPES"} ;;
        cascade) step bench_cascade 90 "$PY" -u benchmarks/bench_cascade.py --out "$RUN" --prefixes 4096 \
                     --suffix "${CASCADE_SUFFIX:-256}" --budget-s 70 ;;
        prefill) step bench_prefill 100 "$PY" -u benchmarks/bench_prefill.py --out "$RUN" --budget-s 80 ;;
        profile) for tma in "" --tma; do
                     step "ncu_mla${tma:+_tma}" 60 "${NCU[@]}" -k regex:_mla_decode_tuned -c 1 \
                         "$PY" benchmarks/profile_kernels.py mla $tma
                 done ;;
        profile_prefill) for shape in cold8x2048 cold32x512; do
                             step "ncu_prefill_$shape" 90 "${NCU[@]}" -k regex:_prefill_attention_kernel -c 1 \
                                 "$PY" benchmarks/profile_kernels.py prefill --shape "$shape"
                         done ;;
        profile_decode) step ncu_decode_1x4096 60 "${NCU[@]}" -k "regex:chunked_decode_kernel|_merge_chunks" \
                            -c 2 "$PY" benchmarks/profile_kernels.py decode --shape 1x4096 ;;
    esac
}

# on the GPU while FlashInfer compiles on the CPUs: the kernel tests, then the profiles (Nsight Compute
# replays each kernel alone, so a busy CPU does not change what it reads); the timed benchmarks after
step kernel_tests 150 "${PYTEST[@]}" tests/kernels/test_kernels_mla_decode.py tests/core/test_mla_attention.py \
    tests/kernels/test_kernels_cascade_attention.py
for name in ${BENCHES//,/ }; do
    [[ $name == profile* ]] && bench "$name"
done
wait
echo "flashinfer warm-up done after $(( $(date +%s) - START )) s" | tee -a "$RUN/steps.txt"
for name in ${BENCHES//,/ }; do
    [[ $name == profile* ]] || bench "$name"
done
echo "done in $(( $(date +%s) - START )) s"
