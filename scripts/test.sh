#!/usr/bin/env bash
# Sets up (packages, data, build) and runs the whole test suite. GPU tests skip, saying why, on a
# machine without a usable GPU. Each phase prints how long it took, so a slow CI run says where.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
phase() { echo "test.sh: $1 took $((SECONDS - phase_start)) s (total ${SECONDS} s)"; phase_start=$SECONDS; }
phase_start=$SECONDS
"$repo/scripts/setup.sh"
phase "setup and build"
cd "${BUILD_DIR:-$repo/build}"
# ctest runs as many test processes as there are cores, each with OpenMP threads of its own; idle
# threads that spin at a barrier then take the core another test needs (on 2 cores the suite took
# 150 s spinning, 53 s sleeping). Results do not depend on it.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
ctest --output-on-failure -j "$(nproc)" "$@"
phase "ctest"
# The build also installs as a CMake package: examples/ is built and run against it.
"$repo/scripts/check_install.sh" "$PWD"
phase "the installed package"
# The same suite under ASan, LSan and UBSan in build-san/ (about 10 minutes on 2 cores);
# MINIDL_SANITIZE_TESTS=0 skips it.
if [[ "${MINIDL_SANITIZE_TESTS:-1}" != 0 ]]; then
  "$repo/scripts/sanitize.sh" "$@"
  phase "the sanitizers"
fi
