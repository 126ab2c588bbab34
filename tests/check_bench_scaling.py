#!/usr/bin/env python3
"""bench/scaling.sh --quick with Loom only (LOOM_TORCH_PYTHON unset): it says PyTorch did not
run and whether denormals were flushed, writes one JSON line per point and dtype with the
fields the charts read, and both charts are well-formed SVG with one line per series.

    check_bench_scaling.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

source, build = sys.argv[1], sys.argv[2]
out = os.path.join(build, "smoke", "bench_scaling")
shutil.rmtree(out, ignore_errors=True)
env = {k: v for k, v in os.environ.items() if k != "LOOM_TORCH_PYTHON"}
run = subprocess.run(["bash", os.path.join(source, "bench", "scaling.sh"), "--quick", "--build", build, "--out", out],
                     env=env, capture_output=True, text=True, timeout=120)
print(run.stdout, run.stderr, sep="\n")
assert run.returncode == 0, f"scaling.sh exited {run.returncode}"
assert "Loom's curves only" in run.stdout, "no line saying PyTorch was not run"
assert "denormals: flushed to zero (FTZ/DAZ) in Loom" in run.stdout, "no line on denormals"

# --quick: 3 shapes (2 sequence lengths at batch 8, batch 4 and 8 at length 32, (8, 32) once) x 2 dtypes.
lines = [json.loads(line) for line in open(os.path.join(out, "scaling.jsonl"))]
shapes = {(r["batch"], r["seq_len"], r["amp"]) for r in lines}
assert shapes == {(b, t, amp) for b, t in [(8, 16), (8, 32), (4, 32)] for amp in ("off", "bf16")}, shapes
for r in lines:
    assert r["workload"] == "lstm-sentiment" and r["framework"] == "loom", r
    assert r["ms_per_step"] > 0 and r["steps"] == 2 and r["threads"] == 2 and r["flush_denormal"] is True, r

for chart, xs in [("scaling_seq.svg", 2), ("scaling_batch.svg", 2)]:
    root = ET.parse(os.path.join(out, chart)).getroot()  # raises on malformed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    series = root.findall("{http://www.w3.org/2000/svg}g[@class='series']")
    assert sorted(g.get("data-name") for g in series) == ["loom bf16", "loom fp32"], chart
    for g in series:
        polylines = g.findall("{http://www.w3.org/2000/svg}polyline")
        assert len(polylines) == 1 and len(polylines[0].get("points").split()) == xs, (chart, g.get("data-name"))
print("bench_scaling: ok")
