#!/usr/bin/python3
"""Golden fixtures for tests/test_optim.cpp: optimizer trajectories, learning-rate (and
momentum) schedules and gradient clipping, computed by PyTorch.

Run once from the repository root with Debian's PyTorch (not the `python3` first on PATH):

    /usr/bin/python3 tests/golden/make_optim_golden.py

The fixtures are data-driven: every case stores its hyper-parameters (`.hp`, a float64
vector in the order listed below), so the test builds the same optimizer from the file.
Optimizers run with foreach=False (PyTorch's single-tensor loops, the same arithmetic as
its default in 1.13).

tests/golden/data/optim_trajectories.safetensors
  init.<j>, grad.<j>        three parameters j of shapes (2, 3), (4,) and () and their
                            gradients at each of the 20 steps (float64; shape (20, *shape));
                            the float32 runs start from these values rounded to float32
  <case>.hp                 hyper-parameters (absent: the optimizer's defaults):
                              sgd*:     lr, momentum, dampening, weight_decay, nesterov
                              adam*:    lr, beta1, beta2, eps, weight_decay, amsgrad
                              rmsprop*: lr, alpha, eps, weight_decay, momentum, centered
  <case>.group_lrs          (optional) two param groups: [parameter 0], [parameters 1, 2]
  <case>.has_grad           (optional) int64 (20, 3): 0 where the parameter has no gradient
                            (grad = None) at that step
  <case>.onecycle           (optional) OneCycleLR stepped after each optimizer step, with
                            total_steps 20 and: max_lr, pct_start, div_factor,
                            final_div_factor, base_momentum, max_momentum, linear (0 = cos)
  <case>.f32.<j>, <case>.f64.<j>   parameter j after each step, PyTorch in that dtype
                            (shape (20, *shape))

tests/golden/data/optim_schedulers.safetensors (two param groups, lr 0.1 and 0.02)
  <case>.hp                 step_lr: step_size, gamma; multi_step_lr: gamma (and
                            <case>.milestones, int64, unsorted with a repeat);
                            exponential_lr: gamma; cosine_annealing_lr: T_max, eta_min;
                            linear_lr: start_factor, end_factor, total_iters;
                            one_cycle_*: as <case>.onecycle above (total_steps 25);
                            plateau_*: max_mode, factor, patience, threshold, abs_threshold,
                            cooldown, min_lr, eps (and <case>.metrics, one per step)
  <case>.lr                 (26, 2): each group's lr after construction and after each of
                            25 scheduler steps
  <case>.momentum           (one_cycle_* only) (26, 2): SGD's / RMSprop's momentum or
                            Adam's beta1 at the same points

tests/golden/data/optim_clip_grad.safetensors
  grad.<j>                  gradients of the three shapes (float64)
  <case>.hp                 clip_norm_*: max_norm, norm_type; clip_value: clip_value
  <case>.<dtype>.grad.<j>   the clipped gradients, PyTorch in f32 / f64
  <case>.<dtype>.total_norm (clip_norm_* only) the returned norm
"""
import math
import os
import sys
import warnings

import torch
from torch.optim import SGD, Adam, AdamW, RMSprop
from torch.optim.lr_scheduler import (CosineAnnealingLR, ExponentialLR, LinearLR, MultiStepLR,
                                      OneCycleLR, ReduceLROnPlateau, StepLR)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_rnn_golden import OUT_DIR, save_safetensors  # noqa: E402  (the shared writer)

STEPS = 20        # optimizer steps per trajectory
SCHED_STEPS = 25  # scheduler steps
SHAPES = [(2, 3), (4,), ()]
DTYPES = {"f32": torch.float32, "f64": torch.float64}


def nonzero(*shape, scale=1.0):
    """Uniform values in [-scale, -0.1 scale] U [0.1 scale, scale], float64."""
    magnitude = 0.1 + 0.9 * torch.rand(shape, dtype=torch.float64)
    sign = torch.where(torch.rand(shape) < 0.5, -1.0, 1.0).double()
    return scale * sign * magnitude


def t64(values):
    return torch.tensor(values, dtype=torch.float64)


