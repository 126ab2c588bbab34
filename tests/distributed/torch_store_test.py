#!/usr/bin/env python3
"""The torch_store CTest test: Loom's TCPStore and PyTorch's exchange keys over c10d's protocol.

  torch_store_test.py STORE_PEER

1. Loom serves (store_peer serve), PyTorch is the client;
2. PyTorch serves (2.x: its libuv server, then its older socket server; 1.13: its one
   server), Loom is the client;
3. as 1, each side under the prefix torchrun's workers use ("/worker/attempt_0"): PyTorch
   through PrefixStore, Loom through TCPStore's prefix, as init_process_group sets it.
Each side sets a key the other reads, both add to one counter, and PyTorch's compare_set and
check (2.x; 1.13's Python has no check) run on Loom's server. Runs under LOOM_TORCH_PYTHON,
else /usr/bin/python3 (Debian's python3-torch 1.13, which speaks the dialect before VALIDATE:
Note [c10d dialects]); skipped (exit 77), saying why, where PyTorch is not installed.
"""
import os, subprocess, sys

SKIP = 77
py = os.environ.get("LOOM_TORCH_PYTHON")
if py and os.path.realpath(sys.executable) != os.path.realpath(py) and not os.environ.get("LOOM_TORCH_REEXEC"):
    os.environ["LOOM_TORCH_REEXEC"] = "1"
    os.execv(py, [py] + sys.argv)
try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    print(f"torch_store: skipped: PyTorch is not installed for {sys.executable} ({e})")
    sys.exit(SKIP)
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
from datetime import timedelta

peer = sys.argv[1]
T = timedelta(seconds=20)
print(f"PyTorch {torch.__version__} ({sys.executable})")


def outputs(proc):
    out, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        sys.exit(f"FAIL: store_peer exited with {proc.returncode}: {err}")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def exchange(store, proc, fresh):
    """PyTorch's side: the same steps as store_peer's; fresh() is another client of the store."""
    store.set("torch", "world")
    assert store.get("loom") == b"hello", store.get("loom")
    n = store.add("counter", 3)
    assert n in (3, 5), n
    store.wait(["loom", "torch"], timedelta(seconds=10))
    if TORCH2:
        assert store.check(["loom", "torch"])
        assert not store.check(["absent"])
    # 1.13's client leaves a timed-out WAIT's answer pending on its connection: the timeout
    # runs on a client of its own there.
    waiter = store if TORCH2 else fresh()
    try:
        waiter.wait(["absent"], timedelta(milliseconds=200))
        sys.exit("FAIL: waiting for an absent key did not time out")
    except Exception as e:  # DistStoreError: a timeout, then the store still works
        assert "timeout" in str(e).lower() or "timed out" in str(e).lower(), e
    assert store.compare_set("cas", "", "first") == b"first"
    assert store.compare_set("cas", "first", "second") == b"second"
    assert store.compare_set("cas", "wrong", "third") == b"second"
    store.wait(["ready"])
    assert store.get("counter") == b"5", store.get("counter")
    store.set("done", "1")
    got = outputs(proc)
    assert got == {"torch": "world", "counter": got["counter"], "check": "1"}, got
    assert int(got["counter"]) in (2, 5), got


def loom_serves(prefix=None):
    proc = subprocess.Popen([peer, "serve"] + ([prefix + "/"] if prefix else []), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline().split()[1])
    client = lambda: dist.TCPStore("127.0.0.1", port, is_master=False, timeout=T)
    store = client()
    fresh = lambda: dist.PrefixStore(prefix, client()) if prefix else client()
    exchange(dist.PrefixStore(prefix, store) if prefix else store, proc, fresh)
    print(f"PASS: Loom serves, PyTorch joins{' under ' + prefix if prefix else ''}")


def torch_serves(**backend):
    store = dist.TCPStore("127.0.0.1", 0, None, True, timeout=T, wait_for_workers=False, **backend)
    proc = subprocess.Popen([peer, "join", str(store.port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    exchange(store, proc, lambda: dist.TCPStore("127.0.0.1", store.port, is_master=False, timeout=T))
    print(f"PASS: PyTorch serves ({backend or 'its one server'}), Loom joins")


loom_serves()
if TORCH2:
    torch_serves(use_libuv=True)
    torch_serves(use_libuv=False)
else:
    torch_serves()
loom_serves("/worker/attempt_0")
print("PASS")
