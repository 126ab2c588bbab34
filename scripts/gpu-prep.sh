#!/usr/bin/env bash
# Run on a development machine (Debian, after scripts/install-deps.sh) before sending the
# tree to a GPU machine that has CUDA, CMake and ninja but no Debian dev packages and no
# network: copies the header-only dependencies (Eigen, Catch2, nlohmann-json, CLI11),
# Gloo (Debian's libgloo-dev: headers, library and the shared libraries it needs) with
# their CMake package files, and oneDNN (libdnnl-dev, its library gzipped) into
# .gpu-deps/usr (git-ignored, ~28 MB), in the same layout
# as /usr, so scripts/gpu-check.sh can point CMAKE_PREFIX_PATH and LD_LIBRARY_PATH at it.
# With the device tool: carry ".gpu-deps" and run `bash scripts/gpu-check.sh`.
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
# Gloo, the collectives of distributed/. Its CMake package names /usr/lib/libgloo.so.* by
# absolute path (and fails when that file is missing): point it at the copy instead.
copy include/gloo
copy share/cmake/Gloo
cp -L /usr/lib/libgloo.so* "$dest/lib/"  # files, not symlinks: the carry may not keep links
sed -i 's|"/usr/lib/|"${_IMPORT_PREFIX}/lib/|g' "$dest"/share/cmake/Gloo/GlooTargets-*.cmake
# The shared libraries libgloo.so needs that a machine without Debian's packages lacks,
# copied under their sonames (what the loader and the linker look for).
mkdir -p "$dest/lib/x86_64-linux-gnu"
for lib in $(ldd /usr/lib/libgloo.so | awk '$1 ~ /^lib(hiredis|ibverbs|nl-3|nl-route-3)\./ { print $3 }'); do
  cp -L "$lib" "$dest/lib/x86_64-linux-gnu/"
done
for soname in libhiredis libibverbs libnl-3 libnl-route-3; do
  ls "$dest/lib/x86_64-linux-gnu/$soname".so.* >/dev/null || { echo "gpu-prep: $soname (needed by libgloo) not copied"; exit 1; }
done
# oneDNN, the float32 CPU GEMM (Debian's libdnnl-dev): headers, and the library gzipped
# (40 MB as it is, 11 gzipped; scripts/gpu-check.sh unpacks it and links its sonames), in lib/
# (found there whatever the GPU machine's library architecture dir is), and libOpenCL.so.1,
# which it needs to load (libgomp comes with the GPU machine's GCC).
copy include/oneapi
cp -a /usr/include/dnnl*.h "$dest/include/"
dnnl_lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libdnnl.so)
[ "$(basename "$dnnl_lib")" = libdnnl.so.2.6 ] || { echo "gpu-prep: expected libdnnl.so.2.6, found $dnnl_lib (update gpu-check.sh)"; exit 1; }
gzip -c "$dnnl_lib" > "$dest/lib/libdnnl.so.2.6.gz"
cp -L /lib/x86_64-linux-gnu/libOpenCL.so.1 "$dest/lib/x86_64-linux-gnu/"
du -sh .gpu-deps
