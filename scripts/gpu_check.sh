#!/usr/bin/env bash
# One command for a GPU machine: configure and build minidl with CUDA (Release), run the whole
# ctest suite, run compute-sanitizer memcheck, initcheck and synccheck over the CUDA tests and racecheck over the kernel and
# graph tests, then (when they were built and the MNIST data is present) train apps/mnist_mlp and
# apps/mnist_cnn on cuda.
#
#   scripts/gpu_check.sh [flags passed to both apps, e.g. --epochs 1]
#
# Logs and a summary go to ${OUT:-gpu-results}/. Exit status: 0 when every step that ran passed.
# Environment (all optional):
#   OUT                 where logs go (default gpu-results)
#   BUILD_DIR           build directory (default build-gpu)
#   CUDA_ARCH           CMAKE_CUDA_ARCHITECTURES (default: native where `nvidia-smi -L` lists a GPU, else 90)
#   CUDNN_ROOT          cuDNN prefix (default: the cuDNN of the local PyTorch install, if any)
#   MINIDL_DEPS_PREFIX  a prefix with Eigen3, GTest, CLI11 and zlib for machines without them
#                       (default: .gpu/deps when it exists)
#   MINIDL_DATA         data root for the apps, holding mnist/ (default: datasets/)
#   JOBS                build and ctest parallelism (default: nproc)
#   STEPS               which steps to run (default "build test sanitize apps")
#   SANITIZER_FILTER    gtest filter for memcheck (default: the CUDA tests but the four that fail
#                       CUDA calls on purpose, which the sanitizer would report as API errors: an
#                       allocation too large, a bad runtime call, and two syncs inside a graph capture)
#   RACECHECK_FILTER    gtest filter for racecheck (default: the kernel and graph tests)
set -u -o pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
STEPS=${STEPS:-build test sanitize apps}
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
status=0

say() { echo "== $*" | tee -a "$SUMMARY"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }
# Runs "$@" with its output in $OUT/<name>.log; records pass/fail and the time taken.
step() {
  local name=$1
  shift
  local t0=$SECONDS rc
  echo "== $name: $*" >"$OUT/$name.log"
  "$@" >>"$OUT/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then say "$name: ok ($((SECONDS - t0)) s)"; else say "$name: FAILED, exit $rc ($((SECONDS - t0)) s; see $name.log)"; status=1; fi
  return $rc
}

