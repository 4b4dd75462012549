"""PyTorch's float32 matrix products at given shapes, for bench_gemm_roofline: one line per shape,
"torch gemm M N K gflops", with the same thread count and repetition rule as kx's side.

    torch_gemm.py --threads 2 --seconds 0.3 64x512x128 2048x128x128 ...
"""
import argparse
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=float, default=0.3)
    p.add_argument("shapes", nargs="+", help="MxNxK")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    for shape in a.shapes:
        m, n, k = (int(v) for v in shape.split("x"))
        x, w, out = torch.rand(m, k), torch.rand(k, n), torch.empty(m, n)
        for _ in range(3):
            torch.matmul(x, w, out=out)
        reps, start = 0, time.perf_counter()
        while True:
            torch.matmul(x, w, out=out)
            reps += 1
            elapsed = time.perf_counter() - start
            if elapsed >= a.seconds:
                break
        print(f"torch gemm {m} {n} {k} {2.0 * m * n * k * reps / elapsed / 1e9:.1f}", flush=True)


if __name__ == "__main__":
    main()
