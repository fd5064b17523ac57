# Sourced by the one-call GPU scripts (run_h200.sh, run_engine_h200.sh): a time-boxed `step`, and `finish`,
# which packs every log, JSON and table of the run into $OUT/$TARBALL (the device returns only a few files)
# and the step list, the tables and the logs' tails into $OUT/summary.txt. The caller sets OUT, PY,
# DEADLINE_S, TARBALL and SUMMARY_TAIL (lines of each log in the summary) before sourcing this file.
START=$(date +%s)
RUN="$(mktemp -d)"
mkdir -p "$OUT"
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
PYTEST=("$PY" -m pytest -o addopts="" -p no:cacheprovider -q -rs)    # pyproject's addopts name nbval

finish() {
    (cd "$RUN" && tar -czf "$OUT/$TARBALL" .)
    { cat "$RUN/steps.txt"
      for f in "$RUN"/*.txt; do [ "$(basename "$f")" = steps.txt ] || { echo; echo "== $(basename "$f")"; cat "$f"; }; done
      for f in "$RUN"/*.log; do echo; echo "== tail of $(basename "$f")"; tail -n "$SUMMARY_TAIL" "$f"; done
    } > "$OUT/summary.txt" 2>&1
    echo "wrote $OUT/$TARBALL and $OUT/summary.txt after $(( $(date +%s) - START )) s"
}
trap finish EXIT

# step NAME LIMIT_S COMMAND...: run with a timeout no later than the deadline; log to NAME.log
step() {
    local name=$1 limit=$2 left
    shift 2
    left=$(( DEADLINE_S - ($(date +%s) - START) - 10 ))
    if [ "$left" -lt 20 ]; then
        echo "$name: SKIPPED (deadline)" | tee -a "$RUN/steps.txt"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    local t0=$(date +%s)
    timeout -k 5 "$limit" "$@" > "$RUN/$name.log" 2>&1
    local rc=$?
    echo "$name: rc $rc in $(( $(date +%s) - t0 )) s (limit $limit s)" | tee -a "$RUN/steps.txt"
}

# write_env: the GPU, its clocks and the torch and triton versions -> $RUN/env.txt, and print them
write_env() {
    { nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
      "$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    } > "$RUN/env.txt" 2>&1
    cat "$RUN/env.txt"
}
