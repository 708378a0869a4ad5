#!/usr/bin/env bash
# On a GPU machine, after scripts/gpu_check.sh has built minidl: shows what the reliability features
# do on CUDA, where this repository's CI (no GPU) cannot.
#   1. the CUDA tests of deterministic mode and anomaly mode;
#   2. --deterministic: mnist_mlp and mnist_cnn (graphed, cuDNN or im2col as Auto picks) trained
#      twice in two processes write byte-identical checkpoints, and the epoch times beside those of
#      the default mode (whose checkpoints may differ run to run: timed algorithm picks, atomics);
#   3. --detect-anomaly on cuda names the op where a run with --lr 10 first overflows;
#   4. Ctrl-C on cuda: exit status 130, a checkpoint, and a resume that finishes the epoch;
#   5. flat memory: mnist_mlp and mnist_cnn trained 20 epochs on cuda (graphed) with --memory-report
#      keep the device allocator's bytes in use and held where they were after epoch 1, and the
#      host's resident set within 8 MB of it.
#
#   scripts/gpu_reliability.sh            # BUILD_DIR (default build-gpu), MINIDL_DATA, OUT as gpu_check.sh
#
# Logs and a summary go to ${OUT:-gpu-results}/reliability/. Exit status 0 when every check passed.
set -u -o pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT=${OUT:-gpu-results}/reliability
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
status=0
say() { echo "== $*" | tee -a "$SUMMARY"; }
fail() { say "FAILED: $*"; status=1; }

[ -x "$BUILD_DIR/minidl_tests" ] || { say "no $BUILD_DIR/minidl_tests: run scripts/gpu_check.sh (STEPS=build) first"; exit 1; }
data_flag=()
[ -n "${MINIDL_DATA:-}" ] && data_flag=(--data "$MINIDL_DATA")

# 1. The tests.
if "$BUILD_DIR/minidl_tests" --gtest_filter='CudaDeterministic.*:CudaAnomalyMode.*' >"$OUT/tests.log" 2>&1; then
  say "tests: ok"
else
  fail "tests (see tests.log)"
fi
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/tests.log" | tee -a "$SUMMARY"

# 2. Two processes, one result.
base=(--device cuda --epochs 1 "${data_flag[@]}")
short=("${base[@]}" --limit 12800)
for app in mnist_mlp mnist_cnn; do
  for mode in deterministic default; do
    extra=()
    [ "$mode" = deterministic ] && extra=(--deterministic)
    for run in 1 2; do
      "$BUILD_DIR/$app" "${short[@]}" "${extra[@]}" --save "$OUT/$app.$mode.$run.safetensors" \
        >"$OUT/$app.$mode.$run.log" 2>&1 || fail "$app $mode run $run (see $app.$mode.$run.log)"
    done
    times=$(grep -ho "epoch time [0-9.]* s" "$OUT/$app.$mode".[12].log | tr '\n' ' ')
    if cmp -s "$OUT/$app.$mode.1.safetensors" "$OUT/$app.$mode.2.safetensors"; then
      say "$app ${extra[*]:-default mode}: the two runs' checkpoints are identical ($times)"
    elif [ "$mode" = deterministic ]; then
      fail "$app --deterministic: the two runs' checkpoints differ ($times)"
    else
      say "$app default mode: the two runs' checkpoints differ, as they may ($times)"
    fi
  done
done

# 3. Anomaly mode on the GPU.
"$BUILD_DIR/mnist_mlp" --device cuda --epochs 1 --limit 6400 --lr 10 --detect-anomaly "${data_flag[@]}" \
  >"$OUT/anomaly.log" 2>&1
if grep -q "anomaly detected in the" "$OUT/anomaly.log"; then
  say "detect-anomaly: $(grep -o "anomaly detected in the [a-z]* of '[a-z_0-9]*'" "$OUT/anomaly.log" | head -1)"
else
  fail "detect-anomaly: no anomaly reported (see anomaly.log)"
fi

# 4. Ctrl-C on the GPU, then resume.
ckpt="$OUT/interrupted.safetensors"
rm -f "$ckpt"
"$BUILD_DIR/mnist_cnn" "${base[@]}" --save "$ckpt" >"$OUT/interrupt.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "Epoch 1 \[" "$OUT/interrupt.log" && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
rc=$?
if [ $rc -eq 130 ] && grep -q "checkpoint written to" "$OUT/interrupt.log"; then
  say "interrupt: exit 130, $(grep -o "interrupted in epoch [0-9]* after [0-9]* of its [0-9]* batches" "$OUT/interrupt.log")"
  if "$BUILD_DIR/mnist_cnn" "${base[@]}" --resume "$ckpt" >"$OUT/resume.log" 2>&1; then
    say "resume: ok, $(grep -o "Test set: .*" "$OUT/resume.log")"
  else
    fail "resume (see resume.log)"
  fi
else
  fail "interrupt: exit $rc (see interrupt.log)"
fi

# 5. Twenty epochs, memory flat after the first.
for app in mnist_mlp mnist_cnn; do
  if "$BUILD_DIR/$app" --device cuda --epochs 20 --memory-report "${data_flag[@]}" >"$OUT/$app.memory.log" 2>&1; then
    verdict=$(grep "^memory after epoch" "$OUT/$app.memory.log" | awk '
      { rss = $7; use = $12; held = $15 }
      NR == 1 { rss1 = rss; use1 = use; held1 = held; maxrss = rss }
      NR > 1 { if (use != use1 || held != held1) bad = bad " epoch " NR ": in use " use ", held " held ";";
               if (rss > maxrss) maxrss = rss }
      END { if (NR < 20) print "FAIL only " NR " readings";
            else if (bad != "" || maxrss - rss1 > 8) print "FAIL after epoch 1: in use " use1 ", held " held1 ", host " rss1 " MB;" bad " host at most " maxrss " MB";
            else print "ok: device in use " use1 " bytes and held " held1 " bytes at every epoch, host resident " rss1 " to " maxrss " MB" }')
    case $verdict in
      ok*) say "$app 20 epochs memory: $verdict; $(grep -o 'accuracy [0-9/]* ([0-9.]*%)' "$OUT/$app.memory.log" | tail -1)" ;;
      *) fail "$app 20 epochs memory: $verdict" ;;
    esac
  else
    fail "$app 20 epochs (see $app.memory.log)"
  fi
done

exit $status
