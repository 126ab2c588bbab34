#!/usr/bin/env python3
"""The torch_store CTest test: Loom's TCPStore and PyTorch's exchange keys over c10d's protocol.

  torch_store_test.py STORE_PEER

1. Loom serves (store_peer serve), PyTorch is the client;
2. PyTorch serves (its libuv server, then its older socket server), Loom is the client;
3. as 1, each side under the prefix torchrun's workers use ("/worker/attempt_0"): PyTorch
   through PrefixStore, Loom through TCPStore's prefix, as init_process_group sets it.
Each side sets a key the other reads, both add to one counter, and PyTorch's compare_set and
check run on Loom's server. Needs PyTorch 2.x: Debian's python3-torch is 1.13, whose store
speaks the protocol before VALIDATE; then the test is skipped (exit 77) and says so. Set
LOOM_TORCH_PYTHON to a Python with PyTorch 2.x (a venv: pip install torch) to run it.
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
if int(torch.__version__.split(".")[0]) < 2:
    print(f"torch_store: skipped: PyTorch {torch.__version__} at {sys.executable} speaks the pre-2.x TCPStore "
          "protocol; set LOOM_TORCH_PYTHON to a Python with PyTorch 2.x")
    sys.exit(SKIP)
from datetime import timedelta

peer = sys.argv[1]
T = timedelta(seconds=20)
print(f"PyTorch {torch.__version__} ({sys.executable})")


def outputs(proc):
    out, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        sys.exit(f"FAIL: store_peer exited with {proc.returncode}: {err}")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def exchange(store, proc):
    """PyTorch's side: the same steps as store_peer's."""
    store.set("torch", "world")
    assert store.get("loom") == b"hello", store.get("loom")
    n = store.add("counter", 3)
    assert n in (3, 5), n
    store.wait(["loom", "torch"], timedelta(seconds=10))
    assert store.check(["loom", "torch"])
    assert not store.check(["absent"])
    try:
        store.wait(["absent"], timedelta(milliseconds=200))
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
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=T)
    exchange(dist.PrefixStore(prefix, store) if prefix else store, proc)
    print(f"PASS: Loom serves, PyTorch joins{' under ' + prefix if prefix else ''}")


def torch_serves(use_libuv):
    store = dist.TCPStore("127.0.0.1", 0, None, True, timeout=T, wait_for_workers=False, use_libuv=use_libuv)
    proc = subprocess.Popen([peer, "join", str(store.port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    exchange(store, proc)
    print(f"PASS: PyTorch serves (use_libuv={use_libuv}), Loom joins")


loom_serves()
torch_serves(use_libuv=True)
torch_serves(use_libuv=False)
loom_serves("/worker/attempt_0")
print("PASS")
