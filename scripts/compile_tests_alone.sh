#!/usr/bin/env bash
# Compiles each test file by itself, syntax only, as the default build compiles it (one file a
# translation unit, its flags and precompiled header), without building the library first: a quick
# way to find a test file that compiles only inside CI's batches (MINIDL_UNITY_TESTS), or under one
# compiler only. Prints "FAIL <file>" for each file that does not compile (its errors are in
# $BUILD_DIR/compile-alone/<file>.log) and exits 1 if any failed.
#
#   scripts/compile_tests_alone.sh                    # the build's C++ compiler
#   CXX_ALONE="clang++ -Wno-unknown-warning-option" scripts/compile_tests_alone.sh
#
# Environment: BUILD_DIR (default build-alone: configured here with -DMINIDL_UNITY_TESTS=OFF and
# CMAKE_ARGS), JOBS (default nproc), CXX_ALONE (a compiler command in place of the build's).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-alone}
JOBS=${JOBS:-$(nproc)}
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIDL_UNITY_TESTS=OFF ${CMAKE_ARGS:-} >/dev/null
logs="$BUILD_DIR/compile-alone"
rm -rf "$logs" && mkdir -p "$logs"
logs=$(cd "$logs" && pwd)  # each command runs in the build folder
# Each test file's command from compile_commands.json, -fsyntax-only in place of -c and -o.
python3 - "$BUILD_DIR" "$logs" "${CXX_ALONE:-}" >"$logs/commands.sh" <<'EOF'
import json, shlex, sys
build, logs, compiler = sys.argv[1], sys.argv[2], shlex.split(sys.argv[3])
for entry in json.load(open(f"{build}/compile_commands.json")):
    source = entry["file"]
    if "/tests/" not in source or "/tests/support/" in source or not source.endswith(".cpp"):
        continue
    args, kept, skip = shlex.split(entry["command"]), [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-MT", "-MF"):
            skip = True
        elif a not in ("-MD", "-c", source):
            kept.append(a)
    if compiler:
        kept = compiler + kept[1:]
    name = source.rsplit("/", 1)[-1]
    command = " ".join(shlex.quote(a) for a in kept + ["-fsyntax-only", source])
    print(f"cd {shlex.quote(entry['directory'])} && {command} >{shlex.quote(logs)}/{name}.log 2>&1 || echo FAIL {name}")
EOF
files=$(wc -l <"$logs/commands.sh")
tr '\n' '\0' <"$logs/commands.sh" | xargs -0 -P "$JOBS" -I{} bash -c '{}' | sort >"$logs/failed.txt"
cat "$logs/failed.txt"
failed=$(wc -l <"$logs/failed.txt")
echo "compile_tests_alone: $files test files, $failed failed (${CXX_ALONE:-the build compiler})"
[ "$failed" -eq 0 ]
