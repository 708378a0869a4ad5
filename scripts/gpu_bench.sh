#!/usr/bin/env bash
# The side-by-side throughput comparison of docs/benchmarks.md on a GPU machine: for each row
# (model, batch size), apps/bench (graphed, then with --no-cuda-graph) and scripts/bench_pytorch.py
# (eager, whole-step graph, and PyTorch at its best) run one right after the other, REPS times,
# alternating. Strict float32 on both sides.
#
#   BUILD_DIR=build-gpu MINIDL_DATA=datasets scripts/gpu_bench.sh [extra apps/bench flags]
#
# Environment: BUILD_DIR (default build-gpu), MINIDL_DATA (the folder holding mnist/), REPS (3),
# ROWS ("mlp:64 mlp:512 cnn:64 cnn:512"), OUT (logs; default gpu-results).
set -u -o pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
DATA=${MINIDL_DATA:-datasets}
REPS=${REPS:-3}
ROWS=${ROWS:-mlp:64 mlp:512 cnn:64 cnn:512}
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
log="$OUT/bench.log"
for rep in $(seq 1 "$REPS"); do
  for row in $ROWS; do
    model=${row%%:*} batch=${row##*:}
    for graph in --cuda-graph --no-cuda-graph; do
      "$BUILD_DIR/bench" --model "$model" --batch-size "$batch" --device cuda --data "$DATA" $graph "$@" 2>&1 |
        tee -a "$log"
    done
    python3 scripts/bench_pytorch.py --model "$model" --batch-size "$batch" --data "$DATA/mnist" --mode all 2>&1 |
      tee -a "$log"
  done
done
