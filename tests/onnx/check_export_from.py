#!/usr/bin/env python3
"""A --keep-best checkpoint exported without training (text_classification --export-from).

    check_export_from.py --driver build/cpu/examples/text_classification --workdir DIR

Trains the flagship briefly with --keep-best (the best epoch's model reloaded at the end and
written with --export-onnx), then exports the kept file alone with --export-from. Both models
must pass onnx.checker (full_check) and give the same outputs in ONNX Runtime, within 1e-5
relative, on texts of other batch and sequence sizes; without the vocabulary beside the file
the export is a clear error (exit 2), not a model of the wrong words.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools_venv import check, finish, need, start  # noqa: E402

args = start("onnx", __file__)
need("onnxruntime", __file__)
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

os.makedirs(args.workdir)
best, trained, exported = (os.path.join(args.workdir, f) for f in ("best.safetensors", "trained.onnx", "from.onnx"))
sizes = ["--embed-dim", "12", "--hidden", "10", "--train-limit", "256", "--out", os.path.join(args.workdir, "run")]
subprocess.run([args.driver, "--epochs", "2", "--keep-best", best, "--export-onnx", trained] + sizes, check=True)
check(os.path.exists(best + ".vocab.txt"), "--keep-best wrote no vocabulary beside its checkpoint")
subprocess.run([args.driver, "--export-from", best, "--export-onnx", exported] + sizes, check=True)

# Without the vocabulary: a typed error naming what is missing, and no file written.
alone = os.path.join(args.workdir, "alone.safetensors")
shutil.copy(best, alone)
missing = subprocess.run([args.driver, "--export-from", alone, "--export-onnx", alone + ".onnx"] + sizes,
                         capture_output=True, text=True)
check(missing.returncode == 2 and "no vocabulary beside it" in missing.stderr,
      f"--export-from without a vocabulary: exit {missing.returncode}, stderr {missing.stderr!r}")
check(not os.path.exists(alone + ".onnx"), "--export-from without a vocabulary wrote a model")

sessions = []
for path in (trained, exported):
    onnx.checker.check_model(onnx.load(path), full_check=True)
    sessions.append(ort.InferenceSession(path, providers=["CPUExecutionProvider"]))
vocab = sum(1 for _ in open(best + ".vocab.txt", encoding="utf-8"))
rng = np.random.default_rng(37)
for batch, length in ((5, 11), (2, 4)):  # other sizes than the export's example (3, 7)
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length
    tokens = rng.integers(1, vocab, size=(batch, length))
    feeds = {"tokens": tokens.astype(np.int64), "lengths": lengths.astype(np.int64)}
    want, got = (s.run(None, feeds)[0] for s in sessions)
    check(got.shape == (batch, want.shape[1]) and np.allclose(got, want, rtol=1e-5, atol=1e-6),
          f"at batch {batch}, length {length}: the exported checkpoint differs from the trained model "
          f"(max |diff| {np.max(np.abs(got - want)) if got.shape == want.shape else 'n/a'})")
finish(__file__, f"--keep-best's checkpoint exported alone matches the trained best model in ONNX Runtime "
                 f"(onnx {onnx.__version__}, onnxruntime {ort.__version__})")
