#!/usr/bin/env python3
"""Golden fixtures for tests/test_amp.cpp, computed by PyTorch 2.x (autocast's lists changed
since Debian's 1.13, which is not the spec). Run once from the repository root with a
PyTorch 2.x virtual environment:

    python3 -m venv /tmp/torch2 && /tmp/torch2/bin/pip install torch numpy
    /tmp/torch2/bin/python tests/golden/make_amp_golden.py

tests/golden/data/autocast_cpu.json
  {"torch": version, "ops": {case: dtype}}: the output dtype of each case under
  torch.autocast("cpu", dtype=torch.bfloat16), run here. A case names the op and the
  dtypes of its floating inputs ("softmax(bf16)"); Loom's test runs the same case.
tests/golden/data/autocast_cuda.json
  {"torch": version, "lower_precision": [...], "float32": [...]}: the ops of PyTorch's CUDA
  lists (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE in the
  installed ATen/autocast_mode.h), read from the header: CUDA autocast cannot run without a
  GPU. Loom's test checks its policy table and, on the emulated cuda:0, the output dtypes.
tests/golden/data/grad_scaler.json
  A GradScaler schedule: a linear model trained with SGD for 12 steps, with the gradients
  of some steps made inf or NaN, growth_interval 3; per step the scale after update(),
  whether the optimizer stepped, and the final parameters.
"""
import json
import pathlib
import re

import torch
import torch.nn.functional as F

OUT = pathlib.Path("tests/golden/data")
bf16, f32 = torch.bfloat16, torch.float32
NAMES = {torch.bfloat16: "bf16", torch.float32: "f32", torch.float16: "f16", torch.float64: "f64"}


