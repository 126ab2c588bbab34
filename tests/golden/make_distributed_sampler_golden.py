#!/usr/bin/env python3
"""Golden fixture for the DistributedSampler test of tests/test_distributed_sampler.cpp,
computed by PyTorch 2.x's torch.utils.data.distributed.DistributedSampler. Run once from
the repository root with a PyTorch 2.x virtual environment:

    /tmp/torch2/bin/python tests/golden/make_distributed_sampler_golden.py

tests/golden/data/distributed_sampler.json
  {"torch": version, "cases": [{"n", "num_replicas", "drop_last", "shuffle", "epoch",
  "order", "ranks": [[indices of rank 0], ...]}]}: for each case, each rank's indices for
  the epoch (len(sampler) of them) and "order", the whole dataset's order the sampler
  started from (0..n-1, or torch.randperm(n) seeded with seed + epoch when shuffling).
  Loom's shuffle is its own generator's, so the test checks shard(order) against the
  ranks' indices, and without shuffle the sampler's own indices too.
"""
import json
import pathlib

import torch
from torch.utils.data.distributed import DistributedSampler

OUT = pathlib.Path("tests/golden/data")
SEED = 7


def case(n, replicas, drop_last, shuffle, epoch):
    dataset = list(range(n))
    ranks = []
    for rank in range(replicas):
        s = DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=SEED,
                               drop_last=drop_last)
        s.set_epoch(epoch)
        idx = list(s)
        assert len(idx) == len(s)
        ranks.append(idx)
    if shuffle:
        g = torch.Generator()
        g.manual_seed(SEED + epoch)
        order = torch.randperm(n, generator=g).tolist()
    else:
        order = list(range(n))
    return {"n": n, "num_replicas": replicas, "drop_last": drop_last, "shuffle": shuffle, "epoch": epoch,
            "order": order, "ranks": ranks}


def main():
    cases = []
    for n in (0, 1, 2, 5, 10, 11, 17, 24):
        for replicas in (1, 2, 3, 4, 7):
            for drop_last in (False, True):
                cases.append(case(n, replicas, drop_last, False, 0))
                cases.append(case(n, replicas, drop_last, True, 3))
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "distributed_sampler.json", "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {OUT / 'distributed_sampler.json'}")


if __name__ == "__main__":
    main()
