#!/usr/bin/env bash
# Builds Loom (cpu preset) and trains the flagship example: an LSTM sentiment classifier
# on the bundled movie-review sentences, ending with its held-out accuracy. Extra
# arguments go to the program (see --help), e.g. --epochs 3 --checkpoint model.safetensors
#   ./scripts/train.sh [args...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake --preset cpu
cmake --build --preset cpu --target text_classification
./build/cpu/examples/text_classification "$@"
