#!/usr/bin/env bash
# minidl against libtorch on this machine's CPU, under ../shared/BENCHMARK.md: installs what is
# missing, builds both benchmarks, measures the SGEMM ceiling, then runs every row REPS times,
# alternating minidl and libtorch's settings, and prints a table per row. README.md here explains
# the figures.
#
#   benchmarks/run.sh                                  # the full comparison (long: the CNN rows)
#   ROWS="mlp:512" REPS=1 benchmarks/run.sh            # one row, one repetition
#   ACCURACY=1 benchmarks/run.sh                       # also test accuracy after 1 epoch, both sides
#
# Environment:
#   ROWS             model:batch pairs (default "mlp:64 mlp:512 cnn:64 cnn:512")
#   REPS             repetitions of every row (default 3; 0 skips the throughput runs)
#   ACCURACY         N > 0: after the throughput runs, train N epochs from a fresh seeded init in
#                    each framework for each row and report test accuracy (default 0)
#   MINIDL_THREADS   minidl's threads (default 2)
#   LIBTORCH_THREADS libtorch's thread counts to try (default "1 2")
#   MINIDL_DATA      the data folder holding mnist/ (default <repo>/datasets; fetched if missing)
#   OUT              logs and tables (default <repo>/benchmarks/bench-results, git-ignored)
#   BUILD_DIR        minidl's build (default <repo>/build-bench: Release, CPU only, -march=native)
#   TORCH_BUILD_DIR  libtorch_bench's build (default <repo>/build-bench-libtorch)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
# Relative paths given by the caller are taken from the caller's folder.
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
ROWS=${ROWS:-mlp:64 mlp:512 cnn:64 cnn:512}
REPS=${REPS:-3}
ACCURACY=${ACCURACY:-0}
MINIDL_THREADS=${MINIDL_THREADS:-2}
LIBTORCH_THREADS=${LIBTORCH_THREADS:-1 2}
DATA=$(abs "${MINIDL_DATA:-$repo/datasets}")
OUT=$(abs "${OUT:-$repo/benchmarks/bench-results}")
BUILD_DIR=$(abs "${BUILD_DIR:-$repo/build-bench}")
TORCH_BUILD_DIR=$(abs "${TORCH_BUILD_DIR:-$repo/build-bench-libtorch}")
# glibc malloc told to keep freed memory (BENCHMARK.md): no mmap/munmap and no trimming per step.
MALLOC_KEPT=(MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=268435456)
# Variables the settings below vary: cleared first, so that the caller's environment changes no run.
CLEARED=(-u OMP_WAIT_POLICY -u OMP_NUM_THREADS -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_ -u MALLOC_TOP_PAD_)

fail() { echo "run.sh: error: $*" >&2; exit 1; }
say() { echo "== $*"; }

[[ "$REPS" =~ ^[0-9]+$ ]] || fail "REPS must be a whole number, got '$REPS'"
[[ "$ACCURACY" =~ ^[0-9]+$ ]] || fail "ACCURACY must be a whole number of epochs, got '$ACCURACY'"
[[ "$MINIDL_THREADS" =~ ^[1-9][0-9]*$ ]] || fail "MINIDL_THREADS must be a positive number, got '$MINIDL_THREADS'"
for t in $LIBTORCH_THREADS; do [[ "$t" =~ ^[1-9][0-9]*$ ]] || fail "LIBTORCH_THREADS holds '$t', not a positive number"; done
for row in $ROWS; do
  [[ "$row" =~ ^(mlp|cnn):[1-9][0-9]*$ ]] || fail "ROWS holds '$row'; expected model:batch with model mlp or cnn, e.g. mlp:64"
done

# ---- 1. Packages: libtorch (Debian's 1.13), OpenBLAS (OpenMP build), and minidl's build tools ----
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in libtorch-dev libopenblas0-openmp cmake ninja-build g++ libeigen3-dev libcli11-dev zlib1g-dev nlohmann-json3-dev; do
  installed "$p" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  [[ $(id -u) -eq 0 ]] || fail "missing packages: ${missing[*]}; run as root, or: sudo apt-get install -y ${missing[*]}"
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# ---- 2. Builds (incremental: only what changed is compiled again) ----
mkdir -p "$OUT"
say "building minidl's apps/bench in $BUILD_DIR (log: $OUT/build.log)"
{
  cmake -S "$repo" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIDL_CUDA=OFF -DMINIDL_NATIVE=ON \
    -DMINIDL_BUILD_TESTS=OFF -DMINIDL_BUILD_DLPACK_DEMO=OFF
  cmake --build "$BUILD_DIR" --target bench -j "$(nproc)"
} >"$OUT/build.log" 2>&1 || fail "building minidl failed; see $OUT/build.log"
say "building libtorch_bench and sgemm_peak in $TORCH_BUILD_DIR"
{
  cmake -S "$here" -B "$TORCH_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$TORCH_BUILD_DIR" -j "$(nproc)"
} >>"$OUT/build.log" 2>&1 || fail "building libtorch_bench failed; see $OUT/build.log"
MINIDL_BENCH="$BUILD_DIR/bench"
TORCH_BENCH="$TORCH_BUILD_DIR/libtorch_bench"

