#!/usr/bin/env bash
# Run on a development machine (Debian, after scripts/install-deps.sh) before sending the
# tree to a GPU machine that has CUDA, CMake and ninja but no Debian dev packages and no
# network: copies the header-only dependencies (Eigen, Catch2, nlohmann-json, CLI11) with
# their CMake package files into .gpu-deps/usr (git-ignored, ~12 MB), in the same layout
# as /usr, so scripts/gpu-check.sh can point CMAKE_PREFIX_PATH at it. With the device
# tool: carry ".gpu-deps" and run `bash scripts/gpu-check.sh`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dest=.gpu-deps/usr
rm -rf .gpu-deps
copy() {  # copy /usr/<path> to .gpu-deps/usr/<path>
  mkdir -p "$dest/$(dirname "$1")"
  cp -r "/usr/$1" "$dest/$1"
}
copy include/eigen3
copy share/eigen3/cmake
copy include/catch2
copy lib/cmake/Catch2
copy lib/libCatch2WithMain.a  # named by Catch2's CMake package
copy include/nlohmann
copy share/cmake/nlohmann_json
copy include/CLI
copy share/cmake/CLI11
du -sh .gpu-deps
