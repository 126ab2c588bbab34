"""PyTorch's side of bench_core's `sdpa` lines: forward + backward of
torch.nn.functional.scaled_dot_product_attention on (B 8, H 8, L = S, E 64) float32 at
L = 512 and 4096, the same step as Loom's (out = sdpa(q, k, v); (out * gy).sum().backward()).

One JSON line per L, with bench_core's fields: value (median ms per step), gflop_per_s
(14 N L S E flops: forward 2 GEMMs, backward 5), gemm_1024_gflop_per_s (torch.matmul at
1024^3 in the same process: torch's own ceiling) and peak_rss_growth_bytes.

Memory: PyTorch keeps no books of CPU tensor memory, so each L runs in a fresh process and
peak_rss_growth_bytes is the growth of the process's peak resident set (getrusage ru_maxrss)
over its first step, measured after the inputs exist: the outputs, the gradients, what
autograd saves and any scratch the kernels touch, as the OS counts pages (a block malloc'd
but never written is not counted). Loom's peak_mem_bytes counts tensor storage instead.

`--dtype bfloat16` runs the step on bfloat16 q, k, v (bench_core's bfloat16 sdpa lines).

    OMP_NUM_THREADS=2 /tmp/torch2/bin/python bench/torch_sdpa.py [--threads 2] [--quick] [--lengths 512,4096]
                                                                 [--dtype float32|bfloat16]
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

B, H, E = 8, 8, 64


def gemm_gflops(torch, quick):
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for _ in range(2):
        torch.matmul(a, b)
    times = []
    for _ in range(3 if quick else 15):
        t = time.perf_counter()
        torch.matmul(a, b)
        times.append(time.perf_counter() - t)
    return 2 * 1024**3 / statistics.median(times) / 1e9


def one_length(L, threads, quick, dtype_name):
    """Runs in its own process: prints the line for one L."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ceiling = gemm_gflops(torch, quick)
    dtype = getattr(torch, dtype_name)
    q, k, v = (torch.randn(B, H, L, E, dtype=dtype, requires_grad=True) for _ in range(3))
    gy = torch.randn(B, H, L, E, dtype=dtype)

    def step():
        out = F.scaled_dot_product_attention(q, k, v)
        (out * gy).sum().backward()

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    step()  # the first step: also the warm-up, and allocates the .grad of q, k and v
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024
    reps = 1 if quick else (5 if L <= 512 else 3)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    s = statistics.median(times)
    N = B * H
    flops = 14.0 * N * L * L * E
    print(json.dumps({
        "bench": "sdpa", "framework": f"pytorch-{torch.__version__}", "size": N * L * E, "dtype": dtype_name,
        "threads": torch.get_num_threads(), "value": round(s * 1e3, 2), "unit": "ms",
        "path": "torch.nn.functional.scaled_dot_product_attention", "B": B, "heads": H, "L": L, "S": L, "E": E,
        "gflop": round(flops / 1e9, 2), "gflop_per_s": round(flops / s / 1e9, 1),
        "gemm_1024_gflop_per_s": round(ceiling, 1), "fraction_of_gemm": round(flops / s / 1e9 / ceiling, 3),
        "peak_rss_growth_bytes": rss_growth,
    }), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--lengths", default="512,4096", help="comma-separated L (= S)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: run one L in this process
    a = p.parse_args()
    if a.one is not None:
        one_length(a.one, a.threads, a.quick, a.dtype)
        return
    for L in (int(x) for x in a.lengths.split(",")):
        cmd = [sys.executable, __file__, "--one", str(L), "--threads", str(a.threads), "--dtype", a.dtype] + (["--quick"] if a.quick else [])
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
