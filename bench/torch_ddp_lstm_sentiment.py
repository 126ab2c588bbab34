#!/usr/bin/env python3
"""PyTorch peer of Loom's data-parallel lstm-sentiment: DistributedDataParallel over gloo.

    torchrun --standalone --nproc-per-node N bench/torch_ddp_lstm_sentiment.py [--steps S] [--threads T]
             [--flush-denormal] [--workloads-py PATH]

The lstm-sentiment workload of shared/workloads.md (Embedding(20000,128) -> LSTM(128->256) ->
last step -> Linear(256,2), cross entropy, Adam(lr=1e-3)), taken from torch_workloads.py
(default: bench/torch_workloads.py beside this file; --workloads-py names another with the
same WORKLOADS table, e.g. shared/peers/torch_workloads.py, which defines the same model and
batch), wrapped in DistributedDataParallel with the gloo backend and its default buckets.
Every rank has its own fixed random batch of 64 x 256 tokens (rank 0's is the one
torch_workloads.py uses) and T intra-op threads (default 1). One step = zero_grad, forward,
loss, backward (gradients all-reduced by DDP), Adam step; after 2 warm-up steps, S steps are
timed (default 5), a step's time is the slowest rank's, and rank 0 prints one JSON line with
the median: workload, bench, impl, framework, device, ranks, threads, per_rank_batch, seq,
steps, seconds_per_step, ms_per_step, samples_per_s (all ranks: ranks x 64 / seconds),
tokens_per_s, loss (rank 0's, last step), flush_denormal (--flush-denormal:
torch.set_flush_denormal(True), as torch_workloads.py), load1.

With --nproc-per-node 1 it is the 1-rank baseline; the scaling of N ranks is
samples_per_s(N) / samples_per_s(1), ideally N. Use PyTorch 2.x from PyPI (/tmp/torch2/bin/torchrun).
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

WORKLOAD = "lstm-sentiment"
WARMUP_STEPS = 2


def load_workloads(path):
    spec = importlib.util.spec_from_file_location("torch_workloads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WORKLOADS


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank (default 1)")
    parser.add_argument("--flush-denormal", action="store_true",
                        help="flush denormal floats to zero (torch.set_flush_denormal(True))")
    parser.add_argument("--workloads-py", default=os.path.join(here, "torch_workloads.py"),
                        help="the torch_workloads.py whose lstm-sentiment is run (default: the one beside this file)")
    args = parser.parse_args()
    if args.steps < 1 or args.threads < 1:
        parser.error("--steps and --threads must be >= 1")
    if "RANK" not in os.environ:
        sys.exit("torch_ddp_lstm_sentiment.py: run it under torchrun (RANK, WORLD_SIZE, MASTER_ADDR are not set)")

    torch.set_num_threads(args.threads)
    if args.flush_denormal and not torch.set_flush_denormal(True):
        sys.exit("torch_ddp_lstm_sentiment.py: --flush-denormal: this CPU does not support flushing denormals")
    make_model, make_batch, loss_fn, batch, seq, _ = load_workloads(args.workloads_py)[WORKLOAD]
    if isinstance(loss_fn, type):  # shared/peers' table holds the loss class, bench/'s the function
        loss_fn = loss_fn()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    module = make_model()
    if rank:
        torch.manual_seed(1000 + rank)  # each rank its own batch; rank 0's is torch_workloads.py's
    x, y = make_batch(torch.device("cpu"))
    model = DistributedDataParallel(module)  # broadcasts rank 0's weights
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)

    seconds = torch.zeros(args.steps, dtype=torch.float64)
    for i in range(WARMUP_STEPS + args.steps):
        start = time.perf_counter()
        adam.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()  # returns once DDP's bucket all-reduces are done
        adam.step()
        if i >= WARMUP_STEPS:
            seconds[i - WARMUP_STEPS] = time.perf_counter() - start
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # a step ends when its slowest rank's does
    step = statistics.median(seconds.tolist())
    if rank == 0:
        print(json.dumps({"workload": WORKLOAD, "bench": "ddp", "impl": "torch-ddp-gloo",
                          "framework": f"pytorch-{torch.__version__}", "device": "cpu", "ranks": world,
                          "threads": torch.get_num_threads(), "per_rank_batch": batch, "seq": seq,
                          "steps": args.steps, "seconds_per_step": round(step, 6),
                          "ms_per_step": round(step * 1e3, 3),
                          "samples_per_s": round(world * batch / step, 2),
                          "tokens_per_s": round(world * batch * seq / step, 1),
                          "loss": round(loss.item(), 5), "flush_denormal": args.flush_denormal,
                          "load1": round(os.getloadavg()[0], 2)}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