# ---- the machine ----
{
  echo "date: $(date -u)"
  nvidia-smi -L 2>&1 || echo "nvidia-smi: not usable"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
  nvcc --version 2>&1 | tail -1 || echo "nvcc: not found"
  cmake --version 2>&1 | head -1
  echo "cores: $(nproc)"
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt" | tee -a "$SUMMARY"

if [ -z "${CUDA_ARCH:-}" ]; then
  if nvidia-smi -L 2>/dev/null | grep -q "GPU [0-9]"; then CUDA_ARCH=native; else CUDA_ARCH=90; fi
fi
if [ -z "${CUDNN_ROOT:-}" ]; then
  for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn; do
    [ -f "$d/include/cudnn.h" ] && CUDNN_ROOT=$d && break
  done
fi
if [ -z "${CUDNN_ROOT:-}" ] && command -v python3 >/dev/null; then
  d=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  [ -n "$d" ] && [ -f "$d/include/cudnn.h" ] && CUDNN_ROOT=$d
fi
CUDNN_ROOT=${CUDNN_ROOT:-}
if [ -n "$CUDNN_ROOT" ]; then export LD_LIBRARY_PATH="$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
DEPS=${MINIDL_DEPS_PREFIX:-}
if [ -z "$DEPS" ] && [ -d .gpu/deps ]; then DEPS=$ROOT/.gpu/deps; fi
say "CUDA architectures: $CUDA_ARCH; cuDNN: ${CUDNN_ROOT:-not found}; dependency prefix: ${DEPS:-system}"

# ---- build ----
if want build; then
  cmake_args=(-S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIDL_CUDA=ON
              -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DMINIDL_BUILD_APPS=ON)
  [ -n "$CUDNN_ROOT" ] && cmake_args+=(-DCUDNN_ROOT="$CUDNN_ROOT")
  [ -n "$DEPS" ] && cmake_args+=(-DCMAKE_PREFIX_PATH="$DEPS" -DZLIB_ROOT="$DEPS")
  # Apps need CLI11; without it, build the rest.
  if ! step configure cmake "${cmake_args[@]}"; then
    cmake_args=("${cmake_args[@]/-DMINIDL_BUILD_APPS=ON/-DMINIDL_BUILD_APPS=OFF}")
    step configure_without_apps cmake "${cmake_args[@]}" && status=0
  fi
  # -k 0 (Ninja's keep going): one call lists every file that fails, not only the first.
  step build cmake --build "$BUILD_DIR" -j "$JOBS" -- -k 0 || { say "build failed: stopping"; exit 1; }
fi

TESTS="$BUILD_DIR/minidl_tests"

# ---- the whole suite ----
if want test && [ -x "$TESTS" ]; then
  step ctest ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 600
  grep -E "tests passed|tests failed" "$OUT/ctest.log" | tee -a "$SUMMARY"
  # The CUDA tests once more in one process, with gtest's own report (skips say why).
  step cuda_tests "$TESTS" --gtest_filter='Cuda*' --gtest_output="xml:$OUT/cuda_tests.xml"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/cuda_tests.log" | tee -a "$SUMMARY"
  # And with conv2d / max_pool2d on cuDNN throughout (the CNN step is then checked against the CPU).
  step cuda_tests_cudnn env MINIDL_CONV_BACKEND=cudnn "$TESTS" --gtest_filter='Cuda*'
  grep -E "^\[  (PASSED|FAILED) " "$OUT/cuda_tests_cudnn.log" | tee -a "$SUMMARY"
fi

# ---- compute-sanitizer memcheck over the CUDA tests, the cache off so every block is its own ----
SANITIZER_DEFAULT='Cuda*:-CudaAllocator.OutOfMemoryIsAClearError:CudaErrors.FailingRuntimeCallCarriesItsText:CudaGraph.SynchronizingInsideTheCaptureIsAClearError:CudaGraphedStep.UncapturableStepRunsEagerlyAndSaysWhy'
if want sanitize && [ -x "$TESTS" ]; then
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -n "$SAN" ]; then
    # Blocks held until exit (streams, library handles, the allocators themselves) are deliberate,
    # so no leak check; the tests that make CUDA calls fail on purpose are left out.
    # MINIDL_GEMM_TUNE=0: timing every cuBLASLt configuration of every GEMM shape under the
    # sanitizer would take far longer than the tests themselves.
    step memcheck env MINIDL_CUDA_NO_CACHE=1 MINIDL_GEMM_TUNE=0 "$SAN" --tool memcheck --error-exitcode 3 --print-limit 50 \
      "$TESTS" --gtest_filter="${SANITIZER_FILTER:-$SANITIZER_DEFAULT}"
    grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tee -a "$SUMMARY"
    # racecheck: shared-memory hazards in our kernels (reductions, softmax) and in graph replays.
    # Not the float64 gradchecks: they launch the same kernels thousands of times, which takes
    # racecheck many minutes per test (CudaConv2dRelu.Gradcheck alone ran past 5).
    step racecheck env MINIDL_GEMM_TUNE=0 "$SAN" --tool racecheck --error-exitcode 3 --print-limit 50 \
      "$TESTS" --gtest_filter="${RACECHECK_FILTER:-CudaKernels.*:CudaGraph*:CudaLinear.*:CudaNormalization.*:CudaPooling.*:CudaActivations.*:CudaCompare.*:CudaWhere.*:CudaLosses.*:CudaIndexSelect.*:CudaConv2dRelu.*:CudaDeterministic.*:-*Gradcheck*}"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/racecheck.log" | tee -a "$SUMMARY"
    # initcheck: reads of device memory nothing wrote (fresh blocks: the cache off); synccheck:
    # __syncthreads and warp syncs reached by only part of a block. initcheck leaves out the float64
    # gradchecks, as racecheck does: it ran past 7 minutes with them.
    step initcheck env MINIDL_CUDA_NO_CACHE=1 MINIDL_GEMM_TUNE=0 "$SAN" --tool initcheck --error-exitcode 3 \
      --print-limit 50 "$TESTS" --gtest_filter="${SANITIZER_FILTER:-$SANITIZER_DEFAULT:*Gradcheck*}"
    grep -E "ERROR SUMMARY" "$OUT/initcheck.log" | tee -a "$SUMMARY"
    step synccheck env MINIDL_GEMM_TUNE=0 "$SAN" --tool synccheck --error-exitcode 3 --print-limit 50 \
      "$TESTS" --gtest_filter="${SANITIZER_FILTER:-$SANITIZER_DEFAULT}"
    grep -E "ERROR SUMMARY" "$OUT/synccheck.log" | tee -a "$SUMMARY"
  else
    say "memcheck: skipped (compute-sanitizer not found)"
  fi
fi

# ---- the MNIST apps on cuda ----
if want apps; then
  # The data root holds mnist/ (or the IDX files themselves), as scripts/get_data.sh leaves it.
  data=${MINIDL_DATA:-$ROOT/datasets}
  if ! ls "$data"/mnist/*train-images* >/dev/null 2>&1 && ! ls "$data"/*train-images* >/dev/null 2>&1; then
    data=""
  fi
  for app in mnist_mlp mnist_cnn; do
    if [ ! -x "$BUILD_DIR/$app" ]; then
      say "$app: skipped (not built)"
    elif [ -z "$data" ]; then
      say "$app: skipped (no MNIST data under ${MINIDL_DATA:-datasets/}; scripts/get_data.sh fetches it)"
    else
      step "$app" "$BUILD_DIR/$app" --device cuda --data "$data" "$@"
      tail -n 5 "$OUT/$app.log" | tee -a "$SUMMARY"
    fi
  done
fi

say "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
