#!/usr/bin/python3
"""Golden fixture for tests/test_transformer.cpp: torch.nn.MultiheadAttention,
TransformerEncoderLayer and TransformerEncoder computed by PyTorch 2.x, forward and every
gradient, from state dicts PyTorch made (so the test also loads PyTorch's state dicts).

Run once from the repository root with a PyTorch 2.x (the fixture was made with 2.15):

    python tests/golden/make_transformer_golden.py

Parameters and inputs are drawn as float32 values; PyTorch computes in float64 from them.
tests/golden/data/transformer.safetensors, per case <c>:
  <c>.p.<name>  the module's state dict (PyTorch's names)
  <c>.query/.key/.value (attention) or <c>.src (encoder), <c>.key_padding_mask and
  <c>.attn_mask when given (bool masks as int64 0/1, with metadata <c>.<mask>_is_bool),
  <c>.gy (and <c>.gw for returned weights): random upstream gradients;
  <c>.out, <c>.weights, and <c>.g.<input> / <c>.g.p.<name>: the gradients of
  sum(out * gy) + sum(weights * gw).
Metadata holds each case's options.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_rnn_golden import OUT_DIR, save_safetensors  # noqa: E402  (the shared writer)

torch.manual_seed(2026)
tensors, meta = {}, {}


def f32(*shape):
    return (torch.rand(*shape) * 2 - 1).float().double()


def randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(f32(*p.shape) * 0.5)


def store_mask(c, name, m):
    if m is None:
        return
    meta[f"{c}.{name}_is_bool"] = int(m.dtype == torch.bool)
    tensors[f"{c}.{name}"] = m.long() if m.dtype == torch.bool else m


def record(c, module, inputs, call, options):
    """inputs: name -> tensor (float64, requires grad); call(module, inputs) -> (out, weights)."""
    module.double()
    randomize(module)
    for k, v in module.state_dict().items():
        tensors[f"{c}.p.{k}"] = v.clone()
    out, weights = call(module, inputs)
    gy = f32(*out.shape)
    loss = (out * gy).sum()
    tensors[f"{c}.gy"], tensors[f"{c}.out"] = gy, out.detach()
    if weights is not None:
        gw = f32(*weights.shape)
        loss = loss + (weights * gw).sum()
        tensors[f"{c}.gw"], tensors[f"{c}.weights"] = gw, weights.detach()
    loss.backward()
    for k, v in inputs.items():
        tensors[f"{c}.{k}"] = v.detach()
        tensors[f"{c}.g.{k}"] = v.grad
    for k, p in module.named_parameters():
        tensors[f"{c}.g.p.{k}"] = p.grad
    for k, v in options.items():
        meta[f"{c}.{k}"] = v


def leaf(*shape):
    return f32(*shape).requires_grad_(True)


def padding(n, s, pad):  # (N, S) bool, true = pad: the last pad[i] keys of sample i
    m = torch.zeros(n, s, dtype=torch.bool)
    for i, p in enumerate(pad):
        if p:
            m[i, s - p:] = True
    return m


def causal_bool(t):
    return torch.triu(torch.ones(t, t, dtype=torch.bool), 1)


# ---- MultiheadAttention -----------------------------------------------------------------
def mha_case(c, embed_dim, num_heads, batch_first, n, l, s, kdim=None, vdim=None, bias=True, kpm=None,
             attn_mask=None, need_weights=True, average=True, self_attention=False):
    m = nn.MultiheadAttention(embed_dim, num_heads, bias=bias, batch_first=batch_first, kdim=kdim, vdim=vdim)
    shape = (lambda t, d: (n, t, d)) if batch_first else (lambda t, d: (t, n, d))
    if self_attention:
        inputs = {"query": leaf(*shape(l, embed_dim))}
    else:
        inputs = {"query": leaf(*shape(l, embed_dim)), "key": leaf(*shape(s, kdim or embed_dim)),
                  "value": leaf(*shape(s, vdim or embed_dim))}
    store_mask(c, "key_padding_mask", kpm)
    store_mask(c, "attn_mask", attn_mask)

    def call(m, x):
        q = x["query"]
        k, v = (q, q) if self_attention else (x["key"], x["value"])
        return m(q, k, v, key_padding_mask=kpm, need_weights=need_weights, attn_mask=attn_mask,
                 average_attn_weights=average)

    record(c, m, inputs, call, dict(kind="mha", embed_dim=embed_dim, num_heads=num_heads,
                                    batch_first=int(batch_first), kdim=kdim or 0, vdim=vdim or 0, bias=int(bias),
                                    need_weights=int(need_weights), average=int(average),
                                    self_attention=int(self_attention)))


mha_case("mha_self", 8, 2, True, 2, 5, 5, kpm=padding(2, 5, [0, 2]), self_attention=True)
mha_case("mha_cross_kvdim", 8, 4, False, 2, 5, 7, kdim=6, vdim=4, attn_mask=f32(5, 7), average=False)
mha_case("mha_causal_sdpa", 12, 3, True, 3, 6, 6, kpm=padding(3, 6, [1, 0, 3]), attn_mask=causal_bool(6),
         need_weights=False, self_attention=True)
mha_case("mha_per_head_mask_no_bias", 8, 2, False, 2, 4, 6, bias=False, attn_mask=f32(4, 4, 6), need_weights=False)
mha_case("mha_head_dim_1", 4, 4, True, 2, 3, 5, kpm=padding(2, 5, [1, 2]))


# ---- encoder layers and the encoder -------------------------------------------------------
def encoder_case(c, d_model, nhead, ff, batch_first, norm_first, activation, n, t, layers=0, final_norm=False,
                 bias=True, kpm=None, mask=None):
    layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=ff, dropout=0.0, activation=activation,
                                       batch_first=batch_first, norm_first=norm_first, bias=bias)
    if layers:
        module = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d_model) if final_norm else None,
                                       enable_nested_tensor=False)
    else:
        module = layer
    inputs = {"src": leaf(*((n, t, d_model) if batch_first else (t, n, d_model)))}
    store_mask(c, "key_padding_mask", kpm)
    store_mask(c, "attn_mask", mask)
    call = lambda m, x: (m(x["src"], mask, kpm), None)  # noqa: E731
    record(c, module, inputs, call, dict(kind="encoder", d_model=d_model, nhead=nhead, dim_feedforward=ff,
                                         batch_first=int(batch_first), norm_first=int(norm_first),
                                         activation=activation, layers=layers, final_norm=int(final_norm),
                                         bias=int(bias)))


encoder_case("enc_post_relu", 8, 2, 16, True, False, "relu", 2, 5, kpm=padding(2, 5, [0, 2]))
encoder_case("enc_pre_gelu_causal", 8, 4, 12, False, True, "gelu", 3, 4,
             mask=nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64))
encoder_case("enc_no_bias", 6, 2, 10, True, False, "gelu", 2, 3, bias=False)
encoder_case("encoder_2_layers_norm", 8, 2, 16, True, True, "relu", 2, 6, layers=2, final_norm=True,
             kpm=padding(2, 6, [3, 0]))
encoder_case("encoder_3_layers_post", 8, 2, 16, False, False, "relu", 2, 4, layers=3)

meta["torch_version"] = torch.__version__
path = os.path.join(OUT_DIR, "transformer.safetensors")
save_safetensors(path, tensors, meta)
print(f"wrote {path}: {len(tensors)} tensors")
