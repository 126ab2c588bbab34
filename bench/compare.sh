#!/usr/bin/env bash
# Runs loom-bench and its PyTorch peer (bench/torch_workloads.py) on the same workloads in
# the same run, one process per workload and framework (so peak_rss_bytes is per workload),
# Loom then PyTorch for each workload so that both see about the same machine load, and
# prints ms/step of both and the ratio peer / loom (> 1: Loom is faster).
#
#   bench/compare.sh [--build DIR] [--device cpu|cuda] [--steps N] [--threads N] [--amp bf16|fp16]
#                    [--flush-denormal] [--fetch-openblas] [--peer-venv DIR] [WORKLOAD ...]
#
#   --build DIR        the CMake build dir holding bench/loom-bench (default: build)
#   --steps N          measured steps for every workload (default: 200 seed-rnn, 50 embed-mean,
#                      3 lstm-sentiment and lstm-2x512: PyTorch 1.13's CPU LSTM takes ~8 s/step)
#   --threads N        threads for both (default 2: OMP_NUM_THREADS for PyTorch)
#   --amp bf16|fp16    both run forward and loss under autocast (fp16 with a GradScaler)
#   --flush-denormal   both flush denormal floats to zero (FTZ/DAZ; off by default in both)
#   --peer-venv DIR    also run PyTorch 2.x from PyPI, the peer that counts: the virtual
#                      environment DIR, created with `pip install torch numpy` when it has no
#                      torch (about 2.7 GB; never in CI). Both peers run where both are present.
#   --fetch-openblas   when torch would run on the reference BLAS, download Debian's OpenBLAS
#                      package with apt-get and unpack it under the build dir (nothing is
#                      installed system-wide)
#
# Environment: TORCH_PYTHON (default /usr/bin/python3, Debian's python3-torch; on a GPU
# machine the interpreter with its CUDA PyTorch), TORCH_OPENBLAS_DIR (a folder holding an
# OpenBLAS libblas.so.3 to put first on the peer's LD_LIBRARY_PATH).
#
# Why the BLAS matters: Debian's torch calls whatever libblas.so.3 resolves to. Without
# OpenBLAS that is the netlib reference BLAS (~1 GFLOP/s, ~200x slower), which makes every
# GEMM-bound ratio meaningless. With OpenBLAS, OPENBLAS_CORETYPE=SKYLAKEX stops it from
# running its generic kernel on this virtual CPU (see docs/benchmarks.md); it is set only
# when the CPU has AVX-512. The peer's `blas` column says what torch actually loaded.
#
# Raw JSON lines are kept in <build>/compare-<time>.jsonl.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build
device=cpu
steps=
threads=2
fetch_openblas=0
peer_venv=
flags=()
workloads=()
while (($#)); do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --device) device=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --fetch-openblas) fetch_openblas=1; shift ;;
    --peer-venv) peer_venv=$2; shift 2 ;;
    --amp) flags+=(--amp "$2"); shift 2 ;;
    --flush-denormal) flags+=(--flush-denormal); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) workloads+=("$1"); shift ;;
  esac
done
((${#workloads[@]})) || workloads=(seed-rnn embed-mean lstm-sentiment lstm-2x512)

default_steps() {
  case $1 in
    seed-rnn) echo 200 ;;
    embed-mean) echo 50 ;;
    *) echo 3 ;;
  esac
}

loom_bench=$build/bench/loom-bench
if [[ ! -x $loom_bench ]]; then
  echo "compare.sh: $loom_bench not found: build it with 'ninja -C $build loom_bench' (or pass --build DIR)" >&2
  exit 1
fi
venv_python=
if [[ -n $peer_venv ]]; then
  venv_python=$peer_venv/bin/python
  if ! "$venv_python" -c 'import torch' 2>/dev/null; then
    echo "compare.sh: creating $peer_venv with PyTorch 2.x from PyPI (about 2.7 GB)" >&2
    python3 -m venv "$peer_venv" && "$peer_venv/bin/pip" install --quiet torch numpy >&2
  fi
fi
python=${TORCH_PYTHON:-/usr/bin/python3}
if ! "$python" -c 'import torch' 2>/dev/null; then
  if [[ -z $venv_python ]]; then
    echo "compare.sh: $python cannot import torch (apt-get install python3-torch, set TORCH_PYTHON, or pass --peer-venv DIR)" >&2
    exit 1
  fi
  python=  # only the venv's peer
fi
peer=("$repo/bench/torch_workloads.py")

