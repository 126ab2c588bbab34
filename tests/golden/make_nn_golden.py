#!/usr/bin/python3
"""Golden fixtures for tests/test_nn.cpp and tests/test_loss.cpp: Linear, Embedding,
LayerNorm, GELU, a small text classifier and every loss option combination, computed by
PyTorch.

Run once from the repository root with Debian's PyTorch (not the `python3` first on PATH):

    /usr/bin/python3 tests/golden/make_nn_golden.py

Inputs are drawn in float32; PyTorch then computes in float64 from those same values and
the results are stored rounded to float32 (a reference more accurate than PyTorch's own
float32 run, so the tests' 1e-5 tolerance is spent on Loom's rounding only).

tests/golden/data/nn_layers.safetensors, per case <c>:
  <c>.x (or <c>.indices), the parameters <c>.weight / <c>.bias, <c>.gy (a random upstream
  gradient), <c>.out = forward(x), and <c>.grad_x, <c>.grad_weight, <c>.grad_bias
  = d sum(out * gy) / d each.
    linear_{bias,nobias}_{2d,3d}        x (3, 4) or (2, 3, 4), weight (5, 4), bias (5)
    embedding_{nopad,pad0,pad3,padm1}   weight (10, 4), indices (2, 5) with repeats and
                                        every padding row; padm1 is padding_idx=-1
    layer_norm_{1d,2d}_{affine,plain}   normalized_shape (8,) on x (3, 8) or (2, 4) on
                                        x (3, 2, 4); eps 1e-5
    gelu_{none,tanh}                    x (24) in [-4, 4]
    textclf                             TextClassifier(20, 6, 3): param.<state_dict key>,
                                        indices (4, 5), target (4), loss = cross_entropy,
                                        grad.param.<key>
  metadata: print.<model> = str(model) for the models textclf, net, block and mlp (see
  below), keys.<model> = their state_dict keys in order, joined with ','.

tests/golden/data/nn_losses.safetensors, per case <c> (names built from the options so
the tests can loop over the same combinations):
  <c>.out, <c>.grad_input (and <c>.grad_target for the regression losses), where the
  gradient is of out.sum() for mean/sum and of sum(out * gy) for 'none'.
    cross_entropy_{nc,ncd}_{w0,w1}_{keep,m100,idx1}_{ls0,ls1}_{none,mean,sum}
    nll_loss_{nc,ncd}_{w0,w1}_{keep,m100,idx1}_{none,mean,sum}
      nc: input (6, 5); ncd: input (3, 5, 4); inputs <loss>_<shape>.input (log-probs for
      nll_loss), targets <loss>_<shape>.target_<ignore>, upstream <loss>_<shape>.gy;
      class weights class_weight (5); keep: default ignore_index, no target ignored;
      m100: default ignore_index (-100) with some targets -100; idx1: ignore_index=1 with
      some targets 1; ls1: label_smoothing 0.1.
    mse_loss_{r}, l1_loss_{r}                    on regression.input / .target / .gy (4, 3)
    smooth_l1_loss_{b1,b05,b0}_{r}               beta 1.0, 0.5, 0.0
    bce_with_logits_{pw0,pw1}_{w0,w1}_{r}        bce.input (4, 3) logits, bce.target in
                                                 [0, 1], bce.pos_weight (3), bce.weight (4, 1)
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_rnn_golden import OUT_DIR, save_safetensors  # noqa: E402  (the shared writer)

REDUCTIONS = ["none", "mean", "sum"]


def f32(*shape, low=-2.0, high=2.0):
    """Uniform float32 values, returned as float64 for the computation."""
    return (torch.rand(*shape) * (high - low) + low).double()


def grads(out, gy, tensors):
    """d sum(out * gy) / d each tensor (None where it gets no gradient)."""
    got = torch.autograd.grad(out, tensors, gy, allow_unused=True)
    return [g if g is not None else torch.zeros_like(t) for g, t in zip(got, tensors)]


def store(d, case, **tensors):
    for k, v in tensors.items():
        d[f"{case}.{k}"] = v.detach().float() if v.is_floating_point() else v.detach()


# ---- layers ---------------------------------------------------------------------------------
def linear_cases(d):
    weight, bias = f32(5, 4).requires_grad_(), f32(5).requires_grad_()
    for shape_name, shape in [("2d", (3, 4)), ("3d", (2, 3, 4))]:
        x = f32(*shape).requires_grad_()
        for has_bias in [True, False]:
            case = f"linear_{'bias' if has_bias else 'nobias'}_{shape_name}"
            out = F.linear(x, weight, bias if has_bias else None)
            gy = f32(*out.shape)
            gx, gw, gb = grads(out, gy, [x, weight, bias])
            store(d, case, x=x, weight=weight, gy=gy, out=out, grad_x=gx, grad_weight=gw)
            if has_bias:
                store(d, case, bias=bias, grad_bias=gb)


def embedding_cases(d):
    weight = f32(10, 4).requires_grad_()
    indices = torch.tensor([[1, 0, 3, 9, 1], [3, 3, 7, 0, 9]])  # repeats; rows 0, 3 and 9 appear
    for name, pad in [("nopad", None), ("pad0", 0), ("pad3", 3), ("padm1", -1)]:
        out = F.embedding(indices, weight, padding_idx=pad)
        gy = f32(*out.shape)
        (gw,) = grads(out, gy, [weight])
        store(d, f"embedding_{name}", weight=weight, indices=indices, gy=gy, out=out, grad_weight=gw)


def layer_norm_cases(d):
    for dims_name, norm_shape, x_shape in [("1d", (8,), (3, 8)), ("2d", (2, 4), (3, 2, 4))]:
        x = f32(*x_shape).requires_grad_()
        weight, bias = f32(*norm_shape).requires_grad_(), f32(*norm_shape).requires_grad_()
        for affine in [True, False]:
            case = f"layer_norm_{dims_name}_{'affine' if affine else 'plain'}"
            out = F.layer_norm(x, norm_shape, weight if affine else None, bias if affine else None, 1e-5)
            gy = f32(*out.shape)
            gx, gw, gb = grads(out, gy, [x, weight, bias])
            store(d, case, x=x, gy=gy, out=out, grad_x=gx)
            if affine:
                store(d, case, weight=weight, bias=bias, grad_weight=gw, grad_bias=gb)


def gelu_cases(d):
    x = f32(24, low=-4.0, high=4.0).requires_grad_()
    for approximate in ["none", "tanh"]:
        out = F.gelu(x, approximate=approximate)
        gy = f32(24)
        (gx,) = grads(out, gy, [x])
        store(d, f"gelu_{approximate}", x=x, gy=gy, out=out, grad_x=gx)


class TextClassifier(nn.Module):
    """The model of docs/nn.md and tests/test_nn.cpp."""

    def __init__(self, vocab, dim, classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x):
        return self.fc(self.embedding(x).mean(1))


class Net(nn.Module):
    """A model using every printable layer, nested two levels deep."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8, padding_idx=0)
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate="tanh"), nn.Dropout(0.1),
                                     nn.Linear(16, 8), nn.ReLU(), nn.GELU())
        self.norm = nn.LayerNorm(8)
        self.norm2d = nn.LayerNorm([2, 4], eps=1e-6, elementwise_affine=False)
        self.head = nn.Sequential(nn.Tanh(), nn.Sigmoid(), nn.Linear(8, 3, bias=False))


