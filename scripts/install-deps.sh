#!/usr/bin/env bash
# Installs Loom's build dependencies with apt-get (Debian/Ubuntu), and the Python tools of
# the tests (TensorBoard and its profile plugin, from PyPI) in a virtual environment at
# .venv-tools/. Idempotent:
# does nothing when everything is present, and runs `apt-get update` only if something is
# missing. Works as root, or through sudo otherwise.
#
#   scripts/install-deps.sh          # what the build and the tests need
#   scripts/install-deps.sh --docs   # and what the docs' pictures need: headless Chromium
#                                    # (scripts/screenshot.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# clang-14 + libclang-rt-14-dev: the libFuzzer target (scripts/fuzz.sh); python3-torch:
# the PyTorch interop test (tests/interop) and the golden-fixture scripts (tests/golden);
# libcli11-dev: the command lines of the programs in examples/; python3: the layering test;
# python3-venv: the virtual environment of the TensorBoard reader test (tools_venv below);
# libgloo-dev: the collectives of distributed/ (Gloo's TCP transport); libdnnl-dev: oneDNN,
# the float32 CPU GEMM (Note [GEMM dispatch]); iproute2: `ip netns`,
# the two hosts of the distributed_two_hosts test.
packages=(cmake ninja-build g++ ccache libeigen3-dev catch2 nlohmann-json3-dev libcli11-dev
          clang-14 libclang-rt-14-dev python3 python3-torch python3-venv libgloo-dev libdnnl-dev
          iproute2)
# --docs: Debian's headless Chromium and a font for it, which take the screenshots of pages
# Loom writes (the profiler's timeline in docs/profiling.md). Not needed to build or test.
if [ "${1:-}" = "--docs" ]; then
  packages+=(chromium-headless-shell fonts-dejavu-core)
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--docs]" >&2
  exit 2
fi

# CMakePresets.json version 6 (workflow presets) needs CMake >= 3.25.
check_cmake() {
  local version
  version=$(cmake --version | head -n1 | awk '{print $3}')
  if ! printf '3.25.0\n%s\n' "$version" | sort -V -C; then
    echo "install-deps: CMake $version is too old; Loom needs 3.25 or newer" >&2
    exit 1
  fi
}

# .venv-tools/: PyPI's tensorboard for the CTest test tensorboard_reader, which reads Loom's
# event files with TensorBoard's own EventAccumulator (tests/tensorboard/read_events.py), and
# its profile plugin torch-tb-profiler for tensorboard_profile_reader, which loads Loom's
# profiler traces with the plugin's RunLoader (tests/profiler/read_trace.py).
# Made with Debian's python3; kept when it exists and imports fine, remade otherwise.
venv=.venv-tools
tools_imports='import tensorboard.backend.event_processing.event_accumulator, torch_tb_profiler.profiler'
tools_venv() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$tools_imports" 2>/dev/null; then
    echo "install-deps: $venv has tensorboard $("$venv/bin/python" -c 'import tensorboard; print(tensorboard.__version__)')" \
         "and torch-tb-profiler"
    return
  fi
  echo "install-deps: making $venv with tensorboard and torch-tb-profiler from PyPI"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check tensorboard torch-tb-profiler
  "$venv/bin/python" -c "$tools_imports"
}

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  check_cmake
  echo "install-deps: all dependencies present (${packages[*]})"
  tools_venv
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: missing ${missing[*]}, and apt-get is not available; install them by hand" >&2
  exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "install-deps: missing ${missing[*]}; run as root or install sudo" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
check_cmake
tools_venv
echo "install-deps: done"
