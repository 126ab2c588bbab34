#!/usr/bin/env bash
# Installs Loom's build dependencies with apt-get (Debian/Ubuntu). Idempotent: does
# nothing when everything is present, and runs `apt-get update` only if something is
# missing. Works as root, or through sudo otherwise.
set -euo pipefail

# clang-14 + libclang-rt-14-dev: the libFuzzer target (scripts/fuzz.sh); python3-torch:
# the PyTorch interop test (tests/interop) and the golden-fixture scripts (tests/golden);
# libcli11-dev: the command lines of the programs in examples/; python3: the layering test.
packages=(cmake ninja-build g++ ccache libeigen3-dev catch2 nlohmann-json3-dev libcli11-dev
          clang-14 libclang-rt-14-dev python3 python3-torch)

# CMakePresets.json version 6 (workflow presets) needs CMake >= 3.25.
check_cmake() {
  local version
  version=$(cmake --version | head -n1 | awk '{print $3}')
  if ! printf '3.25.0\n%s\n' "$version" | sort -V -C; then
    echo "install-deps: CMake $version is too old; Loom needs 3.25 or newer" >&2
    exit 1
  fi
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
echo "install-deps: done"
