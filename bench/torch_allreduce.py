#!/usr/bin/env python3
"""PyTorch peer of loom-bench-allreduce: all_reduce(SUM) bandwidth of torch.distributed's gloo backend.

    torchrun --standalone --nproc-per-node 2 bench/torch_allreduce.py [--iters K] [--warmup W] [--sizes-mb 1,25,100]

The same measurement as bench/bench_allreduce.cpp, so the two lines compare Loom's use of
Gloo with PyTorch's (the same library underneath: this is "Gloo's own" figure). For each size
(MB = 10^6 bytes of float32): W untimed all_reduce calls, then K timed ones, each after a
barrier; a call's time is the slowest rank's, and the figure is the median over the K calls.
Rank 0 prints one JSON line per size: bench, impl ("torch-gloo"), framework, bytes, ranks,
iters, seconds, algbw_gbps = bytes / seconds and busbw_gbps = algbw × 2(n−1)/n (nccl-tests;
10^9 bytes/s), load1.

Run it with PyTorch 2.x from PyPI (shared/workloads.md): /tmp/torch2/bin/torchrun.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def sizes_mb(text):
    try:
        out = [float(s) for s in text.split(",")]
    except ValueError:
        out = []
    if not out or any(not (0 < mb <= 4096) for mb in out):
        raise argparse.ArgumentTypeError(f"expects positive sizes in MB separated by commas, got {text!r}")
    return out


def time_all_reduce(t, warmup, iters):
    """The median over the timed calls of the slowest rank's seconds."""
    for _ in range(warmup):
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    seconds = torch.zeros(iters, dtype=torch.float64)
    for i in range(iters):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        seconds[i] = time.perf_counter() - start
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return statistics.median(sorted(seconds.tolist()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=10, help="timed calls per size (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per size (default 3)")
    parser.add_argument("--sizes-mb", type=sizes_mb, default=[1, 25, 100], help="default 1,25,100")
    args = parser.parse_args()
    if args.iters < 1 or args.warmup < 0:
        parser.error("--iters must be >= 1 and --warmup >= 0")
    if "RANK" not in os.environ:
        sys.exit("torch_allreduce.py: run it under torchrun (RANK, WORLD_SIZE, MASTER_ADDR are not set)")

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for mb in args.sizes_mb:
        n = max(1, int(mb * 1e6 / 4))
        nbytes = n * 4
        t = torch.full((n,), float(rank + 1), dtype=torch.float32)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)  # checked once, as loom-bench-allreduce does
        want = world * (world + 1) / 2
        if not (t[0].item() == t[n // 2].item() == t[-1].item() == want):
            sys.exit(f"torch_allreduce.py: rank {rank}: the check all_reduce gave {t[0].item()}, expected {want}")
        t.zero_()
        seconds = time_all_reduce(t, args.warmup, args.iters)
        algbw = nbytes / seconds / 1e9
        if rank == 0:
            print(json.dumps({"bench": "allreduce", "impl": "torch-gloo", "framework": f"pytorch-{torch.__version__}",
                              "op": "sum", "dtype": "float32", "bytes": nbytes, "ranks": world,
                              "iters": args.iters, "seconds": round(seconds, 9), "algbw_gbps": round(algbw, 4),
                              "busbw_gbps": round(algbw * 2 * (world - 1) / world, 4),
                              "load1": round(os.getloadavg()[0], 2)}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
