#!/usr/bin/env bash
# For a machine with a GPU: what doctor and --metrics do there, which a machine without one cannot
# show. Builds with scripts/gpu_check.sh when the build is missing, then
#   1. build/doctor --require-gpu: every GPU listed, its kernels native, and the kernel, cuBLAS GEMM
#      and cuDNN convolution giving the right numbers (exit 0; 1 for a wrong result, 2 for no GPU);
#   2. doctor built for an architecture this GPU cannot run (sm_80 binary only on Hopper, in a build of
#      its own) must name the missing kernel image and the flag that fixes it;
#   3. mnist_cnn with --metrics, graphed and eager: both write complete files, and the mean training
#      loss of each epoch (summed on the device) agrees between the two within 5% (a wrong sum is off by far more).
#
#   scripts/gpu_doctor.sh            logs in ${OUT:-gpu-results}/doctor*, exit 0 when all passed
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-gpu-results}
BUILD_DIR=${BUILD_DIR:-build-gpu}
mkdir -p "$OUT"
status=0
fail() { echo "FAIL: $*"; status=1; }

[[ -x "$BUILD_DIR/doctor" ]] || STEPS=build BUILD_DIR="$BUILD_DIR" scripts/gpu_check.sh || exit 1

# doctor links the CUDA libraries, so when one is missing the loader stops it before it can say so.
missing=$(ldd "$BUILD_DIR/doctor" | awk '/not found/ {print $1}' | tr '\n' ' ')
if [[ -n $missing ]]; then
  echo "doctor cannot start: ${missing}not found -- fix: add the folder holding them to LD_LIBRARY_PATH, or install" \
       "them (NVIDIA's CUDA apt repository: cuda-cudart-X-Y, libcublas-X-Y, libcurand-X-Y, libcudnn9-cuda-X; pip:" \
       "nvidia-cuda-runtime, nvidia-cublas, nvidia-curand, nvidia-cudnn-cuX, with a -cuX suffix before CUDA 13)"
  exit 1
fi

echo "== 1. doctor --require-gpu"
"$BUILD_DIR/doctor" --require-gpu | tee "$OUT/doctor.txt"
rc=${PIPESTATUS[0]}
[[ $rc -eq 0 ]] || fail "doctor --require-gpu exited $rc"
grep -q "^CUDA: usable" "$OUT/doctor.txt" || fail "doctor does not call CUDA usable"

echo "== 2. a build without this GPU's architecture"
# A binary of another major version than the GPU's: sm_80 for Hopper and later, sm_90 for Ampere.
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
other=$([[ $cc == 8.* ]] && echo 90-real || echo 80-real)
other_build="$BUILD_DIR-$other"
args=(-S . -B "$other_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIDL_CUDA=ON -DMINIDL_BUILD_TESTS=OFF
      -DCMAKE_CUDA_ARCHITECTURES="$other")
for var in CUDNN_ROOT CMAKE_PREFIX_PATH ZLIB_ROOT; do  # the dependencies the main build found
  value=$(grep -oP "^$var:[A-Z]+=\K.*" "$BUILD_DIR/CMakeCache.txt" || true)
  [[ -n $value ]] && args+=("-D$var=$value")
done
if cmake "${args[@]}" >"$OUT/doctor_$other.log" 2>&1 && cmake --build "$other_build" --target doctor >>"$OUT/doctor_$other.log" 2>&1; then
  "$other_build/doctor" | tee "$OUT/doctor_$other.txt"
  grep -q "cannot run minidl's kernels" "$OUT/doctor_$other.txt" || fail "the $other build does not name the missing kernel image"
  grep -q -- "-DCMAKE_CUDA_ARCHITECTURES=${cc/./}" "$OUT/doctor_$other.txt" || fail "the $other build does not give the flag for $cc"
else
  fail "building doctor for $other failed (see $OUT/doctor_$other.log)"
fi

echo "== 3. --metrics on cuda, graphed and eager"
data_ok=1
[[ -f "${MINIDL_DATA:-datasets}/mnist/train-images-idx3-ubyte.gz" || -f "${MINIDL_DATA:-datasets}/mnist/train-images-idx3-ubyte" ]] || data_ok=0
if [[ $data_ok -eq 1 && -x "$BUILD_DIR/mnist_cnn" ]]; then
  for mode in graph no-graph; do
    flag=$([[ $mode == graph ]] && echo --cuda-graph || echo --no-cuda-graph)
    rm -rf "$OUT/metrics_$mode"
    "$BUILD_DIR/mnist_cnn" --device cuda --epochs 2 --limit 6400 "$flag" --metrics "$OUT/metrics_$mode" \
      >"$OUT/metrics_$mode.log" 2>&1 || fail "mnist_cnn $flag --metrics exited non-zero (see $OUT/metrics_$mode.log)"
    for f in epochs.csv steps.csv curves.svg; do [[ -s "$OUT/metrics_$mode/$f" ]] || fail "$mode: $f missing"; done
    [[ $(tail -n +2 "$OUT/metrics_$mode/epochs.csv" | grep -c '^[0-9]') -eq 2 ]] || fail "$mode: epochs.csv lacks 2 rows"
  done
  paste -d, <(tail -n +2 "$OUT/metrics_graph/epochs.csv") <(tail -n +2 "$OUT/metrics_no-graph/epochs.csv") |
    awk -F, '{ d = $2 - $8; if (d < 0) d = -d; printf "epoch %s train loss graphed %s eager %s\n", $1, $2, $8;
               if (!($2 > 0) || d > 0.05 * $8) bad = 1 } END { exit bad }' ||
    fail "graphed and eager mean training losses differ by more than 5%"
else
  echo "(MNIST or mnist_cnn missing; skipped: run scripts/get_data.sh)"
fi

[[ $status -eq 0 ]] && echo "gpu_doctor: all passed" || echo "gpu_doctor: FAILED"
exit $status