class Block(nn.Module):
    """Children and an extra_repr: the extra lines come first, one per line."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.act = nn.Tanh()

    def extra_repr(self):
        return "scale=2"


def text_classifier_case(d, meta):
    model = TextClassifier(20, 6, 3).double()
    indices = torch.randint(0, 20, (4, 5))
    target = torch.tensor([0, 2, 1, 2])
    loss = F.cross_entropy(model(indices), target)
    names = list(model.state_dict().keys())
    params = [p for _, p in model.named_parameters()]
    g = torch.autograd.grad(loss, params)
    for (name, p), gp in zip(model.named_parameters(), g):
        store(d, "textclf", **{f"param.{name}": p, f"grad.param.{name}": gp})
    store(d, "textclf", indices=indices, target=target, loss=loss)
    for name, model in [("textclf", model), ("net", Net()), ("block", Block()), ("mlp", nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))]:
        meta[f"print.{name}"] = str(model)
        meta[f"keys.{name}"] = ",".join(model.state_dict().keys())
    assert names == meta["keys.textclf"].split(",")


# ---- losses -----------------------------------------------------------------------------------
def class_loss_cases(d):
    class_weight = f32(5, low=0.2, high=2.0)
    d["class_weight"] = class_weight.float()
    for shape_name, shape in [("nc", (6, 5)), ("ncd", (3, 5, 4))]:
        target_shape = (shape[0],) + shape[2:]
        n = 1
        for s in target_shape:
            n *= s
        targets = {"keep": torch.randint(0, 5, target_shape)}
        for ign, value in [("m100", -100), ("idx1", 1)]:
            t = torch.randint(0, 5, (n,))
            if ign == "idx1":
                t[t == 1] = 2  # only the chosen positions hold the ignored class
            t[torch.tensor([0, n // 2, n - 1])] = value
            targets[ign] = t.view(target_shape)
        scores = f32(*shape, low=-3.0, high=3.0)
        for loss in ["cross_entropy", "nll_loss"]:
            base = f"{loss}_{shape_name}"
            x = (scores if loss == "cross_entropy" else scores.log_softmax(1)).detach().float().double()
            x.requires_grad_()
            gy = f32(*target_shape)
            store(d, base, input=x, gy=gy)
            for ign, t in targets.items():
                d[f"{base}.target_{ign}"] = t
                ignore_index = 1 if ign == "idx1" else -100
                for wname, w in [("w0", None), ("w1", class_weight)]:
                    for ls in ["ls0", "ls1"] if loss == "cross_entropy" else [None]:
                        for r in REDUCTIONS:
                            kw = dict(weight=w, ignore_index=ignore_index, reduction=r)
                            if ls is not None:
                                kw["label_smoothing"] = 0.1 if ls == "ls1" else 0.0
                            out = getattr(F, loss)(x, t, **kw)
                            (gx,) = grads(out, gy if r == "none" else torch.ones_like(out), [x])
                            case = "_".join(p for p in [base, wname, ign, ls, r] if p)
                            store(d, case, out=out, grad_input=gx)


def regression_loss_cases(d):
    x, y = f32(4, 3).requires_grad_(), f32(4, 3).requires_grad_()
    gy = f32(4, 3)
    store(d, "regression", input=x, target=y, gy=gy)
    fns = [("mse_loss", F.mse_loss, {})] + [("l1_loss", F.l1_loss, {})] + [
        (f"smooth_l1_loss_{name}", F.smooth_l1_loss, {"beta": beta})
        for name, beta in [("b1", 1.0), ("b05", 0.5), ("b0", 0.0)]]
    for name, fn, kw in fns:
        for r in REDUCTIONS:
            out = fn(x, y, reduction=r, **kw)
            gx, gt = grads(out, gy if r == "none" else torch.ones_like(out), [x, y])
            store(d, f"{name}_{r}", out=out, grad_input=gx, grad_target=gt)

    x, y = f32(4, 3, low=-4.0, high=4.0).requires_grad_(), f32(4, 3, low=0.0, high=1.0).requires_grad_()
    pos_weight, weight = f32(3, low=0.5, high=3.0), f32(4, 1, low=0.2, high=2.0)
    store(d, "bce", input=x, target=y, pos_weight=pos_weight, weight=weight, gy=gy)
    for pw in ["pw0", "pw1"]:
        for w in ["w0", "w1"]:
            for r in REDUCTIONS:
                out = F.binary_cross_entropy_with_logits(x, y, weight if w == "w1" else None, reduction=r,
                                                         pos_weight=pos_weight if pw == "pw1" else None)
                gx, gt = grads(out, gy if r == "none" else torch.ones_like(out), [x, y])
                store(d, f"bce_with_logits_{pw}_{w}_{r}", out=out, grad_input=gx, grad_target=gt)


def main():
    torch.manual_seed(0)
    os.makedirs(OUT_DIR, exist_ok=True)
    meta = {"generator": "tests/golden/make_nn_golden.py", "torch": torch.__version__}
    layers, losses = {}, {}
    linear_cases(layers)
    embedding_cases(layers)
    layer_norm_cases(layers)
    gelu_cases(layers)
    layer_meta = dict(meta)
    text_classifier_case(layers, layer_meta)
    class_loss_cases(losses)
    regression_loss_cases(losses)
    for name, tensors, m in [("nn_layers", layers, layer_meta), ("nn_losses", losses, meta)]:
        path = os.path.join(OUT_DIR, name + ".safetensors")
        save_safetensors(path, tensors, m)
        print(f"{path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
