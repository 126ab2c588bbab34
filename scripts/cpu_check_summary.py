#!/usr/bin/env python3
"""The summary of scripts/cpu-check.sh: reads its output folder, prints Markdown.

  cpu_check_summary.py OUT

Tables: the bfloat16 and float32 GEMMs (GFLOP/s of each Loom kernel beside oneDNN's matmul
primitive called directly), the workloads in issue 34's columns (ms per step, PyTorch / Loom:
above 1, Loom is faster), and issue 34's goals, each met or not on this machine."""
import json
import os
import re
import sys

# Issue 34's goals (set for a 2-core AMX Xeon): PyTorch / Loom under bfloat16 autocast, and in float32.
BF16_GOALS = {"lstm-sentiment": 2.0, "lstm-2x512": 2.0, "transformer-small": 1.5}
FLOAT32_GOAL = 1.5
DIRECT_GOAL = 0.9  # Loom's bfloat16 GEMM against oneDNN's matmul primitive called directly


def read(out, name):
    path = os.path.join(out, name)
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def records(text):
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except ValueError:
                pass


def fmt(value, digits=4):
    return "-" if value is None else "%.*g" % (digits, value)


def ratio(num, den):
    return num / den if num and den else None


def gemm_table(lines, default_bf16):
    """Rows (dtype, product, M, K, N) -> {column: GFLOP/s}; prints it; returns goal checks."""
    rows, columns = {}, []
    for r in lines:
        if r["bench"] not in ("gemm_product", "gemm_bf16", "gemm_direct"):
            continue
        key = (r["dtype"], r["product"], r["M"], r["K"], r["N"])
        column = ("loom " if r["framework"] == "loom" else "oneDNN ") + r["kernel"]
        rows.setdefault(key, {})[column] = r["value"]
        if r["bench"] == "gemm_direct":
            rows[key]["impl"] = r.get("impl", "")
        if column not in columns:
            columns.append(column)
    if not rows:
        print("GEMMs: no bench_core lines (see bench_core.err)\n")
        return []
    loom_columns = [c for c in columns if c.startswith("loom ")]
    print("| dtype | product (M, K, N) | " + " | ".join(loom_columns) +
          " | oneDNN direct, B plain | oneDNN direct, B packed | oneDNN picks | Loom / direct (plain, packed) |")
    print("|---|---|" + "---|" * (len(loom_columns) + 4))
    checks = []
    for (dtype, product, m, k, n), v in rows.items():
        # The kernel Loom runs by itself: the default bfloat16 one, or float32's one column.
        mine = v.get("loom " + default_bf16) if dtype == "bfloat16" else next(
            (v[c] for c in loom_columns if c in v), None)
        plain, packed = v.get("oneDNN direct_plain"), v.get("oneDNN direct_packed")
        print("| %s | %s (%d, %d, %d) | %s | %s | %s | %s | %s, %s |" % (
            dtype, product, m, k, n, " | ".join(fmt(v.get(c)) for c in loom_columns), fmt(plain), fmt(packed),
            v.get("impl", "-"), fmt(ratio(mine, plain), 3), fmt(ratio(mine, packed), 3)))
        if dtype == "bfloat16" and plain:
            checks.append(("bfloat16 GEMM %s (%d, %d, %d): Loom's %s >= %.1fx oneDNN direct" % (
                product, m, k, n, default_bf16, DIRECT_GOAL), ratio(mine, plain), DIRECT_GOAL))
    print()
    return checks


