#!/usr/bin/env bash
# Everything a fresh Debian 12 machine needs before minidl builds: the packages (installed with
# apt-get when missing), MNIST (scripts/get_data.sh), and a Release build in build/.
#
#   scripts/setup.sh            # packages + data + build
#   BUILD_DIR=out scripts/setup.sh
# Extra CMake arguments can be passed in CMAKE_ARGS, e.g. CMAKE_ARGS=-DMINIDL_CUDA=OFF.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$repo/build}"

# Tools count as present when they are on the PATH, whoever installed them (node and npm often
# come from elsewhere, and Debian's npm package would conflict with them); libraries when dpkg has them.
missing=()
declare -A tools=([g++]=g++ [cmake]=cmake [ninja]=ninja-build [npm]=npm)
for tool in "${!tools[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${tools[$tool]}")
done
# python3-numpy: ctest's DLPackInterop.NumPy exchanges tensors with numpy.from_dlpack (skipped without it).
# libdnnl-dev: oneDNN 2.x for the CPU convolutions (optional: cmake/onednn.cmake builds without it).
for p in libeigen3-dev libgtest-dev libcli11-dev zlib1g-dev nlohmann-json3-dev python3-numpy libdnnl-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi

"$repo/scripts/get_data.sh" --fashion

# shellcheck disable=SC2086  # CMAKE_ARGS is a list of words on purpose
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"
