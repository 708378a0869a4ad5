#!/usr/bin/env bash
# Ports pytorch/examples' C++ programs (cpp/mnist, cpp/regression, cpp/autograd, cpp/dcgan) to minidl
# by the mechanical changes docs/porting.md lists, builds each against an installed minidl, and runs
# them. Their sources are not part of minidl (their license is theirs): pass a checkout.
#   scripts/port_examples.sh EXAMPLES_DIR [WORK_DIR]
#     MINIDL_PREFIX   an installed minidl (default: install BUILD_DIR, else build/, into WORK_DIR/prefix)
#     MINIDL_DATA     the folder holding mnist/ (default: datasets/)
#     RUN             which programs to run after building (default: "regression autograd mnist dcgan")
#     MNIST_EPOCHS    epochs of cpp/mnist (default 10, its own), DCGAN_EPOCHS (default 1)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
examples="$(cd "${1:?usage: scripts/port_examples.sh EXAMPLES_DIR [WORK_DIR]}" && pwd)"
work="${2:-$(mktemp -d)}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
data="$(cd "${MINIDL_DATA:-$repo/datasets}" && pwd)"
[[ -d "$data/mnist" ]] && data="$data/mnist"

prefix="${MINIDL_PREFIX:-}"
if [[ -z "$prefix" ]]; then
  prefix="$work/prefix"
  cmake --install "${BUILD_DIR:-$repo/build}" --prefix "$prefix" >/dev/null
fi

# The mechanical changes: the include, the namespace, two macro names, and the data folder.
port() {  # port NAME
  local name=$1 src="$examples/cpp/$1/$1.cpp" dst="$work/$1"
  [[ -f "$src" ]] || { echo "port_examples: $src not found" >&2; exit 1; }
  mkdir -p "$dst"
  sed -e 's|#include <torch/torch.h>|#include <minidl.h>|' \
      -e 's/\btorch::/minidl::/g' \
      -e 's/using namespace torch;/using namespace minidl;/' \
      -e 's/\bTORCH_MODULE(/MINIDL_MODULE(/' \
      -e 's/\bAT_ASSERT(/MINIDL_ASSERT(/' \
      -e "s|\"\\./data\"|\"$data\"|" \
      "$src" >"$dst/$1.cpp"
  cat >"$dst/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.24)
project($1 LANGUAGES CXX)
find_package(minidl CONFIG REQUIRED)
add_executable($1 $1.cpp)
target_link_libraries($1 PRIVATE minidl::minidl)
target_include_directories($1 PRIVATE "$repo/tests/support")  # argparse, for dcgan
CMAKE
  cmake -S "$dst" -B "$dst/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$dst/build" >"$dst/build.log" 2>&1 || { cat "$dst/build.log" >&2; exit 1; }
  echo "port_examples: $1 builds"
}

for name in mnist regression autograd dcgan; do port "$name"; done
# Epoch counts are constants in mnist.cpp; shorter runs are a rebuild with another constant.
if [[ -n "${MNIST_EPOCHS:-}" ]]; then
  sed -i "s/kNumberOfEpochs = 10;/kNumberOfEpochs = $MNIST_EPOCHS;/" "$work/mnist/mnist.cpp"
  cmake --build "$work/mnist/build" >/dev/null
fi

for name in ${RUN-regression autograd mnist dcgan}; do
  echo "== $name"
  start=$SECONDS
  case "$name" in
    dcgan) (cd "$work/dcgan" && build/dcgan --epochs "${DCGAN_EPOCHS:-1}" | tee "$work/dcgan.log") ;;
    *) (cd "$work/$name" && "build/$name" | tee "$work/$name.log") ;;
  esac
  echo "port_examples: $name ran in $((SECONDS - start)) s" | tee -a "$work/$name.log"
done
