#!/usr/bin/env bash
# The test suite under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, CPU
# only, built with the system compiler in build-san/ (SAN_BUILD_DIR overrides). scripts/test.sh runs
# it after the normal build and tests (MINIDL_SANITIZE_TESTS=0 skips it there). Any report fails the
# test that caused it. Extra arguments go to ctest.
#
#   scripts/sanitize.sh
#   scripts/sanitize.sh -R Safetensors
# Needs the packages and data of scripts/setup.sh (GCC ships the sanitizer runtimes).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SAN_BUILD_DIR:-$repo/build-san}"

# -O1: at -O0 the Eigen kernels crawl under ASan, and -O2 costs half again the compile time.
# -g1: line numbers in reports, for a few percent of compile time. No NDEBUG: Eigen's own bounds
# asserts stay on. No CUDA: ASan cannot run beside the driver, and device code is not instrumented.
# No DLPack bridge: it is a shared library that Python loads, which ASan's runtime does not allow.
# float-cast-overflow (not part of GCC's "undefined"): a NaN or out-of-range float converted to an
# integer, an index or a count, say. Float division by zero stays allowed: IEEE's inf, as in PyTorch.
# The tests compile in batches of files (MINIDL_UNITY_TESTS), faster from scratch, and so does the
# library here (CMake's CMAKE_UNITY_BUILD); scripts/test.sh's normal build compiles the library
# file by file, as a user's build does.
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DMINIDL_CUDA=OFF -DMINIDL_SANITIZE=address,undefined,float-cast-overflow -DMINIDL_BUILD_DLPACK_DEMO=OFF \
  -DMINIDL_UNITY_TESTS=ON -DCMAKE_UNITY_BUILD=ON >/dev/null
# The tests of the library; the apps' own tests (flags, signals, doctor, charts), the CUDA tests and
# the two training runs run in the normal build only (CMakeLists.txt leaves them out here), so no
# app is built.
cmake --build "$build" -j "$(nproc)" --target minidl_tests

# Options listed first, so that the caller's ASAN_OPTIONS / UBSAN_OPTIONS override them.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:print_stacktrace=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Parallel test processes: OpenMP threads wait asleep rather than spin (scripts/test.sh says why).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# Not built here (CMakeLists.txt): tests/test_fashion_resnet.cpp and tests/test_mnist_training.cpp,
# which check that a model learns over minutes of the kernels the unit tests run in seconds (190 s
# and 26 s under the sanitizers, 24 s and 13 s without); the normal run checks them.
# Run apart: the tests that measure resident memory, which ASan's quarantine of freed blocks (256 MB)
# grows on purpose. They run with no quarantine; every other check stays on.
rss='MemoryFlat\.|AutogradGraphs\.DroppedForwardsKeepTapeAndMemoryFlat'
cd "$build"
ctest --output-on-failure -j "$(nproc)" -E "^($rss)" "$@"
if [[ $# -eq 0 ]]; then
  ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=0:thread_local_quarantine_size_kb=0" \
    ctest --output-on-failure -j "$(nproc)" -R "^($rss)"
fi
