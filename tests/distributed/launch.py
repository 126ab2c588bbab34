#!/usr/bin/env python3
"""Starts a command as N ranks on this machine, PyTorch-style, for the distributed tests.

  launch.py --nproc N [--timeout SECONDS] -- COMMAND [ARGS...]

Each process gets MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port, picked here), RANK,
LOCAL_RANK (= RANK) and WORLD_SIZE. Exits 0 when every rank exits 0; as soon as one
fails, or when the timeout passes, kills the others (each rank runs in its own process
group, which is killed whole) and exits 1.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.nproc < 1:
        parser.error("need --nproc >= 1 and a command")

    port = free_port()
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE=str(args.nproc))
        procs.append(subprocess.Popen(command, env=env, start_new_session=True))
    print(f"launch: {args.nproc} ranks of {command[0]} on 127.0.0.1:{port}", flush=True)

    deadline = time.monotonic() + args.timeout
    failed = None
    while failed is None and any(p.poll() is None for p in procs):
        for rank, p in enumerate(procs):
            if p.poll() not in (None, 0):
                failed = f"rank {rank} exited with {p.returncode}"
        if failed is None and time.monotonic() > deadline:
            failed = f"timed out after {args.timeout:g} s"
        time.sleep(0.05)
    if failed is None:
        for rank, p in enumerate(procs):
            if p.returncode != 0:
                failed = f"rank {rank} exited with {p.returncode}"
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if failed:
        print(f"launch: FAILED: {failed}", flush=True)
        return 1
    print(f"launch: all {args.nproc} ranks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
