#!/usr/bin/env python3
"""PyTorch peer of loom-bench: the training-step workloads of docs/benchmarks.md.

    torch_workloads.py [--device cpu|cuda] [--steps N] [--threads N] [--amp bf16|fp16] [--flush-denormal]
                       [--cuda-graph] [--batch N] [--seq-len N] [WORKLOAD ...]

One JSON line per workload, with the fields of loom-bench: workload, framework, device,
threads, steps, ms_per_step (median of the measured steps after 2 warm-up steps; a step is
zero_grad, forward, loss, backward, Adam(lr=1e-3) step on one fixed random batch),
tokens_per_s, loss (of the last step), peak_mem_bytes (CUDA only: the caching allocator's
peak of allocated tensor bytes), peak_rss_bytes (the process's peak resident set so far),
load1 (1-minute load average at the end), amp (--amp: forward and loss under
torch.autocast(device, dtype), fp16 with a GradScaler, as shared/peers/torch_workloads.py), flush_denormal (--flush-denormal:
torch.set_flush_denormal(True), off by default), cuda_graph (--cuda-graph: the measured steps were
replays of a CUDA graph captured after the warm-up; not with fp16's GradScaler), batch and seq_len (the
workload's, or --batch / --seq-len: how cost grows, bench/scaling.sh) and, on the CPU, blas: the BLAS library torch
actually loaded. Debian's python3-torch takes whatever libblas.so.3 resolves to, which is
the netlib reference BLAS (~1 GFLOP/s) unless OpenBLAS is installed or put first on
LD_LIBRARY_PATH; bench/compare.sh arranges that. Threads: --threads, else OMP_NUM_THREADS,
else torch's default.

Run it with Debian's interpreter, /usr/bin/python3 (the python3 first on PATH has no torch).
"""
import argparse
import contextlib
import ctypes
import json
import os
import resource
import statistics
import sys
import time

import torch
from torch import nn
import torch.nn.functional as F

WARMUP_STEPS = 2


# ---- models (submodule names as loom-bench's) -----------------------------------------------

class SeedRNN(nn.Module):
    """RNN(10 -> 20, tanh), last step -> Linear(20, 1)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(10, 20, batch_first=True)
        self.fc = nn.Linear(20, 1)

    def forward(self, x):                        # (B, T, 10) -> (B, 1)
        output, _ = self.rnn(x)
        return self.fc(output[:, -1])


class EmbedMean(nn.Module):
    """Embedding(10000, 128), mean over time -> Linear(128, 2)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10000, 128)
        self.fc = nn.Linear(128, 2)

    def forward(self, tokens):                   # (B, T) -> (B, 2)
        return self.fc(self.emb(tokens).mean(1))


class LSTMClassifier(nn.Module):
    """Embedding(vocab, dim) -> LSTM(dim -> hidden, layers), last step -> Linear(hidden, 2)."""

    def __init__(self, vocab, dim, hidden, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=layers, batch_first=True)
        self.fc = nn.Linear(hidden, 2)

    def forward(self, tokens):                   # (B, T) -> (B, 2)
        output, _ = self.lstm(self.emb(tokens))
        return self.fc(output[:, -1])


class TransformerClassifier(nn.Module):
    """Embedding(20000, 256) + learned positions -> 2 post-norm encoder layers -> mean -> Linear."""

    def __init__(self, seq=128, d=256):
        super().__init__()
        self.emb = nn.Embedding(20000, d)
        self.pos = nn.Parameter(0.02 * torch.randn(seq, d))
        layer = nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=2)
        self.fc = nn.Linear(d, 2)

    def forward(self, tokens):                   # (B, T) -> (B, 2)
        return self.fc(self.enc(self.emb(tokens) + self.pos).mean(1))


def regression_batch(device, batch, seq):
    return torch.randn(batch, seq, 10, device=device), torch.randn(batch, 1, device=device)


def token_batch(vocab):
    def make(device, batch, seq):
        return (torch.randint(0, vocab, (batch, seq), device=device),
                torch.randint(0, 2, (batch,), device=device))
    return make


# name: (model of the sequence length, batch maker, loss, batch, seq, default steps)
WORKLOADS = {
    "seed-rnn": (lambda seq: SeedRNN(), regression_batch, F.mse_loss, 64, 10, 200),
    "embed-mean": (lambda seq: EmbedMean(), token_batch(10000), F.cross_entropy, 64, 256, 50),
    "lstm-sentiment": (lambda seq: LSTMClassifier(20000, 128, 256, 1), token_batch(20000),
                       F.cross_entropy, 64, 256, 5),
    "lstm-2x512": (lambda seq: LSTMClassifier(20000, 512, 512, 2), token_batch(20000),
                   F.cross_entropy, 64, 100, 3),
    "transformer-small": (lambda seq: TransformerClassifier(seq), token_batch(20000), F.cross_entropy, 32, 128, 10),
}


# ---- what the numbers depend on ------------------------------------------------------------

