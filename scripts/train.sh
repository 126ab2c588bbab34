#!/usr/bin/env bash
# Builds Loom (cpu preset) and trains the tiny example: a linear model fitting
# y = 3x - 2 with SGD. Extra arguments go to the program (e.g. the number of epochs).
#   ./scripts/train.sh [epochs]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake --preset cpu
cmake --build --preset cpu --target tiny_regression
./build/cpu/examples/tiny_regression "$@"
