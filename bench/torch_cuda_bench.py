"""PyTorch's side of bench/bench_cuda.cpp: the same GPU measurements, the same JSON lines
(framework "pytorch"), so scripts/gpu-check.sh can print both in one table from one run.

    python3 bench/torch_cuda_bench.py
"""
import json
import sys

import torch


def median_ms(fn, warmup=3, reps=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def line(bench, size, dtype, value, unit, ceiling=0.0):
    row = {"bench": bench, "framework": "pytorch", "size": size, "dtype": dtype, "threads": 0,
           "value": value, "unit": unit}
    if ceiling > 0:
        row["ceiling"] = ceiling
        row["fraction_of_ceiling"] = value / ceiling
    print(json.dumps(row), flush=True)


def throughput_lines(copy):
    """bench_cuda.cpp's throughput_lines: layer norm, a bias gradient, log_softmax's backward."""
    dev = "cuda"
    rows, n = 65536, 1024  # 256 MB of float32
    nbytes = rows * n * 4
    with torch.no_grad():
        x, dy = torch.randn(rows, n, device=dev), torch.randn(rows, n, device=dev)
        w, b = torch.randn(n, device=dev), torch.randn(n, device=dev)
        line("layer_norm_fwd", rows * n, "float32",
             2 * nbytes / median_ms(lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)) / 1e6, "GB/s", copy)
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
        line("layer_norm_bwd", rows * n, "float32",
             3 * nbytes / median_ms(lambda: torch.ops.aten.native_layer_norm_backward(
                 dy, x, [n], mean, rstd, w, b, [True, True, True])) / 1e6, "GB/s", copy)
        line("bias_grad", rows * n, "float32", nbytes / median_ms(lambda: x.sum(0)) / 1e6, "GB/s", copy)
        out = torch.randn(rows * n // 4096, 4096, device=dev).log_softmax(1)
        g = torch.randn_like(out)
        line("log_softmax_bwd", rows * n, "float32",
             3 * nbytes / median_ms(lambda: torch._log_softmax_backward_data(g, out, 1, torch.float32)) / 1e6,
             "GB/s", copy)


def main():
    if not torch.cuda.is_available():
        print("torch_cuda_bench: no CUDA device; nothing to measure", file=sys.stderr)
        return
    dev = "cuda"
    n = 64 << 20
    nbytes = n * 4
    src, dst = torch.randn(n, device=dev), torch.empty(n, device=dev)
    copy = 2 * nbytes / median_ms(lambda: dst.copy_(src)) / 1e6
    line("copy", n, "float32", copy, "GB/s")
    a, b = torch.randn(n, device=dev), torch.randn(n, device=dev)
    line("add", n, "float32", 3 * nbytes / median_ms(lambda: a + b) / 1e6, "GB/s", copy)
    rows = torch.randn(n // 4096, 4096, device=dev)
    line("softmax", n, "float32", 2 * nbytes / median_ms(lambda: rows.softmax(1)) / 1e6, "GB/s", copy)
    line("sum", n, "float32", nbytes / median_ms(lambda: a.sum()) / 1e6, "GB/s", copy)

    m = 4096
    flops = 2.0 * m ** 3
    # Like Loom's cuBLAS calls (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION): bf16
    # products accumulate in float32 throughout.
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    for dtype, tf32, name in [(torch.float32, False, "float32"), (torch.float32, True, "tf32"),
                              (torch.bfloat16, False, "bfloat16")]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x, y = torch.randn(m, m, device=dev, dtype=dtype), torch.randn(m, m, device=dev, dtype=dtype)
        line("gemm", m, name, flops / median_ms(lambda: x @ y) / 1e9, "TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False

    # Beside Loom's attention lines: the backend torch picks, then each of its fused
    # backends forced with torch.nn.attention.sdpa_kernel, forward and forward + backward
    # (14 B H L S E flops, half when causal), as bench_cuda.cpp's, a "tier" field naming it.
    B, H, L, E = 8, 16, 4096, 128
    q, k, v, gy = (torch.randn(B, H, L, E, device=dev, dtype=torch.bfloat16) for _ in range(4))
    qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
    attention_flops = 4.0 * B * H * L * L * E
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def forward(causal):
        with torch.no_grad():
            sdpa(q, k, v, is_causal=causal)

    def forward_backward(causal):
        sdpa(qg, kg, vg, is_causal=causal).backward(gy)
        qg.grad = kg.grad = vg.grad = None

    def attention_line(name, causal, flops, ms, tier):
        row = {"bench": name + ("_causal" if causal else ""), "framework": "pytorch", "size": L, "dtype": "bfloat16",
               "threads": 0, "value": flops / (2 if causal else 1) / ms / 1e9, "unit": "TFLOP/s", "tier": tier}
        print(json.dumps(row), flush=True)

    for causal in (False, True):
        attention_line("sdpa_fwd", causal, attention_flops, median_ms(lambda: forward(causal)), "default")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        with sdpa_kernel(backend):
            for causal in (False, True):
                try:
                    attention_line("sdpa_fwd", causal, attention_flops, median_ms(lambda: forward(causal), 2, 10),
                                   backend.name)
                    attention_line("sdpa_fwdbwd", causal, 3.5 * attention_flops,
                                   median_ms(lambda: forward_backward(causal), 2, 10), backend.name)
                except RuntimeError as e:  # a backend this build or GPU lacks
                    print(f"torch_cuda_bench: sdpa on {backend.name}: {e}", file=sys.stderr)

    throughput_lines(copy)


if __name__ == "__main__":
    main()