def workloads_table(lines, kernels):
    loom32, torch32, loom16, torch16 = {}, {}, {}, {}
    names = []
    for r in lines:
        w = r["workload"]
        if w not in names:
            names.append(w)
        bf16 = r.get("amp") == "bf16"
        if r["framework"] == "loom":
            if bf16:
                loom16.setdefault(w, {})[r.get("bf16_gemm", "?")] = r["ms_per_step"]
            else:
                loom32[w] = r["ms_per_step"]
        else:
            (torch16 if bf16 else torch32)[w] = r["ms_per_step"]
    if not names:
        print("workloads: none ran (see loom-bench.err)\n")
        return []
    print("| workload | Loom fp32 | PyTorch fp32 | PyTorch / Loom | " +
          " | ".join("Loom bf16 (%s)" % k for k in kernels) + " | PyTorch bf16 | PyTorch / Loom bf16 |")
    print("|---|---|---|---|" + "---|" * (len(kernels) + 2))
    checks = []
    default = kernels[0] if kernels else None
    for w in names:
        mine16 = loom16.get(w, {}).get(default)
        print("| %s | %s | %s | %s | %s | %s | %s |" % (
            w, fmt(loom32.get(w)), fmt(torch32.get(w)), fmt(ratio(torch32.get(w), loom32.get(w)), 3),
            " | ".join(fmt(loom16.get(w, {}).get(k)) for k in kernels), fmt(torch16.get(w)),
            fmt(ratio(torch16.get(w), mine16), 3)))
        if w in torch32:
            checks.append(("float32 %s: PyTorch / Loom >= %.1f" % (w, FLOAT32_GOAL),
                           ratio(torch32.get(w), loom32.get(w)), FLOAT32_GOAL))
        if w in BF16_GOALS:
            if w in torch16:
                checks.append(("bf16 autocast %s (%s): PyTorch / Loom >= %.1f" % (w, default, BF16_GOALS[w]),
                               ratio(torch16.get(w), mine16), BF16_GOALS[w]))
            checks.append(("bf16 autocast %s (%s): faster than Loom's float32 step (fp32 / bf16 > 1)" % (w, default),
                           ratio(loom32.get(w), mine16), 1.0))
    print()
    return checks


def main():
    out = sys.argv[1]
    machine = read(out, "machine.txt")
    print("# CPU check\n\n```\n" + machine.strip() + "\n```\n")
    print("## Tests\n\n```\n" + read(out, "tests.txt").strip() + "\n```\n")
    m = re.search(r"bfloat16 GEMM kernels this CPU runs: *(.*)", machine)
    runs = m.group(1).split() if m else []
    m = re.search(r"^bfloat16 GEMM: (\S+)", machine, re.M)
    default_bf16 = m.group(1) if m else (runs[0] if runs else "float32")
    kernels = [default_bf16] + [k for k in runs if k != default_bf16]
    bench = list(records(read(out, "bench_core.jsonl")))
    ceiling = next((r for r in bench if r["bench"] == "ceiling"), None)
    print("## GEMMs (GFLOP/s, bench_core)\n")
    if ceiling:
        print("Float32 FMA peak measured here: %s GFLOP/s (%s, %d threads); bfloat16 ceiling: %s.\n" % (
            fmt(ceiling["value"]), ceiling.get("isa", "?"), ceiling["threads"],
            fmt(ceiling.get("bf16_ceiling")) if ceiling.get("bf16_ceiling") else ceiling.get("bf16_ceiling_is", "?")))
    checks = gemm_table(bench, default_bf16)
    print("## Workloads (ms per step; denormals flushed in both)\n")
    checks += workloads_table(list(records(read(out, "workloads.jsonl"))), kernels)
    scaling = read(out, "scaling.txt")
    if scaling:
        print("## Sweep (bench/scaling.sh)\n\n```\n" + scaling.strip()[-6000:] + "\n```\n")
    amx = "amx_bf16 yes" in machine
    print("## Issue 34's goals%s\n" % ("" if amx else " (set for AMX machines; this CPU has no AMX)"))
    for what, value, goal in checks:
        verdict = "not measured" if value is None else ("met" if value >= goal else "NOT met")
        print("- %s: %s (%s)" % (what, fmt(value, 3), verdict))


if __name__ == "__main__":
    main()
