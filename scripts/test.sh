#!/usr/bin/env bash
# Builds Loom (cpu preset: Release, build/cpu) and runs the whole test suite.
#   ./scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake --workflow --preset cpu
