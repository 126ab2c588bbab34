#!/usr/bin/python3
"""Golden fixture for tests/test_attention.cpp: torch.nn.functional.scaled_dot_product_attention
with every kind of mask, causal, L != S and head dims 1 to 128, computed by PyTorch 2.x.

Run once from the repository root with a PyTorch 2.x (the fixture was made with 2.15):

    python tests/golden/make_attention_golden.py

Inputs are drawn in float32; PyTorch then computes in float64 from those same values and
the results are stored rounded to float32 (the tests' 1e-5 is spent on Loom's rounding).

tests/golden/data/attention.safetensors, per case <c>:
  <c>.q, <c>.k, <c>.v, <c>.gy (a random upstream gradient), <c>.mask when the case has one
  (a bool mask stored as int64 0/1, <c>.mask_is_bool = 1), <c>.out and <c>.grad_q,
  <c>.grad_k, <c>.grad_v = d sum(out * gy) / d each; metadata <c>.causal and <c>.scale
  ('none' for the default).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_rnn_golden import OUT_DIR, save_safetensors  # noqa: E402  (the shared writer)


def f32(*shape):
    return (torch.rand(*shape) * 4 - 2).double()


def bool_mask(*shape, dead_row=None):
    m = torch.rand(*shape) < 0.7
    m[..., 0] = True
    if dead_row is not None:
        m[..., dead_row, :] = False  # a query row with every key masked: PyTorch gives 0
    return m


def float_mask(*shape):
    m = f32(*shape)
    m[torch.rand(*shape) < 0.3] = float("-inf")
    m[..., 0] = 0.5
    return m


# name: q, k, v shapes, mask (or None), causal, scale
CASES = {
    "plain": ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), None, False, None),
    "bool_ls": ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), bool_mask(5, 7, dead_row=2), False, None),
    "bool_b11s": ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), bool_mask(2, 1, 1, 7), False, None),
    "float_bhls": ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), float_mask(2, 3, 5, 7), False, None),
    "float_dead_row": ((1, 2, 5, 3), (1, 2, 7, 3), (1, 2, 7, 5),
                       float_mask(5, 7).index_fill_(0, torch.tensor([3]), float("-inf")), False, None),
    "causal_5x7": ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), None, True, None),
    "causal_7x5": ((2, 2, 7, 4), (2, 2, 5, 4), (2, 2, 5, 3), None, True, None),
    "scale": ((2, 2, 5, 4), (2, 2, 7, 4), (2, 2, 7, 4), None, False, 0.3),
    "three_d": ((3, 5, 4), (3, 7, 4), (3, 7, 2), bool_mask(3, 5, 7), False, None),
    "e1": ((2, 2, 5, 1), (2, 2, 7, 1), (2, 2, 7, 1), None, False, None),
    "e16": ((1, 2, 5, 16), (1, 2, 7, 16), (1, 2, 7, 16), bool_mask(5, 7), False, None),
    "e64": ((1, 2, 5, 64), (1, 2, 7, 64), (1, 2, 7, 32), None, True, None),
    "e128": ((1, 2, 3, 128), (1, 2, 4, 128), (1, 2, 4, 128), None, False, None),
}


def main():
    torch.manual_seed(13)
    d, meta = {}, {}
    for name, (qs, ks, vs, mask, causal, scale) in CASES.items():
        q, k, v = (f32(*s).requires_grad_() for s in (qs, ks, vs))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
        gy = f32(*out.shape)
        gq, gk, gv = torch.autograd.grad(out, (q, k, v), gy)
        tensors = dict(q=q, k=k, v=v, gy=gy, out=out, grad_q=gq, grad_k=gk, grad_v=gv)
        for key, t in tensors.items():
            d[f"{name}.{key}"] = t.detach().float()
        if mask is not None:
            d[f"{name}.mask"] = mask.long() if mask.dtype == torch.bool else mask.float()
            d[f"{name}.mask_is_bool"] = torch.tensor([int(mask.dtype == torch.bool)])
        meta[f"{name}.causal"] = int(causal)
        meta[f"{name}.scale"] = "none" if scale is None else repr(scale)
    meta["cases"] = ",".join(CASES)
    meta["torch"] = torch.__version__
    save_safetensors(os.path.join(OUT_DIR, "attention.safetensors"), d, meta)


if __name__ == "__main__":
    main()