# ---- the peer's environment: threads, and a real BLAS ------------------------------------------
peer_env=(OMP_NUM_THREADS="$threads")
grep -qw avx512f /proc/cpuinfo 2>/dev/null && peer_env+=(OPENBLAS_CORETYPE=SKYLAKEX)

blas_of() {  # what torch loads with the given extra environment
  env "$@" PYTHONPATH="$repo/bench" "$python" -c 'import torch_workloads as w; print(w.loaded_blas())'
}

if [[ -n $python && $device == cpu && $(blas_of "${peer_env[@]}") == reference* ]]; then
  arch_dir=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  unpacked=$build/openblas
  candidates=("${TORCH_OPENBLAS_DIR:-}" "/usr/lib/$arch_dir/openblas-pthread" "/usr/lib/$arch_dir/openblas-openmp"
              "$unpacked/usr/lib/$arch_dir/openblas-pthread")
  if ((fetch_openblas)) && [[ ! -e ${candidates[3]}/libblas.so.3 ]]; then
    echo "compare.sh: fetching libopenblas0-pthread into $unpacked" >&2
    mkdir -p "$unpacked"
    (cd "$unpacked" && apt-get download libopenblas0-pthread >&2 && dpkg-deb -x libopenblas0-pthread_*.deb .)
  fi
  found=
  for dir in "${candidates[@]}"; do
    if [[ -n $dir && -e $dir/libblas.so.3 ]]; then
      found=$dir
      break
    fi
  done
  if [[ -n $found ]]; then
    peer_env+=(LD_LIBRARY_PATH="$found${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  else
    echo "compare.sh: WARNING: torch would use the reference BLAS and no OpenBLAS was found;" \
         "GEMM-bound peer figures will be far too slow. Rerun with --fetch-openblas, or set TORCH_OPENBLAS_DIR." >&2
  fi
fi

# ---- run ----------------------------------------------------------------------------------------
results=$build/compare-$(date +%Y%m%d-%H%M%S).jsonl
: > "$results"
for w in "${workloads[@]}"; do
  n=${steps:-$(default_steps "$w")}
  echo "compare.sh: $w, $n steps: loom-bench (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  "$loom_bench" --device "$device" --threads "$threads" --steps "$n" ${flags[@]+"${flags[@]}"} "$w" | tee -a "$results" ||
    echo "compare.sh: loom-bench failed on $w" >&2
  # PyPI's PyTorch 2.x first (it bundles its BLAS), then the system's.
  if [[ -n $venv_python ]]; then
    echo "compare.sh: $w, $n steps: PyTorch from $peer_venv (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    env OMP_NUM_THREADS="$threads" "$venv_python" "${peer[@]}" --device "$device" --threads "$threads" --steps "$n" \
      ${flags[@]+"${flags[@]}"} "$w" | tee -a "$results" || echo "compare.sh: the PyTorch peer ($peer_venv) failed on $w" >&2
  fi
  if [[ -n $python ]]; then
    echo "compare.sh: $w, $n steps: PyTorch from $python (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    env "${peer_env[@]}" "$python" "${peer[@]}" --device "$device" --threads "$threads" --steps "$n" \
      ${flags[@]+"${flags[@]}"} "$w" | tee -a "$results" || echo "compare.sh: the PyTorch peer ($python) failed on $w" >&2
  fi
done

# ---- table --------------------------------------------------------------------------------------
python3 - "$results" <<'EOF'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows.setdefault(r["workload"], {}).setdefault(r["framework"], r)
print()
print(f"{'workload':<16}{'loom ms/step':>14}{'peer ms/step':>14}{'peer/loom':>11}{'load (l/p)':>13}  peer")
for name, r in rows.items():
    loom = r.get("loom")
    for framework, peer in r.items():
        if framework == "loom" or not loom:
            continue
        ratio = peer["ms_per_step"] / loom["ms_per_step"]
        load = f"{loom['load1']:.1f}/{peer['load1']:.1f}"
        print(f"{name:<16}{loom['ms_per_step']:>14.3f}{peer['ms_per_step']:>14.3f}{ratio:>10.2f}x{load:>13}  "
              f"{framework}, {peer['threads']} threads, {peer.get('blas', peer['device'])}, amp {peer.get('amp', 'off')}")
flushed = {r["flush_denormal"] for w in rows.values() for r in w.values()}
print("denormals flushed to zero (FTZ/DAZ):", " / ".join(sorted("yes" if f else "no" for f in flushed)))
EOF
echo "raw results: $results" >&2
