#!/usr/bin/env bash
# Fuzzes Loom's readers of files with libFuzzer + AddressSanitizer + UBSan.
#   scripts/fuzz.sh [SECONDS] [TARGET...]    (default: 30 seconds for each of all the targets)
#
# Targets (tests/fuzz/fuzz_<target>.cpp, each saying what it checks beyond "no crash"):
#   safetensors  parse_safetensors                      core/safetensors.cpp
#   checkpoint   optim::load_checkpoint (all or nothing) optim/checkpoint.cpp and what it calls
#   vocab        data::Vocab::load                      data/vocab.cpp
#   text         data::read_tsv, read_csv, LabelSet, TextClassificationDataset
#   timeseries   data::read_csv_columns                 data/timeseries.cpp
#
# Each harness is built with clang++-14 -fsanitize=fuzzer,address,undefined, with the
# sources of the code it fuzzes compiled in (so that they are instrumented; the list is in
# sources_of below); the rest of Loom is linked from the libloom.a of the cpu preset
# (build/cpu; only the `loom` target is built, and nothing when it is up to date). Objects
# go through ccache when it is on PATH. Each target then runs for SECONDS with its seeds
# (tests/fuzz/corpus/<target>/, small files kept in git; the checkpoint seeds are real
# checkpoints that the harness writes itself, LOOM_FUZZ_WRITE_SEEDS=<folder>) and
# dictionary (tests/fuzz/<target>.dict), growing a corpus under the output folder that a
# later run starts from. A crash or a broken property saves the input under
# <output>/artifacts/ (replay it: <output>/fuzz_<target> <file>); the script runs every
# target it was asked for and exits non-zero when any of them failed.
#
# Environment: LOOM_BUILD_DIR (a configured build folder to take libloom.a from, instead of
# the cpu preset's), FUZZ_DIR (output folder, default build/fuzz), FUZZ_CXX (clang++-14),
# FUZZ_JOBS (parallel compiles, default 2). The harnesses write their inputs to files under
# TMPDIR, /dev/shm when it is writable.
# Needs (Debian/Ubuntu): clang-14 and libclang-rt-14-dev (libFuzzer and sanitizer runtimes;
# on Ubuntu they are in libclang-common-14-dev), plus Loom's own build dependencies.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all_targets=(safetensors checkpoint vocab text timeseries)
seconds=${1:-30}
shift $(($# > 0 ? 1 : 0))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
cxx=${FUZZ_CXX:-clang++-14}
out=${FUZZ_DIR:-build/fuzz}
jobs=${FUZZ_JOBS:-2}

# The Loom sources a target's harness compiles in, instrumented.
sources_of() {
  case $1 in
    safetensors) echo core/safetensors.cpp ;;
    checkpoint) echo optim/checkpoint.cpp optim/optimizer.cpp optim/lr_scheduler.cpp nn/module.cpp core/safetensors.cpp ;;
    vocab) echo data/vocab.cpp data/text_lines.cpp data/tokenizer.cpp ;;
    text) echo data/text_readers.cpp data/text_dataset.cpp data/text_lines.cpp data/tokenizer.cpp ;;
    timeseries) echo data/timeseries.cpp data/text_lines.cpp ;;
    *) return 1 ;;
  esac
}
# The longest input libFuzzer makes: the checkpoint seeds are a few KiB.
max_len_of() { if [ "$1" = checkpoint ]; then echo 16384; else echo 4096; fi; }

for t in "${targets[@]}"; do
  sources_of "$t" >/dev/null || { echo "fuzz: unknown target '$t' (targets: ${all_targets[*]})" >&2; exit 2; }
done
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

# ---- the harnesses -----------------------------------------------------------------------------
# Every source once, to $out/obj/<path>.o, FUZZ_JOBS at a time; then one link per target.
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined)
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(ccache)
units=()
for t in "${targets[@]}"; do units+=("tests/fuzz/fuzz_$t.cpp" $(sources_of "$t")); done
mkdir -p "$out/obj" "$out/artifacts"
echo "fuzz: compiling $(printf '%s\n' "${units[@]}" | sort -u | wc -l) sources with $cxx (${jobs} at a time)"
export out cxx
printf '%s\n' "${units[@]}" | sort -u | FLAGS="${flags[*]}" LAUNCHER="${launcher[*]}" xargs -P "$jobs" -I{} \
  bash -c 'o="$out/obj/{}.o"; mkdir -p "$(dirname "$o")"; $LAUNCHER "$cxx" $FLAGS -fsanitize=fuzzer-no-link -I. -c {} -o "$o"'
for t in "${targets[@]}"; do
  objs=("$out/obj/tests/fuzz/fuzz_$t.cpp.o")
  for s in $(sources_of "$t"); do objs+=("$out/obj/$s.o"); done
  # -ldnnl -lgomp: libloom.a's float32 GEMM (cmake/LoomOneDNN.cmake).
  "$cxx" "${flags[@]}" -fsanitize=fuzzer "${objs[@]}" "$lib" -ldnnl -lgomp -lpthread -o "$out/fuzz_$t"
done

# ---- run ------------------------------------------------------------------------------------------
if [ -z "${TMPDIR:-}" ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi  # no disk writes per input
failed=()
for t in "${targets[@]}"; do
  seeds=(tests/fuzz/corpus/$t)
  if [ "$t" = checkpoint ]; then
    rm -rf "$out/seeds/checkpoint"
    LOOM_FUZZ_WRITE_SEEDS="$out/seeds/checkpoint" "$out/fuzz_checkpoint" >/dev/null
    seeds=("$out/seeds/checkpoint")
  fi
  mkdir -p "$out/corpus/$t"
  echo "fuzz: $t for ${seconds}s (corpus $out/corpus/$t, seeds ${seeds[*]})"
  if "$out/fuzz_$t" "$out/corpus/$t" "${seeds[@]}" -dict="tests/fuzz/$t.dict" -max_len="$(max_len_of "$t")" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$out/artifacts/$t-"; then
    echo "fuzz: $t: no crash in ${seconds}s"
  else
    echo "fuzz: $t FAILED (the input is under $out/artifacts/)" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${targets[*]}: no crash"
