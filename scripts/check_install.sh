#!/usr/bin/env bash
# Installs minidl from a build into a temporary prefix, then configures, builds and runs examples/
# against it, as a user's own project would (find_package(minidl CONFIG REQUIRED)). Before that it
# checks that the installed headers compile by themselves (none includes a header left uninstalled)
# and that the package does not ask its users for minidl's header-only build dependencies.
#   scripts/check_install.sh [BUILD_DIR]      default: $BUILD_DIR, else build/
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-${BUILD_DIR:-$repo/build}}" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
include="$prefix/include/minidl"
targets="$(find "$prefix" -name minidlTargets.cmake)"

(cd "$include" && find . -name '*.h' | sort | sed 's|^\./\(.*\)$|#include "\1"|') >"$work/all_headers.cpp"
# The definitions the package gives its users (MINIDL_WITH_CUDA, ...) switch parts of the headers on.
mapfile -t defines < <(grep -o 'MINIDL_WITH_[A-Z]*' "$targets" | sort -u | sed 's/^/-D/')
"${CXX:-c++}" -std=c++20 -fsyntax-only "${defines[@]}" -I"$include" "$work/all_headers.cpp"

if grep -nE 'Eigen|nlohmann' "$targets"; then
  echo "check_install: $targets names a header-only build dependency of minidl (above)" >&2
  exit 1
fi

cmake -S "$repo/examples" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" -j "$(nproc)"
"$work/build/custom_op_and_module"
echo "check_install: examples/ builds and runs against the installed package"
