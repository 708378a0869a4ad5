#!/usr/bin/env bash
# Sets up (packages, data, build) and runs the whole test suite. GPU tests skip, saying why, on a
# machine without a usable GPU.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
cd "${BUILD_DIR:-$repo/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
# The build also installs as a CMake package: examples/ is built and run against it.
"$repo/scripts/check_install.sh" "$PWD"
# The same suite under ASan, LSan and UBSan in build-san/ (about 6 minutes on 2 cores);
# MINIDL_SANITIZE_TESTS=0 skips it.
if [[ "${MINIDL_SANITIZE_TESTS:-1}" != 0 ]]; then
  "$repo/scripts/sanitize.sh" "$@"
fi
