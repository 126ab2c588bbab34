#!/usr/bin/env python3
"""The cluster_manifests CTest test: docs/cluster/'s PyTorchJob and TrainJob run as written.

Each manifest's pods are started here as local processes: its container's command and args
(the image's program mapped to the build's, --epochs and the paths made small and local, a
few flags added for a quick run), with the variables the operator gives each pod:
PyTorchJob's MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and PET_*, TrainJob's torch
runtime's PET_* alone. Both pods must end with the same weights_crc32c, rank 0 must say which
launcher it read, and the manifests must name the container and image as the operators and
docs/container.md expect.
  manifests_test.py FLAGSHIP DOCS_CLUSTER_DIR WORKDIR
Skipped (exit 77) without PyYAML (Debian's python3-yaml, in the test group).
"""
import json
import os
import shutil
import socket
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("cluster_manifests: skipped: no PyYAML (apt-get install python3-yaml)")
    sys.exit(77)

flagship, manifests, workdir = sys.argv[1:4]
shutil.rmtree(workdir, ignore_errors=True)
os.makedirs(workdir)
failures = []


def check(name, ok):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok:
        failures.append(name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_args(args, out):
    """The manifest's args with --epochs 1 and the paths under `out`, plus a quick run's flags."""
    local, i = [], 0
    replace = {"--epochs": "1", "--checkpoint": f"{out}/run.safetensors", "--out": f"{out}/out"}
    while i < len(args):
        if args[i] in replace:
            local += [args[i], replace[args[i]]]
            i += 2
        else:
            local.append(args[i])
            i += 1
    return local + ["--threads", "1", "--workers", "0", "--train-limit", "128", "--batch-size", "16"]


def run_pods(name, command, args, envs):
    """Starts one process per pod with its variables; returns each one's summary and rank 0's stderr."""
    check(f"{name}: the command is the image's program text_classification", command == ["text_classification"])
    out = os.path.join(workdir, name)
    procs = []
    for rank, env in enumerate(envs):
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_", "PET_", "SLURM_", "OMPI_", "TORCHELASTIC_"))}
        procs.append(subprocess.Popen([flagship] + local_args(args, out), env={**clean, **env},
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    errs = [p.communicate(timeout=120)[1] for p in procs]
    for rank, p in enumerate(procs):
        check(f"{name}: pod {rank} exits 0 (got {p.returncode})", p.returncode == 0)
        if p.returncode != 0:
            print(errs[rank][-2000:])
    crcs = []
    for rank in range(len(envs)):
        path = f"{out}/out{'/rank%d' % rank if rank else ''}/text_classification_summary.json"
        crcs.append(json.load(open(path))["metrics"]["weights_crc32c"] if os.path.exists(path) else None)
    print(f"{name}: weights_crc32c {crcs}")
    check(f"{name}: both pods end with the same weights", crcs[0] is not None and len(set(crcs)) == 1)
    return errs[0]


# PyTorchJob: a Master and a Worker; the operator's variables for each pod.
job = yaml.safe_load(open(os.path.join(manifests, "pytorchjob.yaml")))
check("pytorchjob: kind PyTorchJob, kubeflow.org/v1", (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PyTorchJob"))
specs = job["spec"]["pytorchReplicaSpecs"]
containers = [specs[r]["template"]["spec"]["containers"][0] for r in ("Master", "Worker")]
check("pytorchjob: one Master and one Worker", specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 1)
check("pytorchjob: containers named pytorch", all(c["name"] == "pytorch" for c in containers))
check("pytorchjob: the image docs/container.md builds", all(c["image"] in ("loom:cpu", "loom:cuda") for c in containers))
check("pytorchjob: Master and Worker run the same command",
      containers[0]["command"] == containers[1]["command"] and containers[0]["args"] == containers[1]["args"])
port = str(free_port())
envs = [{"MASTER_ADDR": "localhost", "MASTER_PORT": port, "WORLD_SIZE": "2", "RANK": str(r),
         "PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": str(r),
         "PET_MASTER_ADDR": "localhost", "PET_MASTER_PORT": port} for r in range(2)]
err = run_pods("pytorchjob", containers[0]["command"], containers[0]["args"], envs)
check("pytorchjob: rank 0 read RANK and WORLD_SIZE", "rank 0 (RANK) of 2 (WORLD_SIZE)" in err)

# TrainJob on the torch-distributed runtime: PET_* only, one process per node.
job = yaml.safe_load(open(os.path.join(manifests, "trainjob.yaml")))
check("trainjob: kind TrainJob, trainer.kubeflow.org/v1alpha1",
      (job["apiVersion"], job["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob"))
trainer = job["spec"]["trainer"]
check("trainjob: the image docs/container.md builds", trainer["image"] in ("loom:cpu", "loom:cuda"))
check("trainjob: one process per node (Loom reads PET_* itself)", trainer["numProcPerNode"] == 1)
port = str(free_port())
envs = [{"PET_NNODES": str(trainer["numNodes"]), "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": str(r),
         "PET_MASTER_ADDR": "localhost", "PET_MASTER_PORT": port} for r in range(trainer["numNodes"])]
err = run_pods("trainjob", trainer["command"], trainer["args"], envs)
check("trainjob: rank 0 read PET_NODE_RANK and PET_NNODES", "rank 0 (PET_NODE_RANK) of 2 (PET_NNODES)" in err)

sys.exit(1 if failures else 0)
