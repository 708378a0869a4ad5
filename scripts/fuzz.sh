#!/usr/bin/env bash
# Fuzzes minidl's readers of untrusted files with libFuzzer (targets in fuzz/): IDX files raw and
# gzip, safetensors, nn::load, optim::load_checkpoint and the character-level text corpus and
# vocabulary. Builds them with clang in build-fuzz/
# (libFuzzer + ASan + UBSan, CPU only), runs each for FUZZ_SECONDS (default 60) from the seeds in
# fuzz/corpus/<target>/ plus what earlier runs found (build-fuzz/corpus/<target>/), and prints the
# executions and crashes of each target. A crash stops its target; the input is saved as
# build-fuzz/crashes/<target>/crash-* (replay: build-fuzz/fuzz/<target> FILE). Exits 1 if any crashed.
#
#   scripts/fuzz.sh                           # every target, 60 s each
#   FUZZ_SECONDS=10 scripts/fuzz.sh fuzz_idx  # some targets
#   scripts/fuzz.sh --seeds                   # rewrite fuzz/corpus/ from make_corpus, then stop
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$repo/build-fuzz}"
seconds="${FUZZ_SECONDS:-60}"

# clang with libFuzzer's runtime, LLVM's OpenMP (clang's -fopenmp links libomp, not GCC's libgomp),
# and llvm-symbolizer for readable stacks.
missing=()
command -v clang++ >/dev/null 2>&1 || missing+=(clang)
command -v llvm-symbolizer >/dev/null 2>&1 || missing+=(llvm)
for p in libclang-rt-dev libomp-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "fuzz: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi

# -O1 -g1: fast enough to fuzz, with line numbers in reports; Eigen's asserts stay on (no NDEBUG).
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DMINIDL_CUDA=OFF -DMINIDL_SANITIZE=fuzzer-no-link,address,undefined \
  -DMINIDL_BUILD_FUZZERS=ON -DMINIDL_BUILD_TESTS=OFF -DMINIDL_BUILD_APPS=OFF -DMINIDL_BUILD_DLPACK_DEMO=OFF >/dev/null
cmake --build "$build" -j "$(nproc)"

if [[ "${1:-}" == "--seeds" ]]; then
  rm -rf "$repo/fuzz/corpus"
  "$build/fuzz/make_corpus" "$repo/fuzz/corpus"
  echo "fuzz: seeds written to fuzz/corpus/"
  exit 0
fi

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$repo"/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi

export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:print_stacktrace=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export OMP_NUM_THREADS=1  # the inputs are tiny; threads would only add noise to coverage

failed=0
summary=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" crashes="$build/crashes/$t" log="$build/logs/$t.log"
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  echo "fuzz: $t for ${seconds} s"
  # -timeout: an input taking 10 s is a hang; -rss_limit_mb: so is a reader that balloons (and a
  # single allocation past it is reported as one: -malloc_limit_mb defaults to the same).
  start="$build/logs/$t.start"
  touch "$start"  # crash files newer than this are this run's; older ones stay for reference
  rc=0
  "$build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$corpus" "$repo/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  found=$(find "$crashes" -type f -newer "$start" | wc -l)
  summary+=("$(printf '%-18s %12s executions  %3d crashes  (exit %d, corpus %d files)' "$t" "$execs" "$found" "$rc" \
    "$(find "$corpus" -type f | wc -l)")")
  if [[ $rc -ne 0 || $found -gt 0 ]]; then
    failed=1
    grep -E 'ERROR|runtime error|SUMMARY|invariant|Test unit written' "$log" | head -20 || true
  fi
done
echo "fuzz: results (${seconds} s per target; logs in $build/logs/)"
printf '  %s\n' "${summary[@]}"
exit "$failed"