def autocast_cpu():
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    w = torch.randn(5, 6, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    t = torch.randint(0, 6, (4,))
    xb = x.bfloat16()
    cases = {
        "matmul(f32,f32)": lambda: x @ w.t(),
        "matmul(bf16,f32)": lambda: xb @ w.t(),
        "matmul(f64,f64)": lambda: x.double() @ w.double().t(),
        "mm(f32,f32)": lambda: torch.mm(x, w.t()),
        "bmm(f32,f32)": lambda: torch.bmm(x.unsqueeze(0), w.t().unsqueeze(0)),
        "baddbmm(f32,f32,f32)": lambda: torch.baddbmm(b, x.unsqueeze(0), w.t().unsqueeze(0)),
        "addmm(f32,f32,f32)": lambda: torch.addmm(b, x, w.t()),
        "linear(f32,f32,f32)": lambda: F.linear(x, w, b),
        "softmax(f32)": lambda: torch.softmax(x, 1),
        "softmax(bf16)": lambda: torch.softmax(xb, 1),
        "log_softmax(bf16)": lambda: torch.log_softmax(xb, 1),
        "layer_norm(bf16,f32,f32)": lambda: F.layer_norm(xb, (6,), torch.ones(6), torch.zeros(6)),
        "exp(bf16)": lambda: xb.exp(),
        "log(bf16)": lambda: xb.abs().log(),
        "rsqrt(bf16)": lambda: xb.abs().rsqrt(),
        "pow(bf16)": lambda: xb.pow(2),
        "tanh(bf16)": lambda: xb.tanh(),
        "sum(bf16)": lambda: xb.sum(),
        "sum_dim(bf16)": lambda: xb.sum(1),
        "mean(bf16)": lambda: xb.mean(),
        "cumsum(bf16)": lambda: xb.cumsum(1),
        "logsumexp(bf16)": lambda: xb.logsumexp(1),
        "add(f32,bf16)": lambda: x + xb,
        "mul(bf16,bf16)": lambda: xb * xb,
        "cat(f32,bf16)": lambda: torch.cat([x, xb]),
        "stack(f32,bf16)": lambda: torch.stack([x, xb]),
        "where(f32,bf16)": lambda: torch.where(x > 0, x, xb),
        "cross_entropy(bf16)": lambda: F.cross_entropy(xb, t),
        "nll_loss(bf16)": lambda: F.nll_loss(xb.log_softmax(1), t),
        "mse_loss(bf16,f32)": lambda: F.mse_loss(xb, x),
        "l1_loss(bf16,f32)": lambda: F.l1_loss(xb, x),
        "smooth_l1_loss(bf16,f32)": lambda: F.smooth_l1_loss(xb, x),
        "binary_cross_entropy_with_logits(bf16,f32)": lambda: F.binary_cross_entropy_with_logits(xb, x.sigmoid()),
        "embedding(f32)": lambda: F.embedding(t, w.t()),
        "dropout(bf16)": lambda: F.dropout(xb, 0.5),
        "relu(bf16)": lambda: xb.relu(),
        "gelu(bf16)": lambda: F.gelu(xb),
        "max(bf16)": lambda: xb.max(),
        "var(bf16)": lambda: xb.var(1),
    }
    # The recurrent layers and cells: (T 4, B 1, I 6) through hidden size 5.
    seq = x.unsqueeze(1)
    lstm, gru = torch.nn.LSTM(6, 5), torch.nn.GRU(6, 5)
    rnn_tanh, rnn_relu = torch.nn.RNN(6, 5), torch.nn.RNN(6, 5, nonlinearity="relu")
    lstm_cell, gru_cell, rnn_cell = torch.nn.LSTMCell(6, 5), torch.nn.GRUCell(6, 5), torch.nn.RNNCell(6, 5)
    cases.update({
        "lstm(f32)": lambda: lstm(seq)[0],
        "lstm_c_n(f32)": lambda: lstm(seq)[1][1],
        "rnn_tanh(f32)": lambda: rnn_tanh(seq)[0],
        "rnn_relu(f32)": lambda: rnn_relu(seq)[0],
        "gru(f32)": lambda: gru(seq)[0],
        "gru(bf16)": lambda: gru(seq.bfloat16())[0],
        "lstm_cell(f32)": lambda: lstm_cell(x)[0],
        "lstm_cell(bf16)": lambda: lstm_cell(xb)[1],
        "gru_cell(f32)": lambda: gru_cell(x),
        "gru_cell(bf16)": lambda: gru_cell(xb),
        "rnn_cell(f32)": lambda: rnn_cell(x),
    })
    ops = {}
    with torch.autocast("cpu", dtype=bf16):
        for name, f in cases.items():
            ops[name] = NAMES[f().dtype]
    # The gradients of float32 parameters arrive in float32.
    with torch.autocast("cpu", dtype=bf16):
        loss = F.linear(x, w, b).float().pow(2).sum()
    loss.backward()
    ops["linear_weight_grad"] = NAMES[w.grad.dtype]
    return {"torch": torch.__version__, "ops": ops}


def autocast_cuda():
    header = pathlib.Path(torch.__file__).parent / "include/ATen/autocast_mode.h"
    text = header.read_text()

    def listed(macro):
        body = re.search(r"#define " + macro + r"\(_\)(.*?)\n\n", text, re.S).group(1)
        return sorted(set(re.findall(r"_\((\w+)", body)))

    return {
        "torch": torch.__version__,
        "lower_precision": listed("AT_FORALL_LOWER_PRECISION_FP"),
        "float32": sorted(set(listed("AT_FORALL_FP32") + listed("AT_FORALL_FP32_SET_OPT_DTYPE"))),
    }


def grad_scaler():
    torch.manual_seed(1)
    x = torch.randn(8, 3)
    y = torch.randn(8, 2)
    model = torch.nn.Linear(3, 2)
    init = {"weight": model.weight.detach().flatten().tolist(), "bias": model.bias.detach().tolist()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=2.0, backoff_factor=0.25,
                                  growth_interval=3)
    poison = {2: float("inf"), 3: float("nan"), 8: float("-inf")}  # step -> a gradient entry
    steps = []
    for step in range(12):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if step in poison:
            model.weight.grad[0, 1] = poison[step]
        before = model.weight.detach().clone()
        scaler.step(opt)
        scaler.update()
        stepped = not torch.equal(before, model.weight.detach())
        steps.append({"scale": scaler.get_scale(), "stepped": stepped,
                      "growth_tracker": scaler._get_growth_tracker()})
    return {
        "torch": torch.__version__,
        "x": x.flatten().tolist(), "y": y.flatten().tolist(), "init": init,
        "options": {"init_scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.25, "growth_interval": 3,
                    "lr": 0.1},
        "poison": {str(k): str(v) for k, v in poison.items()},
        "steps": steps,
        "final": {"weight": model.weight.detach().flatten().tolist(), "bias": model.bias.detach().tolist()},
    }


if __name__ == "__main__":
    for name, data in [("autocast_cpu", autocast_cpu()), ("autocast_cuda", autocast_cuda()),
                       ("grad_scaler", grad_scaler())]:
        (OUT / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        print("wrote", OUT / f"{name}.json")
