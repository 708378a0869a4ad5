#!/usr/bin/env bash
# The side-by-side throughput comparison of docs/benchmarks.md on a GPU machine: for each row
# (model, batch size), apps/bench (graphed, then with --no-cuda-graph) and scripts/bench_pytorch.py
# --mode best (PyTorch eager, whole-step CUDA graph, torch.compile then graph, and the fastest of
# the three) run one right after the other, REPS times, alternating, in each precision of
# PRECISIONS (both sides get the same --precision: fp32 is strict float32, tf32 turns TF32 on, bf16
# and fp16 add autocast in that dtype, fp16 a gradient scaler too; ../shared/BENCHMARK.md).
# Ends with a table of the figures of every repetition and the ratios of their medians, one line
# per precision and row, also written to $OUT/summary.md; $OUT/results-<precision>.txt hold each
# precision's figures and $OUT/bench.log the full output of every run (appended to).
#
#   BUILD_DIR=build-gpu MINIDL_DATA=datasets scripts/gpu_bench.sh [extra apps/bench flags]
#   PRECISIONS="fp32 tf32 bf16" scripts/gpu_bench.sh
#
# Environment: BUILD_DIR (default build-gpu), MINIDL_DATA (the folder holding mnist/), REPS (3),
# ROWS ("mlp:64 mlp:512 cnn:64 cnn:512"), PRECISIONS ("fp32"; any of fp32 tf32 bf16 fp16),
# OUT (logs; default gpu-results), PYTHON (python3),
# PYTORCH_FLAGS (extra bench_pytorch.py flags, e.g. "--compile-mode max-autotune-no-cudagraphs").
set -u -o pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
DATA=${MINIDL_DATA:-datasets}
REPS=${REPS:-3}
ROWS=${ROWS:-mlp:64 mlp:512 cnn:64 cnn:512}
OUT=${OUT:-gpu-results}
PYTHON=${PYTHON:-python3}
PYTORCH_FLAGS=${PYTORCH_FLAGS:-}
PRECISIONS=${PRECISIONS:-fp32}
for precision in $PRECISIONS; do
  case $precision in
    fp32 | tf32 | bf16 | fp16) ;;
    *) echo "PRECISIONS: expected fp32, tf32, bf16 or fp16, got '$precision'" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
log="$OUT/bench.log"
last="$OUT/last-run.txt"
# One figure a line: precision model batch column img/s [winner]; one file per precision.
for precision in $PRECISIONS; do : >"$OUT/results-$precision.txt"; done

# A result line that names another precision than asked (an older binary or script without the
# flag would print none) is not counted: the table compares like with like only.
names_precision() { grep -q "  precision $1  " <<<"$2"; }

for rep in $(seq 1 "$REPS"); do
  for precision in $PRECISIONS; do
    results="$OUT/results-$precision.txt"
    for row in $ROWS; do
      model=${row%%:*} batch=${row##*:}
      for graph in --cuda-graph --no-cuda-graph; do
        "$BUILD_DIR/bench" --model "$model" --batch-size "$batch" --device cuda --data "$DATA" $graph \
          --precision "$precision" "$@" 2>&1 | tee "$last"
        cat "$last" >>"$log"
        line=$(grep -m1 ' img/s  epoch ' "$last")
        ips=$(sed -nE 's/.* ([0-9.]+) img\/s .*/\1/p' <<<"$line")
        names_precision "$precision" "$line" || ips=
        column=minidl_graphed
        [[ $graph == --no-cuda-graph ]] && column=minidl_eager
        echo "$precision $model $batch $column ${ips:-failed}" >>"$results"
      done
      # shellcheck disable=SC2086  # PYTORCH_FLAGS is a list of flags
      "$PYTHON" scripts/bench_pytorch.py --model "$model" --batch-size "$batch" --data "$DATA/mnist" --mode best \
        --precision "$precision" $PYTORCH_FLAGS 2>&1 | tee "$last"
      cat "$last" >>"$log"
      for mode in eager graph compile best; do
        line=$(grep -m1 "^pytorch $mode  " "$last")
        ips=$(sed -nE 's/.* ([0-9.]+) img\/s .*/\1/p' <<<"$line")
        names_precision "$precision" "$line" || ips=
        winner=$(sed -nE 's/.*  winner ([a-z_]+).*/\1/p' <<<"$line")
        echo "$precision $model $batch pytorch_$mode ${ips:-failed} $winner" >>"$results"
      done
    done
  done
done

# The table: each column's figures in repetition order, then the ratios of the medians, a line per
# precision and row. "PyTorch best" is the fastest of PyTorch's runs in each repetition, with the
# mode that won it, in the same precision (for the CNN, compile_channels_last where its channels-last
# compiled run won).
results_files=()
for precision in $PRECISIONS; do results_files+=("$OUT/results-$precision.txt"); done
awk -v rows="$ROWS" -v precisions="$PRECISIONS" '
  function commas(x,   s) { s = sprintf("%.0f", x); while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s); return s }
  function median(key,   n, i, j, v, t) {
    n = 0
    for (i = 1; i <= count[key]; i++) if (vals[key, i] != "failed") v[++n] = vals[key, i] + 0
    if (n == 0) return -1
    for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  function cell(key,   i, s) {
    s = ""
    for (i = 1; i <= count[key]; i++) s = s (i > 1 ? " / " : "") (vals[key, i] == "failed" ? "failed" : commas(vals[key, i]))
    return s == "" ? "-" : s
  }
  function ratio(a, b,   x, y) { x = median(a); y = median(b); return (x < 0 || y <= 0) ? "-" : sprintf("%.2f", x / y) }
  {
    key = $1 ":" $2 ":" $3 SUBSEP $4
    vals[key, ++count[key]] = $5
    if ($4 == "pytorch_best" && NF >= 6) won[$1 ":" $2 ":" $3, $6]++
  }
  END {
    print "| precision | model | batch | minidl graphed | minidl eager | PyTorch eager | PyTorch graph | PyTorch compiled + graph | PyTorch best (won by) | graphed / best | eager / PyTorch eager |"
    print "|---|---|---|---|---|---|---|---|---|---|---|"
    np = split(precisions, ps, " ")
    n = split(rows, r, " ")
    for (p = 1; p <= np; p++) {
      for (i = 1; i <= n; i++) {
        split(r[i], mb, ":")
        k = ps[p] ":" r[i]
        winners = ""
        for (m in won) { split(m, part, SUBSEP); if (part[1] == k) winners = winners (winners == "" ? "" : ", ") part[2] " " won[m] "x" }
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s |\n", ps[p], toupper(mb[1]), mb[2],
          cell(k SUBSEP "minidl_graphed"), cell(k SUBSEP "minidl_eager"), cell(k SUBSEP "pytorch_eager"),
          cell(k SUBSEP "pytorch_graph"), cell(k SUBSEP "pytorch_compile"), cell(k SUBSEP "pytorch_best"),
          winners == "" ? "-" : winners,
          ratio(k SUBSEP "minidl_graphed", k SUBSEP "pytorch_best"), ratio(k SUBSEP "minidl_eager", k SUBSEP "pytorch_eager")
      }
    }
  }' "${results_files[@]}" | tee "$OUT/summary.md"