# ---- optimizers -------------------------------------------------------------------------------
def make_optimizer(case, hp, params):
    """The PyTorch optimizer of a case; hp None means PyTorch's defaults."""
    kind = case.split("_")[0]
    if kind == "sgd":
        lr, momentum, dampening, weight_decay, nesterov = hp
        return SGD(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                   nesterov=bool(nesterov), foreach=False)
    if kind in ("adam", "adamw"):
        cls = Adam if kind == "adam" else AdamW
        if hp is None:
            return cls(params, foreach=False)
        lr, beta1, beta2, eps, weight_decay, amsgrad = hp
        return cls(params, lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay,
                   amsgrad=bool(amsgrad), foreach=False)
    assert kind == "rmsprop"
    if hp is None:
        return RMSprop(params, foreach=False)
    lr, alpha, eps, weight_decay, momentum, centered = hp
    return RMSprop(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                   centered=bool(centered), foreach=False)


def make_one_cycle(opt, hp, total_steps=STEPS):
    max_lr, pct_start, div_factor, final_div_factor, base_momentum, max_momentum, linear = hp
    return OneCycleLR(opt, max_lr=max_lr, total_steps=total_steps, pct_start=pct_start,
                      anneal_strategy="linear" if linear else "cos", div_factor=div_factor,
                      final_div_factor=final_div_factor, base_momentum=base_momentum,
                      max_momentum=max_momentum)


# case: hp, and optionally group_lrs, has_grad (a function of step and parameter), onecycle
OPTIMIZER_CASES = {
    "sgd": dict(hp=[0.1, 0, 0, 0, 0]),
    "sgd_momentum": dict(hp=[0.05, 0.9, 0, 0, 0]),
    "sgd_dampening": dict(hp=[0.05, 0.8, 0.3, 0, 0]),
    "sgd_nesterov": dict(hp=[0.05, 0.9, 0, 0, 1]),
    "sgd_weight_decay": dict(hp=[0.1, 0, 0, 0.05, 0]),
    "sgd_momentum_weight_decay": dict(hp=[0.05, 0.7, 0.1, 0.02, 0]),
    "sgd_groups": dict(hp=[0.1, 0.9, 0, 0, 0], group_lrs=[0.1, 0.03]),
    "sgd_missing_grads": dict(hp=[0.05, 0.9, 0, 0, 1], has_grad=lambda t, j: not (j == 2 and t < 5)),
    "sgd_onecycle": dict(hp=[0.1, 0.9, 0, 0, 0], onecycle=[0.5, 0.25, 10, 100, 0.8, 0.9, 0]),
    "adam": dict(hp=None),
    "adam_weight_decay": dict(hp=[0.01, 0.8, 0.99, 1e-6, 0.1, 0]),
    "adam_amsgrad": dict(hp=[0.01, 0.9, 0.999, 1e-8, 0, 1]),
    "adam_missing_grads": dict(hp=[0.01, 0.9, 0.999, 1e-8, 0, 0],
                               has_grad=lambda t, j: not ((j == 2 and t < 5) or (j == 1 and t in (10, 11)))),
    "adam_onecycle": dict(hp=[0.01, 0.9, 0.99, 1e-8, 0, 0], onecycle=[0.05, 0.4, 25, 1e4, 0.85, 0.95, 1]),
    "adamw": dict(hp=None),
    "adamw_custom": dict(hp=[0.01, 0.85, 0.995, 1e-7, 0.2, 1]),
    "adamw_groups": dict(hp=[0.01, 0.9, 0.999, 1e-8, 0.05, 0], group_lrs=[0.02, 0.005]),
    "rmsprop": dict(hp=None),
    "rmsprop_centered": dict(hp=[0.01, 0.9, 1e-8, 0, 0, 1]),
    "rmsprop_momentum": dict(hp=[0.01, 0.99, 1e-6, 0, 0.9, 0]),
    "rmsprop_weight_decay": dict(hp=[0.01, 0.95, 1e-8, 0.1, 0, 0]),
    "rmsprop_all": dict(hp=[0.005, 0.9, 1e-8, 0.05, 0.5, 1]),
}