# ---- 3. libtorch must load OpenBLAS (OpenMP), not the reference BLAS: check what ldd resolves ----
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
openblas_dir=/usr/lib/$multiarch/openblas-openmp
resolved() { ldd "$TORCH_BENCH" | awk -v lib="$1" '$1 == lib { print $3 }' | xargs -r readlink -f; }
for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  path=$(resolved "$lib")
  [[ -z "$path" || "$path" == "$openblas_dir"/* ]] && continue
  [[ $(id -u) -eq 0 ]] || fail "libtorch loads $lib from $path, not OpenBLAS; as root: update-alternatives --set $lib-$multiarch $openblas_dir/$lib"
  say "making OpenBLAS (OpenMP) the system $lib (was $path)"
  update-alternatives --set "$lib-$multiarch" "$openblas_dir/$lib" >/dev/null
done
blas=$(resolved libblas.so.3)
[[ "$blas" == "$openblas_dir"/* ]] || fail "libtorch still loads libblas.so.3 from '$blas', not $openblas_dir"

# ---- 4. Data ----
"$repo/scripts/get_data.sh" --dir "$DATA" | sed 's/^/   /'

# ---- 5. The machine and the SGEMM ceiling ----
# shellcheck disable=SC2086  # a list of words on purpose
sgemm_threads=$(printf '%s\n' $LIBTORCH_THREADS "$MINIDL_THREADS" | sort -nu | paste -sd, -)
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs; memory $(free -g | awk '/^Mem:/ {print $2}') GiB"
  # shellcheck disable=SC1091
  echo "os: $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), $(g++ --version | head -1)"
  echo "minidl: commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown), Release, -march=native, CPU only"
  echo "libtorch: $(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null), BLAS $blas"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"
say "SGEMM ceiling (OpenBLAS cblas_sgemm, 2048^3, best of 5)"
"$TORCH_BUILD_DIR/sgemm_peak" --size 2048 --repeats 5 --threads "$sgemm_threads" | tee "$OUT/sgemm.log"
# The ceiling at T threads: the best of this measurement and the one after the runs (clock speeds
# of a shared virtual machine vary by 10-20% from minute to minute).
sgemm_peak() { awk -v t="$1" '$1 == "sgemm" && $5 == t && $6 > best { best = $6 } END { print best }' "$OUT/sgemm.log"; }

# ---- 6. Throughput: every row REPS times; each time minidl, then each libtorch setting ----
# A setting: "label|threads|malloc kept (0/1)"; every libtorch run has OMP_WAIT_POLICY=passive.
settings=()
for t in $LIBTORCH_THREADS; do settings+=("libtorch-t$t|$t|0" "libtorch-t$t-malloc|$t|1"); done
threads_word() { if [[ $1 == 1 ]]; then echo "1 thread"; else echo "$1 threads"; fi; }
describe() {
  case "$1" in
    minidl) echo "minidl, $MINIDL_THREADS threads, defaults" ;;
    *-malloc) local t=${1#libtorch-t}; echo "libtorch, $(threads_word "${t%-malloc}"), passive, malloc kept" ;;
    *) echo "libtorch, $(threads_word "${1#libtorch-t}"), passive" ;;
  esac
}

results="$OUT/results.tsv" log="$OUT/bench.log"
printf 'rep\tmodel\tbatch\trun\timg_per_s\tepoch_s\tpeak_rss_mb\n' >"$results"
: >"$log"
# run_one REP MODEL BATCH LABEL COMMAND...: runs it, logs everything, records the parsed figures.
run_one() {
  local rep=$1 model=$2 batch=$3 label=$4 output line
  shift 4
  echo "### rep $rep  $model:$batch  $label: $*" >>"$log"
  output=$("$@" 2>&1) || true
  echo "$output" >>"$log"
  line=$(grep -m1 ' img/s  epoch ' <<<"$output" || true)
  if [[ -z "$line" ]]; then
    echo "   FAILED: $label $model:$batch (see $log)" >&2
    return
  fi
  printf '   %-32s %s\n' "$label" "$line"
  sed -n 's/.*  \([0-9.]*\) img\/s  epoch \([0-9.]*\) s  peak RSS \([0-9.]*\) MB.*/\1\t\2\t\3/p' <<<"$line" |
    sed "s/^/$rep\t$model\t$batch\t$label\t/" >>"$results"
}

for rep in $(seq 1 "$REPS"); do
  for row in $ROWS; do
    model=${row%%:*} batch=${row##*:}
    say "repetition $rep/$REPS  $model batch $batch"
    run_one "$rep" "$model" "$batch" minidl env "${CLEARED[@]}" \
      "$MINIDL_BENCH" --model "$model" --batch-size "$batch" --device cpu --threads "$MINIDL_THREADS" --data "$DATA"
    for s in "${settings[@]}"; do
      IFS='|' read -r label threads kept <<<"$s"
      extra=()
      [[ $kept -eq 1 ]] && extra=("${MALLOC_KEPT[@]}")
      run_one "$rep" "$model" "$batch" "$label" env "${CLEARED[@]}" OMP_WAIT_POLICY=passive "${extra[@]}" \
        "$TORCH_BENCH" --model "$model" --batch-size "$batch" --threads "$threads" --data "$DATA"
    done
  done
done

if ((REPS > 0)); then
  say "SGEMM ceiling again, after the runs"
  "$TORCH_BUILD_DIR/sgemm_peak" --size 2048 --repeats 5 --threads "$sgemm_threads" | tee -a "$OUT/sgemm.log"
fi

# ---- 7. Tables: medians, the best libtorch setting, the ratio of medians ----
# The MLP's GEMM work per image and training step, from its layer sizes: each Linear(in, out) is
# a forward GEMM and a weight-gradient GEMM of 2*in*out FLOP per image, plus an input-gradient GEMM
# of the same size except in the first layer, whose input (the data) needs no gradient and which
# neither framework computes. Bias, ReLU, loss and SGD are O(in + out) and left out.
mlp_layers=(784 512 256 10)
mlp_flop=0
for ((i = 0; i + 1 < ${#mlp_layers[@]}; i++)); do
  gemms=3
  ((i == 0)) && gemms=2
  mlp_flop=$((mlp_flop + gemms * 2 * mlp_layers[i] * mlp_layers[i + 1]))
done

median() {  # of the numbers on stdin, rounded to a whole number; empty when there are none
  sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.0f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
column_of() {  # column_of MODEL BATCH LABEL FIELD: that field of every recorded run, one a line
  awk -F'\t' -v m="$1" -v b="$2" -v l="$3" -v f="$4" 'NR > 1 && $2 == m && $3 == b && $4 == l { print $f }' "$results"
}
summary="$OUT/summary.md"
{
  echo "# minidl against libtorch on the CPU ($(date -u '+%Y-%m-%d'))"
  echo
  sed 's/^/    /' "$OUT/machine.txt"
  sed 's/^/    /' "$OUT/sgemm.log"
  echo "    load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  plural=s
  ((REPS == 1)) && plural=""
  echo "Every run: one timed epoch of 60,000 images after 50 uncounted steps (BENCHMARK.md); $REPS repetition$plural."
  overview=()
  if ((REPS > 0)); then
    for row in $ROWS; do
      model=${row%%:*} batch=${row##*:}
      echo
      echo "## $model, batch $batch"
      echo
      echo "| run | img/s per repetition | median img/s | peak RSS MB (median) |"
      echo "|---|---|---|---|"
      best_label="" best=0
      for label in minidl $(for s in "${settings[@]}"; do echo "${s%%|*}"; done); do
        runs=$(column_of "$model" "$batch" "$label" 5 | paste -sd/ - | sed 's|/| / |g')
        med=$(column_of "$model" "$batch" "$label" 5 | median)
        rss=$(column_of "$model" "$batch" "$label" 7 | median)
        echo "| $(describe "$label") | ${runs:-failed} | ${med:--} | ${rss:--} |"
        if [[ $label != minidl && -n "$med" ]] && awk -v a="$med" -v b="$best" 'BEGIN { exit !(a > b) }'; then
          best_label=$label best=$med
        fi
      done
      minidl_med=$(column_of "$model" "$batch" minidl 5 | median)
      minidl_rss=$(column_of "$model" "$batch" minidl 7 | median)
      best_rss=$(column_of "$model" "$batch" "$best_label" 7 | median)
      echo
      ratio=-
      [[ -n "$best_label" ]] && echo "Best libtorch setting: $(describe "$best_label"), median $best img/s."
      if [[ -n "$best_label" && -n "$minidl_med" ]]; then
        ratio=$(awk -v a="$minidl_med" -v b="$best" 'BEGIN { printf "%.2f", a / b }')
        echo "minidl / best libtorch (ratio of medians): **$ratio**."
      fi
      gemm=-
      if [[ $model == mlp && $batch == 512 && -n "$minidl_med" ]]; then
        peak=$(sgemm_peak "$MINIDL_THREADS")
        gflops=$(awk -v r="$minidl_med" -v f="$mlp_flop" 'BEGIN { printf "%.1f", r * f / 1e9 }')
        gemm=$(awk -v g="$gflops" -v p="$peak" 'BEGIN { printf "%.0f%%", 100 * g / p }')
        echo
        echo "GEMM work of the MLP: $mlp_flop FLOP per image and step (forward and weight-gradient GEMMs of"
        echo "every Linear, input-gradient GEMMs of all but the first; 2*in*out each). minidl's median is"
        echo "$gflops GFLOP/s of GEMM work, $gemm of OpenBLAS's SGEMM at $MINIDL_THREADS threads ($peak GFLOP/s)."
        if [[ -n "$best_label" ]]; then
          bt=${best_label#libtorch-t}
          bt=${bt%-malloc}
          bpeak=$(sgemm_peak "$bt")
          echo "Best libtorch: $(awk -v r="$best" -v f="$mlp_flop" -v p="$bpeak" \
            'BEGIN { printf "%.1f GFLOP/s, %.0f%%", r * f / 1e9, 100 * r * f / 1e9 / p }') of SGEMM at $(threads_word "$bt") ($bpeak GFLOP/s)."
        fi
      fi
      overview+=("| $model | $batch | ${minidl_med:--} | ${best:--} ($(describe "${best_label:-none}" | sed 's/^libtorch, //')) | $ratio | ${minidl_rss:--} / ${best_rss:--} | $gemm |")
    done
    echo
    echo "## Overview"
    echo
    echo "| model | batch | minidl median img/s | best libtorch median img/s (setting) | minidl / libtorch | peak RSS MB minidl / libtorch | minidl % of SGEMM peak |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s\n' "${overview[@]}"
  fi
} >"$summary"

# ---- 8. Accuracy, when asked for: fresh seeded init, ACCURACY epochs, both frameworks ----
if ((ACCURACY > 0)); then
  acc_log="$OUT/accuracy.log"
  : >"$acc_log"
  # shellcheck disable=SC2086  # a list of words on purpose
  best_t=$(printf '%s\n' $LIBTORCH_THREADS | sort -n | tail -1)
  {
    echo
    echo "## Test accuracy after $ACCURACY epoch(s) from a fresh seeded init (seed 1)"
    echo
    echo "| model | batch | minidl % by epoch | libtorch % by epoch |"
    echo "|---|---|---|---|"
  } >>"$summary"
  for row in $ROWS; do
    model=${row%%:*} batch=${row##*:}
    say "accuracy: $model batch $batch, $ACCURACY epoch(s), each framework"
    echo "### $model:$batch minidl" >>"$acc_log"
    m=$(env "${CLEARED[@]}" "$MINIDL_BENCH" --model "$model" --batch-size "$batch" --device cpu \
      --threads "$MINIDL_THREADS" --data "$DATA" --epochs "$ACCURACY" 2>&1 | tee -a "$acc_log" |
      sed -n 's/^epoch [0-9]*  test accuracy \([0-9.]*\)%.*/\1/p' | paste -sd/ - | sed 's|/| / |g' || true)
    echo "### $model:$batch libtorch" >>"$acc_log"
    l=$(env "${CLEARED[@]}" OMP_WAIT_POLICY=passive "${MALLOC_KEPT[@]}" "$TORCH_BENCH" --model "$model" \
      --batch-size "$batch" --threads "$best_t" --data "$DATA" --epochs "$ACCURACY" 2>&1 | tee -a "$acc_log" |
      sed -n 's/^epoch [0-9]*  test accuracy \([0-9.]*\)%.*/\1/p' | paste -sd/ - | sed 's|/| / |g' || true)
    echo "   minidl ${m:-failed}  libtorch ${l:-failed}"
    echo "| $model | $batch | ${m:-failed} | ${l:-failed} |" >>"$summary"
  done
fi

echo
cat "$summary"
echo
say "logs: $log, $results, $summary"
