#!/usr/bin/python3
"""Loom <-> PyTorch weights interop through safetensors files (the CTest test `torch_interop`).

    /usr/bin/python3 tests/interop/torch_interop.py --driver BUILD/interop_driver --workdir DIR

(a) Loom -> PyTorch: `interop_driver export DIR` trains a model a few steps and saves its
    weights with optim::save_weights plus the logits for fixed tokens; this script builds the
    same model in PyTorch, load_state_dict(strict=True) from Loom's file and checks the logits
    to 1e-5, and checks every dtype's values (float32/64/16, bfloat16, int64/32, bool).
(b) PyTorch -> Loom: this script trains the same model in PyTorch, saves weights, logits and
    dtype values; `interop_driver import DIR` loads them with optim::load_weights and checks.

Exits 77 (CTest's SKIP_RETURN_CODE) when torch cannot be imported. The python `safetensors`
package is not used: the small reader and writer below implement the format (an 8-byte
little-endian header length, a JSON header, then raw little-endian row-major data).
"""
import argparse
import json
import os
import struct
import subprocess
import sys

try:
    import torch
    from torch import nn
except ImportError as e:
    print(f"torch_interop: skipped: {sys.executable} cannot import torch ({e})")
    sys.exit(77)

VOCAB, EMBED, HIDDEN = 13, 8, 16
TOL = 1e-5

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
LOOM_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
              torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32", torch.bool: "bool"}


# ---- the format ------------------------------------------------------------------------------

def save_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous().reshape(-1)
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_safetensors(path):
    """Returns ({name: tensor}, metadata); checks that the tensors tile the data section."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors, end = {}, 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        begin, stop = e["data_offsets"]
        assert begin == end, f"{path}: {name} starts at {begin}, the previous tensor ends at {end}"
        dtype = DTYPES[e["dtype"]]
        numel = 1
        for s in e["shape"]:
            numel *= s
        assert stop - begin == numel * torch.empty((), dtype=dtype).element_size(), f"{path}: {name}: bad span"
        buf = bytearray(data[begin:stop])
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(e["shape"]).clone()
        end = stop
    assert end == len(data), f"{path}: {len(data) - end} trailing bytes"
    return tensors, metadata


# ---- the model (tiny_lm.h's TinyLM, as interop_driver.cpp builds it) -------------------------------

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, EMBED)
        self.dropout = nn.Dropout(0.2)
        self.lstm = nn.LSTM(EMBED, HIDDEN, num_layers=2, bidirectional=True, batch_first=True, dropout=0.1)
        self.fc = nn.Linear(2 * HIDDEN, VOCAB)

    def forward(self, tokens):  # (B, T) -> (B, T, V)
        return self.fc(self.lstm(self.dropout(self.embedding(tokens)))[0])


def known_values(dtype):
    """interop_driver.cpp's known_values: element i of a (3, 4) tensor."""
    i = torch.arange(12, dtype=torch.float64)
    if dtype == torch.int64:
        v = (i - 6) * 3e9
    elif dtype == torch.int32:
        v = (i - 6) * 1e5
    elif dtype == torch.bool:
        v = (torch.arange(12) % 3 == 0).double()
    else:
        v = (i - 6) * 0.375
    return v.to(dtype).reshape(3, 4)


# ---- checks -------------------------------------------------------------------------------------

def close(got, want, what):
    diff = (got.double() - want.double()).abs()
    bound = TOL * (1 + want.double().abs())
    bad = int((diff > bound).sum())
    print(f"torch_interop: {what}: max |diff| {diff.max().item():.3g} over {want.numel()} values")
    if bad:
        print(f"torch_interop: FAILED: {what}: {bad} values differ by more than {TOL}")
    return bad == 0


def run_driver(driver, mode, workdir):
    print(f"torch_interop: running {driver} {mode} {workdir}", flush=True)
    return subprocess.run([driver, mode, workdir]).returncode == 0


def loom_to_torch(driver, workdir):
    if not run_driver(driver, "export", workdir):
        print("torch_interop: FAILED: interop_driver export")
        return False
    state, _ = load_safetensors(os.path.join(workdir, "loom_weights.safetensors"))
    model = Model()
    model.load_state_dict(state, strict=True)  # raises on a missing, unexpected or mis-shaped key
    assert all(t.dtype == torch.float32 for t in state.values())
    model.eval()
    outputs, meta = load_safetensors(os.path.join(workdir, "loom_outputs.safetensors"))
    assert meta.get("producer") == "loom interop_driver", meta
    with torch.no_grad():
        logits = model(outputs["tokens"])
    ok = close(logits, outputs["logits"], "PyTorch logits from Loom's weights")

    dtypes, _ = load_safetensors(os.path.join(workdir, "loom_dtypes.safetensors"))
    for dtype, name in LOOM_NAMES.items():
        for suffix, want in (("", known_values(dtype)), (".t", known_values(dtype).t())):
            got = dtypes.get(f"dtype.{name}{suffix}")
            if got is None or got.dtype != dtype or not torch.equal(got, want):
                print(f"torch_interop: FAILED: dtype.{name}{suffix} from Loom: {got} != {want}")
                ok = False
    return ok


def torch_to_loom(driver, workdir):
    torch.manual_seed(7)
    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        tokens = torch.randint(0, VOCAB, (4, 7))
        targets = torch.randint(0, VOCAB, (4, 7))
        opt.zero_grad()
        nn.functional.cross_entropy(model(tokens).reshape(-1, VOCAB), targets.reshape(-1)).backward()
        opt.step()
    model.eval()
    tokens = torch.randint(0, VOCAB, (3, 6))
    with torch.no_grad():
        logits = model(tokens)
    save_safetensors(os.path.join(workdir, "torch_weights.safetensors"), model.state_dict(), {"format": "pt"})
    save_safetensors(os.path.join(workdir, "torch_outputs.safetensors"), {"tokens": tokens, "logits": logits})
    dtypes = {}
    for dtype, name in LOOM_NAMES.items():
        dtypes[f"dtype.{name}"] = known_values(dtype)
        dtypes[f"dtype.{name}.t"] = known_values(dtype).t()
    save_safetensors(os.path.join(workdir, "torch_dtypes.safetensors"), dtypes)
    if not run_driver(driver, "import", workdir):
        print("torch_interop: FAILED: interop_driver import")
        return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", required=True, help="the interop_driver executable")
    parser.add_argument("--workdir", required=True, help="a folder for the exchanged files")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(1)
    print(f"torch_interop: torch {torch.__version__}")
    ok = loom_to_torch(args.driver, args.workdir)
    ok = torch_to_loom(args.driver, args.workdir) and ok
    print("torch_interop: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
