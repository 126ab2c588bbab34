#!/usr/bin/python3
"""Golden fixtures for tests/test_rnn.cpp: nn.RNN (tanh, relu), nn.LSTM, nn.GRU, the cells
and pad_sequence, computed by PyTorch in float32.

Run once from the repository root with Debian's PyTorch (not the `python3` first on PATH):

    /usr/bin/python3 tests/golden/make_rnn_golden.py

Each layer fixture tests/golden/data/rnn_<mode>_<case>.safetensors holds
  param.<state_dict key>       the module's parameters under PyTorch's names
  input, h0, c0, lengths       (h0/c0 only when the case passes initial states, lengths
                               only for packed sequences)
  w_output, w_h_n, w_c_n       random loss weights:
                               loss = sum(output * w_output) + sum(h_n * w_h_n) + sum(c_n * w_c_n)
  output, h_n, c_n             the forward results (output padded with zeros past each
                               length, as pad_packed_sequence(total_length=T) returns it)
  grad.input, grad.h0, grad.c0, grad.param.<key>   d loss / d each of them
and metadata: the module's options and `param_names`, the state_dict keys in order.
Variable lengths run pack_padded_sequence(enforce_sorted=False) -> module ->
pad_packed_sequence(total_length=T).
"""
import json
import os
import struct

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def save_safetensors(path, tensors, metadata):
    """A minimal safetensors writer: 8-byte little-endian header length, JSON header,
    then the raw little-endian row-major data of each tensor, back to back."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # align the data section to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


# (mode, nonlinearity) -> torch module class
MODES = {
    "rnn_tanh": (nn.RNN, "tanh"),
    "rnn_relu": (nn.RNN, "relu"),
    "lstm": (nn.LSTM, None),
    "gru": (nn.GRU, None),
}

# name: num_layers, bidirectional, batch_first, bias, initial states, variable lengths,
#       (input, hidden, T, B)
CASES = {
    "uni_l2":             dict(L=2, bi=False, bf=False, bias=True,  state=True,  lengths=False, dims=(4, 5, 6, 3)),
    "bi_l2":              dict(L=2, bi=True,  bf=False, bias=True,  state=True,  lengths=False, dims=(3, 4, 5, 4)),
    "uni_l1_nostate":     dict(L=1, bi=False, bf=False, bias=True,  state=False, lengths=False, dims=(5, 6, 7, 3)),
    "bi_l2_batch_first":  dict(L=2, bi=True,  bf=True,  bias=True,  state=True,  lengths=False, dims=(4, 4, 6, 3)),
    "uni_l1_nobias":      dict(L=1, bi=False, bf=False, bias=False, state=True,  lengths=False, dims=(3, 5, 5, 4)),
    "uni_l2_lengths":     dict(L=2, bi=False, bf=False, bias=True,  state=True,  lengths=True,  dims=(4, 5, 6, 4)),
    "bi_l2_lengths":      dict(L=2, bi=True,  bf=False, bias=True,  state=True,  lengths=True,  dims=(3, 4, 7, 4)),
    "bi_l1_lengths_batch_first_nostate":
                          dict(L=1, bi=True,  bf=True,  bias=True,  state=False, lengths=True,  dims=(5, 4, 5, 3)),
}


def make_lengths(T, B, full):
    # Unsorted, with a length of 1 and something in between; the longest is T if `full`,
    # else shorter than T (the output is then zero-padded to T).
    base = [T - 2, T, 1, T - 1] if full else [T - 2, T - 1, 1, 2]
    return torch.tensor(base[:B], dtype=torch.int64)


def layer_case(mode, case_name, c):
    cls, nonlinearity = MODES[mode]
    I, H, T, B = c["dims"]
    kwargs = dict(num_layers=c["L"], bidirectional=c["bi"], batch_first=c["bf"], bias=c["bias"])
    if nonlinearity:
        kwargs["nonlinearity"] = nonlinearity
    m = cls(I, H, **kwargs)
    # Weights a bit larger than the default init, so the gates leave their linear range.
    with torch.no_grad():
        for p in m.parameters():
            p.uniform_(-0.6, 0.6)
    lstm = cls is nn.LSTM
    D = 2 if c["bi"] else 1
    x = torch.randn((B, T, I) if c["bf"] else (T, B, I), requires_grad=True)
    h0 = torch.randn(c["L"] * D, B, H, requires_grad=True) if c["state"] else None
    c0 = torch.randn(c["L"] * D, B, H, requires_grad=True) if c["state"] and lstm else None
    lengths = make_lengths(T, B, full=not c["bf"]) if c["lengths"] else None

    inp = x
    if lengths is not None:
        inp = pack_padded_sequence(x, lengths, batch_first=c["bf"], enforce_sorted=False)
    state = None
    if c["state"]:
        state = (h0, c0) if lstm else h0
    out, hn = m(inp, state)
    if lengths is not None:
        out, _ = pad_packed_sequence(out, batch_first=c["bf"], total_length=T)
    h_n, c_n = hn if lstm else (hn, None)

    w_out, w_h = torch.randn_like(out), torch.randn_like(h_n)
    loss = (out * w_out).sum() + (h_n * w_h).sum()
    w_c = None
    if lstm:
        w_c = torch.randn_like(c_n)
        loss = loss + (c_n * w_c).sum()
    loss.backward()

    t = {"input": x, "output": out, "h_n": h_n, "w_output": w_out, "w_h_n": w_h, "grad.input": x.grad}
    if lstm:
        t.update({"c_n": c_n, "w_c_n": w_c})
    if h0 is not None:
        t.update({"h0": h0, "grad.h0": h0.grad})
    if c0 is not None:
        t.update({"c0": c0, "grad.c0": c0.grad})
    if lengths is not None:
        t["lengths"] = lengths
    names = list(m.state_dict().keys())
    params = dict(m.named_parameters())
    for k in names:
        t["param." + k] = params[k]
        t["grad.param." + k] = params[k].grad
    meta = dict(mode=mode, input_size=I, hidden_size=H, num_layers=c["L"], bidirectional=int(c["bi"]),
                batch_first=int(c["bf"]), bias=int(c["bias"]), param_names=",".join(names))
    save_safetensors(os.path.join(OUT_DIR, f"rnn_{mode}_{case_name}.safetensors"), t, meta)


CELLS = {
    "rnn_tanh": lambda I, H, bias: nn.RNNCell(I, H, bias=bias, nonlinearity="tanh"),
    "rnn_relu": lambda I, H, bias: nn.RNNCell(I, H, bias=bias, nonlinearity="relu"),
    "lstm": lambda I, H, bias: nn.LSTMCell(I, H, bias=bias),
    "gru": lambda I, H, bias: nn.GRUCell(I, H, bias=bias),
}


def cell_case(mode, state, bias):
    I, H, B = 4, 5, 3
    m = CELLS[mode](I, H, bias)
    with torch.no_grad():
        for p in m.parameters():
            p.uniform_(-0.6, 0.6)
    lstm = mode == "lstm"
    x = torch.randn(B, I, requires_grad=True)
    h = torch.randn(B, H, requires_grad=True) if state else None
    c = torch.randn(B, H, requires_grad=True) if state and lstm else None
    if lstm:
        h1, c1 = m(x, (h, c)) if state else m(x)
    else:
        h1, c1 = (m(x, h) if state else m(x)), None
    w_h = torch.randn_like(h1)
    loss = (h1 * w_h).sum()
    t = {"input": x, "h_n": h1, "w_h_n": w_h}
    if lstm:
        w_c = torch.randn_like(c1)
        loss = loss + (c1 * w_c).sum()
        t.update({"c_n": c1, "w_c_n": w_c})
    loss.backward()
    t["grad.input"] = x.grad
    if h is not None:
        t.update({"h0": h, "grad.h0": h.grad})
    if c is not None:
        t.update({"c0": c, "grad.c0": c.grad})
    names = list(m.state_dict().keys())
    params = dict(m.named_parameters())
    for k in names:
        t["param." + k] = params[k]
        t["grad.param." + k] = params[k].grad
    meta = dict(mode=mode, input_size=I, hidden_size=H, bias=int(bias), param_names=",".join(names))
    name = f"rnncell_{mode}" + ("" if state else "_nostate") + ("" if bias else "_nobias")
    save_safetensors(os.path.join(OUT_DIR, name + ".safetensors"), t, meta)


def pad_sequence_case():
    seqs = [torch.randn(n, 2, 3, requires_grad=True) for n in (4, 2, 5, 1)]
    t = {f"seq{i}": s for i, s in enumerate(seqs)}
    for batch_first in (False, True):
        out = pad_sequence(seqs, batch_first=batch_first, padding_value=-1.5)
        w = torch.randn_like(out)
        (out * w).sum().backward()
        key = "batch_first" if batch_first else "time_first"
        t[f"{key}.output"] = out
        t[f"{key}.w"] = w
        for i, s in enumerate(seqs):
            t[f"{key}.grad.seq{i}"] = s.grad.clone()
            s.grad = None
    save_safetensors(os.path.join(OUT_DIR, "rnn_pad_sequence.safetensors"), t,
                     dict(num_sequences=len(seqs), padding_value=-1.5))


def main():
    torch.manual_seed(20240607)
    os.makedirs(OUT_DIR, exist_ok=True)
    for mode in MODES:
        for case_name, c in CASES.items():
            layer_case(mode, case_name, c)
    for mode in CELLS:
        cell_case(mode, state=True, bias=True)
        cell_case(mode, state=False, bias=True)
        cell_case(mode, state=True, bias=False)
    pad_sequence_case()


if __name__ == "__main__":
    main()