def trajectory(case, spec, init, grads, dtype):
    params = [x.to(dtype).clone().requires_grad_() for x in init]
    if "group_lrs" in spec:
        lrs = spec["group_lrs"]
        groups = [{"params": params[:1], "lr": lrs[0]}, {"params": params[1:], "lr": lrs[1]}]
        opt = make_optimizer(case, spec["hp"], groups)
    else:
        opt = make_optimizer(case, spec["hp"], params)
    sched = make_one_cycle(opt, spec["onecycle"]) if "onecycle" in spec else None
    has_grad = spec.get("has_grad", lambda t, j: True)
    out = [[] for _ in params]
    for t in range(STEPS):
        for j, p in enumerate(params):
            p.grad = grads[j][t].to(dtype).clone() if has_grad(t, j) else None
        opt.step()
        if sched is not None:
            sched.step()
        for j, p in enumerate(params):
            out[j].append(p.detach().clone())
    return [torch.stack(o) for o in out]


def optimizer_fixture():
    init = [nonzero(*s) for s in SHAPES]
    grads = [nonzero(STEPS, *s) for s in SHAPES]
    d = {}
    for j in range(len(SHAPES)):
        d[f"init.{j}"], d[f"grad.{j}"] = init[j], grads[j]
    for case, spec in OPTIMIZER_CASES.items():
        if spec["hp"] is not None:
            d[f"{case}.hp"] = t64(spec["hp"])
        if "group_lrs" in spec:
            d[f"{case}.group_lrs"] = t64(spec["group_lrs"])
        if "has_grad" in spec:
            d[f"{case}.has_grad"] = torch.tensor(
                [[int(spec["has_grad"](t, j)) for j in range(len(SHAPES))] for t in range(STEPS)])
        if "onecycle" in spec:
            d[f"{case}.onecycle"] = t64(spec["onecycle"])
        for name, dtype in DTYPES.items():
            for j, traj in enumerate(trajectory(case, spec, init, grads, dtype)):
                d[f"{case}.{name}.{j}"] = traj
    save_safetensors(os.path.join(OUT_DIR, "optim_trajectories.safetensors"), d, {"steps": STEPS})