def loaded_blas():
    """The BLAS shared library in this process (after a matmul has run), with OpenBLAS's core."""
    torch.ones(2, 2) @ torch.ones(2, 2)
    try:
        with open("/proc/self/maps") as maps:
            mapped = {line.split()[-1] for line in maps}
    except OSError:
        return "unknown"
    paths = {os.path.realpath(p) for p in mapped if p.startswith("/") and ".so" in p}
    openblas = sorted(p for p in paths if "openblas" in os.path.basename(p))
    if openblas:
        try:
            lib = ctypes.CDLL(openblas[0])
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return "openblas " + lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            return "openblas"
    if any("mkl" in os.path.basename(p) for p in paths):
        return "mkl"
    if any("/blis" in p or "libblis" in p for p in paths):
        return "blis"
    if any(os.path.basename(p).startswith("libblas.so") for p in paths):
        return "reference (netlib)"
    return "unknown"


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


# ---- running -----------------------------------------------------------------------------------

def run(name, device, steps, flush_denormal, amp=None, cuda_graph=False, batch=0, seq=0):
    make_model, make_batch, loss_fn, default_batch, default_seq, default_steps = WORKLOADS[name]
    batch, seq = batch or default_batch, seq or default_seq
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    scaler = torch.amp.GradScaler(device.type) if amp == "fp16" else None
    steps = steps or default_steps
    torch.manual_seed(0)
    model = make_model(seq).to(device)
    # --cuda-graph: PyTorch's whole-network capture (torch.cuda.graph, capturable Adam, warm-up
    # on a side stream), as its CUDA graphs documentation shows. GradScaler.step reads the inf
    # flag on the host, so fp16 steps are not captured (the line says cuda_graph false).
    graphed = cuda_graph and device.type == "cuda" and scaler is None
    adam = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=graphed)
    x, y = make_batch(device, batch, seq)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    def step():
        adam.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext():
            loss = loss_fn(model(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(adam)
            scaler.update()
        else:
            loss.backward()
            adam.step()
        return loss

    warmup = WARMUP_STEPS
    if graphed:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = step()
        warmup = 0
    times = []
    for i in range(warmup + steps):
        sync(device)
        start = time.perf_counter()
        if graphed:
            graph.replay()
            loss = static_loss
        else:
            loss = step()
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    line = {"workload": name, "framework": f"pytorch-{torch.__version__}", "device": device.type,
            "threads": torch.get_num_threads(), "steps": steps, "ms_per_step": round(seconds * 1e3, 3),
            "tokens_per_s": round(batch * seq / seconds, 1), "loss": round(loss.item(), 5), "amp": amp or "off",
            "batch": batch, "seq_len": seq}
    if device.type == "cuda":
        line["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
    line["peak_rss_bytes"] = peak_rss_bytes()
    line["load1"] = round(os.getloadavg()[0], 2)
    line["flush_denormal"] = flush_denormal
    line["cuda_graph"] = graphed
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--steps", type=int, default=0, help="measured steps (default: per workload)")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (default: OMP_NUM_THREADS)")
    parser.add_argument("--amp", choices=["bf16", "fp16"],
                        help="forward and loss under torch.autocast (fp16 adds a GradScaler)")
    parser.add_argument("--flush-denormal", action="store_true",
                        help="flush denormal floats to zero (torch.set_flush_denormal(True))")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="replay each step as a CUDA graph (torch.cuda.graph, capturable Adam)")
    parser.add_argument("--batch", type=int, default=0, help="samples per step (default: per workload)")
    parser.add_argument("--seq-len", type=int, default=0, help="time steps per sample (default: per workload)")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD", help=", ".join(WORKLOADS))
    args = parser.parse_args()
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload {unknown[0]!r}; known: {', '.join(WORKLOADS)}")
    if min(args.steps, args.threads, args.batch, args.seq_len) < 0:
        parser.error("--steps, --threads, --batch and --seq-len must be positive")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"torch_workloads.py: --device cuda: this PyTorch ({torch.__version__}) has no usable CUDA device")
    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if threads:
        torch.set_num_threads(threads)
    if args.flush_denormal and not torch.set_flush_denormal(True):
        sys.exit("torch_workloads.py: --flush-denormal: this CPU does not support flushing denormals")
    device = torch.device(args.device)
    blas = loaded_blas() if device.type == "cpu" else None
    if blas == "reference (netlib)":
        print("torch_workloads.py: warning: torch is using the reference (netlib) BLAS, ~1 GFLOP/s; "
              "put OpenBLAS first (bench/compare.sh does) for a fair peer", file=sys.stderr)
    for name in args.workloads or WORKLOADS:
        run_args = (name, device, args.steps, args.flush_denormal, args.amp, args.cuda_graph, args.batch, args.seq_len)
        try:
            line = run(*run_args)
        except RuntimeError as e:
            # PyTorch's CPU LSTM runs on oneDNN, which has no bfloat16 LSTM primitive on CPUs
            # without AVX-512 (AVX2-only EPYCs): then its native LSTM runs, and the line says so.
            if not (args.amp and device.type == "cpu" and "primitive descriptor" in str(e)):
                raise
            print(f"torch_workloads.py: {name}: oneDNN has no {args.amp} primitive on this CPU; "
                  "running with torch.backends.mkldnn disabled", file=sys.stderr)
            with torch.backends.mkldnn.flags(enabled=False):
                line = run(*run_args)
            line["mkldnn"] = False
        if blas:
            line["blas"] = blas
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
