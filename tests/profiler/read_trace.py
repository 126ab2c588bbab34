#!/usr/bin/env python3
"""Reads Loom's profiler traces with TensorBoard's own profile plugin (torch-tb-profiler).

    read_trace.py --driver build/cpu/profile_driver --workdir build/cpu/tensorboard_profile_reader

Runs the driver (tests/profiler/profile_driver.cpp), which trains a small model under
profiler::Profile and writes its trace into a run directory with tensorboard_trace_handler,
then loads that directory with the plugin's RunLoader (what TensorBoard runs when it lists
the run) and checks what it reads against what the driver recorded: the steps of the
overview, every op's calls in the operator view, the GPU ops in the kernel view (the driver
runs on the host-emulated cuda:0 in a build without the CUDA backend), the memory view, and
that the trace view points at the file.

torch-tb-profiler comes from the virtual environment scripts/install-deps.sh makes
(.venv-tools/ at the repository root). Without it this test fails under CI (the environment
variable CI is set) and is skipped (exit 77) elsewhere.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools_venv import check, finish, start  # noqa: E402


def main():
    args = start("torch_tb_profiler.profiler", __file__)
    from torch_tb_profiler import consts, io
    from torch_tb_profiler.profiler import RunLoader

    run_dir = os.path.join(args.workdir, "run")
    os.makedirs(run_dir)
    out = subprocess.run([args.driver, run_dir], check=True, capture_output=True, text=True).stdout
    recorded = json.loads(out.strip().splitlines()[-1])
    traces = [f for f in os.listdir(run_dir) if consts.WORKER_PATTERN.match(f)]
    check(len(traces) == 1, f"one *.pt.trace.json in the run directory, found {sorted(os.listdir(run_dir))}")
    print(f"driver recorded {recorded['steps']} steps on {recorded['device']}, "
          f"{sum(recorded['calls'].values())} op and node calls, {recorded['gpu_ops']} GPU ops")

    with tempfile.TemporaryDirectory() as cache_dir:
        run = RunLoader("run", run_dir, io.Cache(cache_dir)).load()
    profiles = list(run.get_profiles())
    check(len(profiles) == 1, f"the plugin loaded {len(profiles)} profiles (its log says why a file failed)")
    if not profiles:
        sys.exit(1)
    profile = profiles[0]
    views = [v.display_name for v in profile.views]
    print(f"worker {profile.worker}, span {profile.span}: views {views}")

    # Overview: one row per ProfilerStep#N.
    steps = profile.overview["steps"]["rows"]
    check(len(steps) == recorded["steps"], f"overview: {len(steps)} steps, recorded {recorded['steps']}")

    # Operator view: calls per op name (cpu_op events: ops and autograd nodes).
    rows = profile.operation_table_by_name["data"]
    calls = {r["name"]: r["calls"] for r in rows}
    check(calls == recorded["calls"],
          f"operator view: {len(calls)} names; differences: "
          f"{ {k: (calls.get(k), recorded['calls'].get(k)) for k in set(calls) | set(recorded['calls']) if calls.get(k) != recorded['calls'].get(k)} }")
    top = sorted(rows, key=lambda r: -r["host_self_duration"])[:5]
    print("operator view, top self host time: " + ", ".join(f"{r['name']} ({r['calls']} calls, {r['host_self_duration']} us)" for r in top))

    # Kernel view: the GPU ops, each the span its op queued.
    if recorded["gpu_ops"] > 0:
        check("Kernel" in views, f"a kernel view for {recorded['gpu_ops']} GPU ops, views {views}")
        kernels = profile.kernel_table["data"]["rows"] if profile.kernel_table else []
        calls_column = [c["name"] for c in profile.kernel_table["data"]["columns"]].index("Calls")
        kernel_calls = sum(r[calls_column] for r in kernels)
        check(kernel_calls == recorded["gpu_ops"], f"kernel view: {kernel_calls} kernel calls, recorded {recorded['gpu_ops']}")
        total_column = [c["name"] for c in profile.kernel_table["data"]["columns"]].index("Total Duration (us)")
        kernel_us = sum(r[total_column] for r in kernels)
        # The view rounds each name's total to a whole microsecond.
        check(abs(kernel_us - recorded["gpu_us"]) <= 0.01 * recorded["gpu_us"] + 0.5 * len(kernels),
              f"kernel view: {kernel_us:.3f} us of kernels, recorded {recorded['gpu_us']:.3f} us")
        gpu_ops = [r for r in rows if r.get("device_total_duration", 0) > 0]
        check(len(gpu_ops) > 0, "operator view: GPU time attributed to ops")
        print(f"kernel view: {len(kernels)} names, {kernel_calls} calls; {len(gpu_ops)} ops with GPU time")

    # Memory view: the allocations and frees.
    check("Memory" in views, f"a memory view, views {views}")
    if profile.memory_snapshot is not None:
        stats = profile.get_memory_stats()["rows"]
        check(len(stats) > 0, "memory view: no device has memory rows")
        print("memory view: " + ", ".join(f"{device} {len(rows)} ops" for device, rows in sorted(stats.items())))

    # Trace view: the plugin serves the file itself.
    check(profile.trace_file_path is not None and os.path.exists(profile.trace_file_path),
          f"trace view: file {profile.trace_file_path}")

    finish(__file__, "TensorBoard's profile plugin reads the steps, every op's calls, the GPU ops and the memory")


if __name__ == "__main__":
    main()
