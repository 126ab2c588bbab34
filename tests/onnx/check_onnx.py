#!/usr/bin/env python3
"""Checks Loom's ONNX export against ONNX Runtime.

    check_onnx.py --driver build/cpu/onnx_driver --workdir build/cpu/onnx_runtime_check

Runs the driver (tests/onnx/onnx_driver.cpp), which exports the examples' models and random
recurrent layers and writes, for inputs at batch and sequence sizes other than the export's,
Loom's outputs. For each model: onnx.checker.check_model(full_check=True), then ONNX Runtime
on those inputs, whose outputs must equal Loom's within 1e-5 relative (atol 1e-6 for values
near zero) in float32.

onnx and onnxruntime come from the virtual environment scripts/install-deps.sh makes
(.venv-tools/); without it this test fails under CI and is skipped (exit 77) elsewhere.
"""
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools_venv import check, finish, need, start  # noqa: E402

args = start("onnx", __file__)
need("onnxruntime", __file__)
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

subprocess.run([args.driver, args.workdir], check=True)
cases = sorted(glob.glob(os.path.join(args.workdir, "*.json")))
check(len(cases) >= 10, f"the driver wrote {len(cases)} cases, expected at least 10")
DTYPES = {"int64": np.int64, "float32": np.float32, "float64": np.float64, "int32": np.int32}
for path in cases:
    case = json.load(open(path))
    name = os.path.basename(path)[:-5]
    model = onnx.load(case["model"])
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: check_model: {e}")
        continue
    session = ort.InferenceSession(case["model"], providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for run in case["runs"]:
        feeds = {n: np.array(i["data"], dtype=DTYPES[i["dtype"]]).reshape(i["shape"])
                 for n, i in zip(names, run["inputs"])}
        got = session.run(None, feeds)
        check(len(got) == len(run["outputs"]), f"{name}: {len(got)} outputs, Loom has {len(run['outputs'])}")
        for g, want in zip(got, run["outputs"]):
            w = np.array(want["data"], dtype=np.float64).reshape(want["shape"])
            ok = g.shape == w.shape and np.allclose(g.astype(np.float64), w, rtol=1e-5, atol=1e-6)
            shape = [f["shape"] for f in run["inputs"]]
            check(ok, f"{name} at inputs {shape}: {want['name']} differs: ONNX Runtime {g.shape} vs Loom {w.shape}, "
                      f"max |diff| {np.max(np.abs(g - w)) if g.shape == w.shape else 'n/a'}")
    print(f"{name}: checked")
finish(__file__, f"{len(cases)} exported models pass onnx.checker (full_check) and match ONNX Runtime "
                 f"(onnx {onnx.__version__}, onnxruntime {ort.__version__})")
