#!/usr/bin/env bash
# Installs the header-only C++ API of cuDNN's frontend — the include/ of PyPI's
# nvidia-cudnn-frontend wheel — into .venv-tools/ (which scripts/install-deps.sh makes),
# where cmake/LoomCudnnFrontend.cmake finds it for cuDNN's fused attention
# (kernels/cuda/cudnn_attention.cpp). Pinned to the frontend release made for the cuDNN Loom
# builds against: cuDNN 9.19 (the CUDA toolkit's here, PyTorch's pip packages on the GPU
# machines), and frontend 1.18.0 is "the recommended version for cuDNN 9.18.1 and later" by
# its release notes (1.19 is for 9.19.1 and later). Only headers are used: no dependency is
# installed with it. Idempotent: does nothing when that version is there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=1.18.0
venv=.venv-tools
if [ ! -x "$venv/bin/python" ]; then
  echo "install-cudnn-frontend: $venv is missing (scripts/install-deps.sh makes it)" >&2
  exit 1
fi
include=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/include

# MAJOR.MINOR.PATCH of the installed headers, or nothing.
installed() {
  local h="$include/cudnn_frontend_version.h"
  [ -f "$h" ] || return 0
  awk '/define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION / {v[$2] = $3}
       END {print v["CUDNN_FRONTEND_MAJOR_VERSION"] "." v["CUDNN_FRONTEND_MINOR_VERSION"] "." v["CUDNN_FRONTEND_PATCH_VERSION"]}' "$h"
}

if [ "$(installed)" = "$version" ] && [ -f "$include/cudnn_frontend.h" ]; then
  echo "install-cudnn-frontend: $include has cuDNN frontend $version"
  exit 0
fi
echo "install-cudnn-frontend: installing nvidia-cudnn-frontend $version into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "nvidia-cudnn-frontend==$version"
if [ "$(installed)" != "$version" ] || [ ! -f "$include/cudnn_frontend.h" ]; then
  echo "install-cudnn-frontend: the wheel did not put cudnn_frontend.h $version in $include" >&2
  exit 1
fi
echo "install-cudnn-frontend: $include has cuDNN frontend $version"