# ---- schedulers -------------------------------------------------------------------------------
GROUP_LRS = [0.1, 0.02]
PLATEAU_METRICS = {
    # Plateaus of 6 epochs with small wiggles; then a steady slow decline.
    "plateau_min_rel": [max(0.2, 1.0 - 0.1 * (t // 6)) + 0.003 * ((t * 7) % 5) for t in range(SCHED_STEPS)],
    # An accuracy that rises in steps of 0.1 every 5 epochs, wiggling by up to 0.03.
    "plateau_max_abs": [min(0.9, 0.1 * (t // 5)) + 0.01 * ((t * 3) % 4) for t in range(SCHED_STEPS)],
}
SCHEDULER_CASES = {
    "step_lr": dict(hp=[3, 0.5], make=lambda o, hp: StepLR(o, step_size=int(hp[0]), gamma=hp[1])),
    "multi_step_lr": dict(hp=[0.3], milestones=[11, 2, 5, 5],
                          make=lambda o, hp: MultiStepLR(o, milestones=[11, 2, 5, 5], gamma=hp[0])),
    "exponential_lr": dict(hp=[0.85], make=lambda o, hp: ExponentialLR(o, gamma=hp[0])),
    # T_max 10 over 25 steps: past T_max the schedule comes back up (as PyTorch's).
    "cosine_annealing_lr": dict(hp=[10, 0.001],
                                make=lambda o, hp: CosineAnnealingLR(o, T_max=int(hp[0]), eta_min=hp[1])),
    "linear_lr": dict(hp=[0.25, 0.9, 7], make=lambda o, hp: LinearLR(o, start_factor=hp[0], end_factor=hp[1],
                                                                     total_iters=int(hp[2]))),
    "one_cycle_cos_sgd": dict(hp=[0.5, 0.25, 10, 100, 0.8, 0.9, 0], opt="sgd",
                              make=lambda o, hp: make_one_cycle(o, hp, SCHED_STEPS)),
    "one_cycle_linear_adam": dict(hp=[0.05, 0.4, 25, 1e4, 0.85, 0.95, 1], opt="adam",
                                  make=lambda o, hp: make_one_cycle(o, hp, SCHED_STEPS)),
    "one_cycle_cos_rmsprop": dict(hp=[0.02, 0.3, 25, 1e4, 0.85, 0.95, 0], opt="rmsprop",
                                  make=lambda o, hp: make_one_cycle(o, hp, SCHED_STEPS)),
    "plateau_min_rel": dict(hp=[0, 0.5, 2, 0.01, 0, 1, 0.004, 1e-8]),
    "plateau_max_abs": dict(hp=[1, 0.3, 1, 0.05, 1, 0, 0.001, 1e-8]),
}


def schedule(case, spec):
    p0, p1 = torch.zeros(3, requires_grad=True), torch.zeros(2, requires_grad=True)
    groups = [{"params": [p0], "lr": GROUP_LRS[0]}, {"params": [p1], "lr": GROUP_LRS[1]}]
    kind = spec.get("opt", "sgd")
    if kind == "adam":
        opt = Adam(groups, betas=(0.9, 0.99))
    elif kind == "rmsprop":
        opt = RMSprop(groups)
    else:
        opt = SGD(groups, lr=0.1, momentum=0.9)
    hp = spec["hp"]
    plateau = case.startswith("plateau")
    if plateau:
        max_mode, factor, patience, threshold, abs_threshold, cooldown, min_lr, eps = hp
        sched = ReduceLROnPlateau(opt, mode="max" if max_mode else "min", factor=factor, patience=int(patience),
                                  threshold=threshold, threshold_mode="abs" if abs_threshold else "rel",
                                  cooldown=int(cooldown), min_lr=min_lr, eps=eps)
    else:
        sched = spec["make"](opt, hp)

    def momentum(g):
        return g["betas"][0] if kind == "adam" else g["momentum"]

    lrs, momenta = [], []
    for t in range(SCHED_STEPS + 1):
        if t > 0:
            opt.step()  # no gradients: only keeps PyTorch's step-order check quiet
            if plateau:
                sched.step(PLATEAU_METRICS[case][t - 1])
            else:
                sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
        momenta.append([momentum(g) for g in opt.param_groups])
    return t64(lrs), t64(momenta)


def scheduler_fixture():
    d = {}
    for case, spec in SCHEDULER_CASES.items():
        d[f"{case}.hp"] = t64(spec["hp"])
        if "milestones" in spec:
            d[f"{case}.milestones"] = torch.tensor(spec["milestones"])
        if case in PLATEAU_METRICS:
            d[f"{case}.metrics"] = t64(PLATEAU_METRICS[case])
        lr, momentum = schedule(case, spec)
        d[f"{case}.lr"] = lr
        if case.startswith("one_cycle"):
            d[f"{case}.momentum"] = momentum
    save_safetensors(os.path.join(OUT_DIR, "optim_schedulers.safetensors"), d,
                     {"steps": SCHED_STEPS, "group_lrs": GROUP_LRS})


# ---- gradient clipping ------------------------------------------------------------------------
CLIP_CASES = {
    "clip_norm_2": [1.0, 2.0],
    "clip_norm_1": [2.0, 1.0],
    "clip_norm_inf": [0.5, math.inf],
    "clip_norm_3": [1.0, 3.0],
    "clip_norm_none": [100.0, 2.0],  # below max_norm: gradients unchanged
    "clip_value": [0.4],
}


def clip_fixture():
    grads = [nonzero(*s, scale=2.0) for s in SHAPES]
    d = {f"grad.{j}": g for j, g in enumerate(grads)}
    for case, hp in CLIP_CASES.items():
        d[f"{case}.hp"] = t64(hp)
        for name, dtype in DTYPES.items():
            params = [torch.zeros(s, dtype=dtype, requires_grad=True) for s in SHAPES]
            for p, g in zip(params, grads):
                p.grad = g.to(dtype).clone()
            if case == "clip_value":
                torch.nn.utils.clip_grad_value_(params, hp[0])
            else:
                total = torch.nn.utils.clip_grad_norm_(params, max_norm=hp[0], norm_type=hp[1])
                d[f"{case}.{name}.total_norm"] = total.detach().clone()
            for j, p in enumerate(params):
                d[f"{case}.{name}.grad.{j}"] = p.grad.clone()
    save_safetensors(os.path.join(OUT_DIR, "optim_clip_grad.safetensors"), d, {})


def main():
    warnings.simplefilter("ignore")
    torch.manual_seed(20240611)
    os.makedirs(OUT_DIR, exist_ok=True)
    optimizer_fixture()
    scheduler_fixture()
    clip_fixture()
    for name in ["optim_trajectories", "optim_schedulers", "optim_clip_grad"]:
        path = os.path.join(OUT_DIR, name + ".safetensors")
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
