#!/usr/bin/env bash
# On a GPU machine, after a build (scripts/gpu_check.sh STEPS=build): ports pytorch/examples' C++
# programs with scripts/port_examples.sh and runs them (on cuda, where they pick it), then builds the
# unported programs against the local PyTorch's libtorch and runs them, so that libtorch's output
# and wall time stand beside minidl's (dcgan against tests/support's argparse stand-in on both sides).
#   scripts/gpu_examples.sh EXAMPLES_DIR      (env: BUILD_DIR=build-gpu, OUT=gpu-results, MINIDL_DATA,
#                                              MNIST_EPOCHS, DCGAN_EPOCHS as port_examples.sh takes them)
set -uo pipefail
cd "$(dirname "$0")/.."
examples="$(cd "${1:?usage: scripts/gpu_examples.sh EXAMPLES_DIR}" && pwd)"
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
work=$(mktemp -d)

t0=$SECONDS
BUILD_DIR=${BUILD_DIR:-build-gpu} scripts/port_examples.sh "$examples" "$work/port" >"$OUT/examples.log" 2>&1
echo "port_examples: exit $? ($((SECONDS - t0)) s)" | tee -a "$OUT/examples.log"
for name in regression autograd mnist dcgan; do cp "$work/port/$name.log" "$OUT/minidl_$name.log" 2>/dev/null; done

torch_cmake=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null) || torch_cmake=
if [[ -n "$torch_cmake" ]]; then
  # libtorch's MNIST reads the raw IDX files from ./data.
  data="$(cd "${MINIDL_DATA:-datasets}" && pwd)"
  [[ -d "$data/mnist" ]] && data="$data/mnist"
  build_one() {  # the unported program against libtorch, in $work/libtorch_NAME
    local name=$1 dir="$work/libtorch_$1"
    mkdir -p "$dir/data"
    cp "$examples/cpp/$name/$name.cpp" "$dir/"
    for f in "$data"/*-ubyte*; do
      case "$f" in *.gz) gunzip -c "$f" >"$dir/data/$(basename "$f" .gz)" ;; *) cp "$f" "$dir/data/" ;; esac
    done
    cat >"$dir/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project($name LANGUAGES CXX)
find_package(Torch REQUIRED)
add_executable($name $name.cpp)
target_link_libraries($name "\${TORCH_LIBRARIES}")
target_include_directories($name PRIVATE "$PWD/tests/support")
set_property(TARGET $name PROPERTY CXX_STANDARD 17)
CMAKE
    cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_cmake" \
      >"$dir/configure.log" 2>&1 && cmake --build "$dir/build" >"$dir/build.log" 2>&1
  }
  names="regression autograd mnist dcgan"
  for name in $names; do build_one "$name" & done
  wait
  for name in $names; do
    dir="$work/libtorch_$name"
    if [[ -x "$dir/build/$name" ]]; then
      start=$SECONDS
      if [[ $name == dcgan ]]; then
        (cd "$dir" && build/dcgan --epochs "${DCGAN_EPOCHS:-1}" >"$OUT/libtorch_$name.log" 2>&1)
      else
        (cd "$dir" && build/$name >"$OUT/libtorch_$name.log" 2>&1)
      fi
      echo "libtorch $name: exit $?, ran in $((SECONDS - start)) s" | tee -a "$OUT/examples.log"
    else
      echo "libtorch $name: did not build" | tee -a "$OUT/examples.log"
      tail -20 "$dir/configure.log" "$dir/build.log" >>"$OUT/examples.log" 2>/dev/null
    fi
  done
fi
rm -rf "$work"
