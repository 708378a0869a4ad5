#!/usr/bin/env bash
# Sets up (packages, data, build) and trains the MNIST CNN with its defaults; arguments go to
# mnist_cnn, e.g. scripts/train.sh --epochs 3 --device cuda.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
exec "${BUILD_DIR:-$repo/build}/mnist_cnn" "$@"
