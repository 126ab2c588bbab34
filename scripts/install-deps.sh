#!/usr/bin/env bash
# Installs Loom's dependencies with apt-get (Debian 12, Ubuntu 24.04): the packages of the
# groups asked for in scripts/dependencies.txt (the one list; it says what each group is for),
# and, with the test group, the Python tools of the tests (TensorBoard and torch-tb-profiler,
# from PyPI) and cuDNN's frontend headers in a
# virtual environment at .venv-tools/. Idempotent: does nothing when everything is present,
# and runs `apt-get update` only if something is missing. Works as root, or through sudo.
#   scripts/install-deps.sh                  # build test fuzz interop onnx slurm: a developer's machine, CI
#   scripts/install-deps.sh build test       # the image's build stage (Containerfile)
#   scripts/install-deps.sh runtime          # its runtime stage
#   scripts/install-deps.sh docs             # headless Chromium for the docs' pictures (scripts/screenshot.sh)
# The fuzz, interop, onnx and slurm groups are optional: a package of theirs that the distribution does not
# have is left out with a message (their tests then skip), instead of failing the install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/dependencies.sh

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(build test fuzz interop onnx slurm)
# A group the list does not name (a typo, or `--docs` for `docs`) is an error, not an empty install.
known=" $(loom_groups | tr '\n' ' ') "
for g in "${groups[@]}"; do
  if [[ $known != *" $g "* ]]; then
    echo "install-deps: unknown group '$g'; scripts/dependencies.txt has:$known" >&2
    exit 2
  fi
done
mapfile -t packages < <(loom_packages "${groups[@]}")
optional_groups=" fuzz interop onnx slurm "

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
# profiler traces with the plugin's RunLoader (tests/profiler/read_trace.py); and onnx and
# onnxruntime for onnx_runtime_check, which checks and runs Loom's exported models
# (tests/onnx/check_onnx.py).
# Made with Debian's python3; kept when it exists and imports fine, remade otherwise.
venv=.venv-tools
tools_imports='import tensorboard.backend.event_processing.event_accumulator, torch_tb_profiler.profiler, onnx, onnxruntime'
tools_venv() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$tools_imports" 2>/dev/null; then
    echo "install-deps: $venv has tensorboard $("$venv/bin/python" -c 'import tensorboard; print(tensorboard.__version__)')" \
         "torch-tb-profiler, onnx $("$venv/bin/python" -c 'import onnx; print(onnx.__version__)')" \
         "and onnxruntime $("$venv/bin/python" -c 'import onnxruntime; print(onnxruntime.__version__)')"
    return
  fi
  echo "install-deps: making $venv with tensorboard, torch-tb-profiler, onnx and onnxruntime from PyPI"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check tensorboard torch-tb-profiler onnx onnxruntime
  "$venv/bin/python" -c "$tools_imports"
}

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

# The rest of the venv and checks: with the test group only (the image's runtime stage has no tests).
finish() {
  check_cmake
  if [[ " ${groups[*]} " == *" test "* ]]; then
    tools_venv
    bash scripts/install-cudnn-frontend.sh  # cuDNN's frontend headers into .venv-tools/ (cuDNN attention)
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present (${packages[*]})"
  finish
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

"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
# A package only of the optional groups that this distribution does not have is left out.
required=" $(loom_packages $(for g in "${groups[@]}"; do [[ $optional_groups == *" $g "* ]] || echo "$g"; done) | tr '\n' ' ') "
install=()
for pkg in "${missing[@]}"; do
  if [[ $required != *" $pkg "* ]] && ! apt-cache show "$pkg" >/dev/null 2>&1; then
    echo "install-deps: $pkg (optional) is not in this distribution's archive: left out, its tests will skip"
  else
    install+=("$pkg")
  fi
done
if [ ${#install[@]} -gt 0 ]; then
  echo "install-deps: installing ${install[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${install[@]}"
fi
finish
echo "install-deps: done"
