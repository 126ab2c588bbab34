#!/usr/bin/env bash
# The GPU check's first half, run HERE (a development machine: Debian 12 after
# scripts/install-deps.sh, the CUDA 13 toolkit, no GPU needed): builds what the GPU machine
# runs — loom_tests, loom-bench, bench_cuda and the examples, with the CUDA backend for
# sm_90 (H100 / H200) — and packs it, with the CTest files of its CUDA tests and the shared
# libraries the GPU machine lacks, into .gpu-pack/loom-gpu.tar.xz (git-ignored). The second
# half, scripts/gpu-check.sh, runs on the GPU machine and compiles nothing:
#
#   bash scripts/gpu-pack.sh                 # here: ~11 min cold, 2-3 min with ccache warm (xz)
#   device run, carry [".gpu-pack"]:  bash scripts/gpu-check.sh
#
# Options: --arch LIST (CMAKE_CUDA_ARCHITECTURES, default 90), --build-dir DIR (default
# build/gpu), --jobs N (default 2).
#
# Which libraries travel is found: every library the packed programs load that is neither
# glibc's, the compiler runtime's, nor CUDA's own (the driver, the runtime, cuBLAS, cuDNN,
# NCCL: the GPU machine has those in its PyTorch's pip packages) — today Gloo, oneDNN and
# what they load. The packages of the gpu-libs group of scripts/dependencies.txt (the one
# list of dependencies) are checked to be among them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

arch=90
build=build/gpu
jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "gpu-pack: unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done

case "$build" in /*|..*) echo "gpu-pack: --build-dir must be a folder below the checkout, got $build" >&2; exit 2 ;; esac

if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1; then
  [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu-pack: no nvcc (CUDA toolkit) found" >&2; exit 1; }
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"

echo "== configure $build (CUDA architectures $arch)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$build.configure.log" 2>&1 \
  || { tail -40 "$build.configure.log"; exit 1; }
# A configure that found no CUDA compiler builds the CPU backend only: every CUDA test
# would then be skipped on the GPU machine. Stop here instead.
grep -q "CUDA backend ON" "$build.configure.log" || { echo "gpu-pack: configured WITHOUT CUDA"; tail -20 "$build.configure.log"; exit 1; }
grep -E "cuDNN|NCCL" "$build.configure.log" | sed 's/^-- /   /' || true

examples=(text_classification embedding_mean timeseries char_rnn transformer_classification)
targets=(loom_tests loom_bench bench_cuda "${examples[@]}")
echo "== build ${targets[*]} ($jobs jobs)"
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# The staging tree mirrors the build tree, so the CTest files' paths need only the
# source directory's prefix replaced (gpu-check.sh does it).
stage=.gpu-pack/stage
rm -rf .gpu-pack
mkdir -p "$stage/lib"
programs=("$build/loom_tests" "$build/bench/loom-bench" "$build/bench/bench_cuda")
for e in "${examples[@]}"; do programs+=("$build/examples/$e"); done
for p in "${programs[@]}"; do
  mkdir -p "$stage/$(dirname "$p")"
  cp "$p" "$stage/$p"
done
# CTest's files: each directory's CTestTestfile.cmake and the test lists that Catch2's
# discovery wrote (loom_tests_include-*.cmake, loom_tests_tests-*.cmake), with the paths of
# this build.
(cd "$build" && find . -name CTestTestfile.cmake -o -name 'loom_tests*.cmake') | while read -r f; do
  mkdir -p "$stage/$build/$(dirname "$f")"
  cp "$build/$f" "$stage/$build/$f"
done

# Libraries that travel (see the top): resolved by the loader here, copied as files
# under their sonames.
is_provided_there() {
  case "$1" in
    linux-vdso.so.*|ld-linux*|libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|libstdc++.so.*|libgcc_s.so.*) return 0 ;;
    libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libcudnn*.so.*|libnccl.so.*|libnvrtc*.so.*|libnvJitLink.so.*) return 0 ;;
  esac
  return 1
}
for p in "${programs[@]}"; do
  ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r soname path; do
  is_provided_there "$soname" || cp -L "$path" "$stage/lib/$soname"
done
ldd "${programs[@]}" | grep -q "not found" && { echo "gpu-pack: a library is missing here:"; ldd "${programs[@]}" | grep "not found"; exit 1; }
# The one list of dependencies (scripts/dependencies.txt) names the packages whose libraries
# a GPU machine lacks (group gpu-libs): each one's library must be among those that travel,
# or the walk above and the list disagree.
# shellcheck disable=SC1091
. scripts/dependencies.sh
for pkg in $(loom_packages gpu-libs); do
  for so in $(dpkg -L "$pkg" | grep -E '\.so$'); do
    soname=$(readelf -d "$(readlink -f "$so")" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
    [ -f "$stage/lib/$soname" ] || { echo "gpu-pack: $soname of $pkg (scripts/dependencies.txt, gpu-libs) does not travel"; exit 1; }
  done
done

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -vc '^??' || true)
cat > "$stage/manifest.env" <<EOF
# Written by scripts/gpu-pack.sh; read by scripts/gpu-check.sh.
pack_source_dir=$PWD
pack_build_dir=$build
pack_commit=$commit
pack_modified_files=$dirty
pack_arch=$arch
pack_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
pack_host_glibc=$(ldd --version | head -1 | awk '{print $NF}')
EOF
echo "== pack"
# Every program carries the same CUDA kernels: one xz stream with a 64 MiB window (-9, one
# thread: several would cut it into independent blocks) stores them about once — 18 MB
# instead of 41 with -6.
tar -C "$stage" -cf - . | xz -T1 -9 > .gpu-pack/loom-gpu.tar.xz
rm -rf "$stage"
echo "gpu-pack: .gpu-pack/loom-gpu.tar.xz $(du -h .gpu-pack/loom-gpu.tar.xz | cut -f1) (commit $commit, $dirty modified tracked files, sm_$arch)"
echo "gpu-pack: travelling libraries: $(for p in "${programs[@]}"; do ldd "$p"; done | awk '$2 == "=>" { print $1 }' | sort -u | while read -r s; do is_provided_there "$s" || printf '%s ' "$s"; done)"
echo "gpu-pack: next, with the device tool: carry [\".gpu-pack\"], command \"bash scripts/gpu-check.sh\""
