#!/usr/bin/env bash
# Fuzzes the safetensors parser with libFuzzer + AddressSanitizer + UBSan.
#   scripts/fuzz.sh [SECONDS]        (default 30)
#
# Builds tests/fuzz/fuzz_safetensors.cpp with clang++-14 -fsanitize=fuzzer,address,undefined,
# compiling core/safetensors.cpp into the harness so that the parser is instrumented; the
# rest of Loom is linked from the libloom.a of the cpu preset (build/cpu; only the `loom`
# target is built, and nothing when it is up to date). Then seeds a corpus with a few valid
# files and runs the fuzzer for SECONDS with inputs of up to 4096 bytes. Exits non-zero when
# the fuzzer finds a crash (the input is saved under the output folder).
#
# Environment: LOOM_BUILD_DIR (a configured build folder to take libloom.a from, instead of
# the cpu preset's), FUZZ_DIR (output folder, default build/fuzz), FUZZ_CXX (clang++-14).
# Needs (Debian/Ubuntu): clang-14 and libclang-rt-14-dev (libFuzzer and sanitizer runtimes;
# on Ubuntu they are in libclang-common-14-dev), plus Loom's own build dependencies.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-30}
cxx=${FUZZ_CXX:-clang++-14}
out=${FUZZ_DIR:-build/fuzz}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz: $cxx not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi

# ---- libloom.a -------------------------------------------------------------------------------
if [ -n "${LOOM_BUILD_DIR:-}" ]; then
  build_dir=$LOOM_BUILD_DIR
  cmake --build "$build_dir" --target loom
else
  build_dir=build/cpu
  [ -f "$build_dir/CMakeCache.txt" ] || cmake --preset cpu
  cmake --build --preset cpu --target loom
fi
lib=$build_dir/libloom.a
[ -f "$lib" ] || { echo "fuzz: $lib was not built" >&2; exit 1; }

# ---- the harness -------------------------------------------------------------------------------
mkdir -p "$out/corpus" "$out/artifacts"
echo "fuzz: building $out/fuzz_safetensors with $cxx"
"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. tests/fuzz/fuzz_safetensors.cpp core/safetensors.cpp "$lib" -lgomp -lpthread \
  -o "$out/fuzz_safetensors"

# ---- seeds: a few valid files ----------------------------------------------------------------
# seed FILE HEADER DATA: the 8-byte little-endian header length, the header, then DATA
# (printf escapes). Headers are ASCII and shorter than 64 KiB.
seed() {
  local n=${#2}
  {
    printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8)))\\x00\\x00\\x00\\x00\\x00\\x00"
    printf '%s' "$2"
    printf "$3"
  } >"$out/corpus/$1"
}
seed f32 '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' '\x00\x00\x80\x3f\x00\x00\x00\x40'
seed all_dtypes '{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},"c":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]},"d":{"dtype":"I64","shape":[1],"data_offsets":[16,24]},"e":{"dtype":"I32","shape":[1],"data_offsets":[24,28]},"f":{"dtype":"BOOL","shape":[2],"data_offsets":[28,30]},"__metadata__":{"format":"pt"}}' \
  '\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x3c\x00\xc0\x80\x3f\x00\xc0\x07\x00\x00\x00\x00\x00\x00\x00\xf9\xff\xff\xff\x01\x00'
seed empty_and_scalar '{"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}' \
  '\x2a\x00\x00\x00\x00\x00\x00\x00'
seed matrix '{"m":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"__metadata__":{"k":"v","x":""}}    ' \
  '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40'
seed empty '{}' ''

cat >"$out/safetensors.dict" <<'EOF'
"\"dtype\""
"\"shape\""
"\"data_offsets\""
"\"__metadata__\""
"\"F64\""
"\"F32\""
"\"F16\""
"\"BF16\""
"\"I64\""
"\"I32\""
"\"BOOL\""
"[0,0]"
"[]"
"18446744073709551615"
"9223372036854775807"
"2305843009213693952"
"-1"
"1e400"
EOF

# ---- run ------------------------------------------------------------------------------------------
echo "fuzz: running for ${seconds}s (corpus $out/corpus)"
"$out/fuzz_safetensors" "$out/corpus" -dict="$out/safetensors.dict" -max_len=4096 \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$out/artifacts/"
echo "fuzz: no crash in ${seconds}s"
