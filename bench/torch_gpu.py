"""The PyTorch peer of bench_gpu: the same models on the GPU, eager and as a whole-step CUDA graph.

Prints "torch model=M mode=eager|graph batch=B us_per_step=X tflops=Y" lines. Random data resident
on the GPU, as kx caches a dataset that fits in device memory.
"""
import argparse
import time

import torch


def make(model, dev):
    if model == "mlp":
        layers = [torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                  torch.nn.Linear(256, 10)]
        return torch.nn.Sequential(*layers).to(dev), 784, 10
    layers = []
    for i in range(4):
        layers.append(torch.nn.Linear(4096, 4096))
        if i < 3:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(dev), 4096, 4096


def bench(model_name, batch, steps, graph, dev):
    model, n_in, n_out = make(model_name, dev)
    samples = max(batch * 8, 4096) if model_name == "mlp" else batch * 2
    x = torch.rand(samples, n_in, device=dev)
    y = torch.randint(0, n_out, (samples,), device=dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7, capturable=graph)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = samples // batch
    xb = torch.empty(batch, n_in, device=dev)
    yb = torch.empty(batch, dtype=torch.long, device=dev)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    def load(i):
        j = (i % n) * batch
        xb.copy_(x[j:j + batch], non_blocking=True)
        yb.copy_(y[j:j + batch], non_blocking=True)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(20):
            load(i)
            step()
    torch.cuda.current_stream().wait_stream(s)
    if graph:
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=False)
        with torch.cuda.graph(g):
            step()
        run = g.replay
    else:
        run = step
    for i in range(20):
        load(i)
        run()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        load(i)
        run()
    torch.cuda.synchronize()
    us = (time.perf_counter() - t0) * 1e6 / steps
    layer_flops = sum(m.in_features * m.out_features for m in model if isinstance(m, torch.nn.Linear))
    tflops = 6.0 * batch * layer_flops / (us * 1e-6) / 1e12
    return us, tflops


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--cases", default="mlp:32,mlp:256,mlp:2048,wide:8192")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("torch: no CUDA device")
        return
    dev = torch.device("cuda:0")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    for case in a.cases.split(","):
        name, batch = case.split(":")
        for tf32 in ([False, True] if name == "wide" else [True]):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            for mode in ("eager", "graph"):
                steps = a.steps if name == "mlp" else max(20, a.steps // 10)
                us, tflops = bench(name, int(batch), steps, mode == "graph", dev)
                print(f"torch model={name} precision={'tf32' if tf32 else 'fp32'} mode={mode} batch={batch} "
                      f"us_per_step={us:.1f} tflops={tflops:.1f}", flush=True)


if __name__ == "__main__":
    main()
