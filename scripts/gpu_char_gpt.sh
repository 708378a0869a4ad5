#!/usr/bin/env bash
# char_gpt against scripts/char_gpt_pytorch.py on a GPU machine, as docs/benchmarks.md measures the
# transformer rows: PyTorch first runs once untimed, to compile (and with max-autotune, tune) its step
# into TORCHINDUCTOR_CACHE_DIR; then REPS alternating runs of each (minidl first) with the same flags.
# Ends with a table of each run's tokens/s, validation loss and peak device memory and the ratio of the
# medians, also written to $OUT/char_gpt-summary.md; $OUT/char_gpt.log holds every run's output.
#
#   BUILD_DIR=build MINIDL_DATA=datasets scripts/gpu_char_gpt.sh
#   PRECISION=fp32 COMPILE_MODE=reduce-overhead ITERS=300 scripts/gpu_char_gpt.sh
#
# Environment: BUILD_DIR (default build-gpu, holding char_gpt), MINIDL_DATA (datasets: the folder
# holding text/fortunes.txt, from scripts/get_data.sh --text), PRECISION (bf16), COMPILE_MODE
# (max-autotune), ITERS (2000), REPS (3), OUT (gpu-results), PYTHON (python3), WARMUP (1; 0 skips
# PyTorch's untimed run when its caches are already warm), TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR
# (default $OUT/inductor-cache and its triton/), CACHE_PARTS (a folder holding the
# inductor-cache.tar.xz.part-* an earlier run left in its $OUT: unpacked into an empty cache folder
# first). After the untimed run the cache is also packed into 15 MB parts in $OUT, small enough to
# come back from a GPU machine that returns files of at most 16 MB; carried to the next machine
# (CACHE_PARTS), they make PyTorch's compile there about 30 s instead of minutes. xz's strongest
# setting packs the bf16 max-autotune cache (453 MB of tar) into 13.3 MB, against 32.4 MB at -1: one
# part, which leaves room beside the binaries in a carry of 64 MiB. It costs time: 78 s against 3.6 s
# on 2 vCPUs.
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD_DIR=${BUILD_DIR:-build-gpu}
DATA=${MINIDL_DATA:-datasets}/text/fortunes.txt
PRECISION=${PRECISION:-bf16}
COMPILE_MODE=${COMPILE_MODE:-max-autotune}
ITERS=${ITERS:-2000}
REPS=${REPS:-3}
OUT=${OUT:-gpu-results}
PYTHON=${PYTHON:-python3}
WARMUP=${WARMUP:-1}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$OUT/inductor-cache}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$TORCHINDUCTOR_CACHE_DIR/triton}
export PYTHONUNBUFFERED=1
LOG=$OUT/char_gpt.log
[ -x "$BUILD_DIR/char_gpt" ] || { echo "gpu_char_gpt.sh: no $BUILD_DIR/char_gpt (build it, or set BUILD_DIR)" >&2; exit 2; }
[ -f "$DATA" ] || { echo "gpu_char_gpt.sh: no $DATA (scripts/get_data.sh --text, or set MINIDL_DATA)" >&2; exit 2; }

# Both programs take the same flags and end with the same line:
#   done: val loss L after N iterations; T tokens/s over ...; peak device memory P MB
FLAGS=(--device cuda --precision "$PRECISION" --max-iters "$ITERS" --eval-interval "$ITERS" --eval-iters 20
       --log-interval $((ITERS / 4 > 0 ? ITERS / 4 : 1)) --data "$DATA")
MINIDL=("$BUILD_DIR/char_gpt" "${FLAGS[@]}")
TORCH=("$PYTHON" scripts/char_gpt_pytorch.py --mode compile --compile-mode "$COMPILE_MODE" "${FLAGS[@]}")

# Runs "$@", appends its output to the log and prints "tokens/s val-loss peak-MB" (or a failure).
run() {
  local output status
  echo "== $*" >>"$LOG"
  output=$("$@" 2>&1)
  status=$?
  printf '%s\n' "$output" >>"$LOG"
  local done_line
  done_line=$(printf '%s\n' "$output" | grep '^done: ' | tail -1)
  if [ $status -ne 0 ] || [ -z "$done_line" ]; then
    echo "failed (exit $status; see $LOG)"
    return 1
  fi
  printf '%s\n' "$done_line" | sed -E 's/.*val loss ([0-9.]+) .*; ([0-9]+) tokens\/s .*peak device memory ([0-9.]+) MB.*/\2 \1 \3/'
}

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

CACHE_PARTS=${CACHE_PARTS:-}
if [ -n "$CACHE_PARTS" ] && [ -z "$(ls -A "$TORCHINDUCTOR_CACHE_DIR" 2>/dev/null)" ]; then
  mkdir -p "$TORCHINDUCTOR_CACHE_DIR"
  cat "$CACHE_PARTS"/inductor-cache.tar.xz.part-* | xz -dc | tar -C "$TORCHINDUCTOR_CACHE_DIR" -xf - ||
    echo "gpu_char_gpt.sh: could not unpack the caches in $CACHE_PARTS; PyTorch compiles from scratch"
fi
if [ "$WARMUP" != 0 ]; then
  echo "PyTorch's untimed run (compiles into $TORCHINDUCTOR_CACHE_DIR)..."
  run "${TORCH[@]}" >/dev/null || echo "gpu_char_gpt.sh: PyTorch's untimed run failed; the timed runs compile again"
  rm -f "$OUT"/inductor-cache.tar.xz.part-*
  tar -C "$TORCHINDUCTOR_CACHE_DIR" -cf - . | xz -T0 -9e | split -b 15M - "$OUT/inductor-cache.tar.xz.part-"
fi
minidl_rates=() torch_rates=() rows=()
for ((r = 1; r <= REPS; ++r)); do
  for side in minidl PyTorch; do
    if [ $side = minidl ]; then result=$(run "${MINIDL[@]}"); else result=$(run "${TORCH[@]}"); fi
    echo "$side, run $r: $result"
    read -r rate loss peak <<<"$result"
    if [[ $rate =~ ^[0-9]+$ ]]; then
      rows+=("| $side | $r | $rate | $loss | $peak |")
      if [ $side = minidl ]; then minidl_rates+=("$rate"); else torch_rates+=("$rate"); fi
    else
      rows+=("| $side | $r | $result | | |")
    fi
  done
done

{
  echo "char_gpt, $PRECISION, $ITERS iterations, PyTorch --compile-mode $COMPILE_MODE, $(date -u +%Y-%m-%d)"
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1
  echo
  echo "| | run | tokens/s | val loss | peak MB |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  if [ ${#minidl_rates[@]} -gt 0 ] && [ ${#torch_rates[@]} -gt 0 ]; then
    m=$(median "${minidl_rates[@]}") t=$(median "${torch_rates[@]}")
    echo
    echo "medians: minidl $m, PyTorch $t tokens/s; minidl / PyTorch $(awk -v m="$m" -v t="$t" 'BEGIN {printf "%.4f", m / t}')"
  fi
} | tee "$OUT/char_gpt-summary.md"
[ ${#minidl_rates[@]} -eq "$REPS" ] && [ ${#torch_rates[@]} -eq "$REPS" ]
