"""The PyTorch peer of bench_gpu: the same models on the GPU, eager and as a whole-step CUDA graph.

Prints "torch model=M mode=eager|graph batch=B us_per_step=X tflops=Y" lines (images_per_s=Z for
the convolutional models). Random data resident on the GPU, as kx caches a dataset that fits in
device memory. Models: mlp (784-256-256-10), wide (4 x Linear(4096)), cnn (issue 6's Fashion-MNIST
CNN), resnet50 and mobilenetv2 (torchvision's, no pretrained weights, channels-last, SGD with momentum).
"""
import argparse
import time

import torch


def make(model, dev):
    """(module, input shape of one sample, classes)."""
    nn = torch.nn
    if model == "mlp":
        layers = [torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                  torch.nn.Linear(256, 10)]
        return torch.nn.Sequential(*layers).to(dev), (784,), 10
    if model == "cnn":
        m = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(1600, 10))
        return m.to(dev), (1, 28, 28), 10
    if model == "resnet50":
        import torchvision  # imported here: the other models do not need it
        m = torchvision.models.resnet50(weights=None)
        return m.to(dev, memory_format=torch.channels_last), (3, 224, 224), 1000
    if model == "mobilenetv2":
        import torchvision
        m = torchvision.models.mobilenet_v2(weights=None)
        return m.to(dev, memory_format=torch.channels_last), (3, 224, 224), 1000
    layers = []
    for i in range(4):
        layers.append(torch.nn.Linear(4096, 4096))
        if i < 3:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(dev), (4096,), 4096


def bench(model_name, batch, steps, graph, dev):
    model, sample, n_out = make(model_name, dev)
    samples = {"mlp": max(batch * 8, 4096), "cnn": batch * 16}.get(model_name, batch * 2)
    fmt = torch.channels_last if model_name in ("resnet50", "mobilenetv2") else torch.contiguous_format
    x = torch.rand(samples, *sample, device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, n_out, (samples,), device=dev)
    if model_name in ("resnet50", "mobilenetv2"):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7, capturable=graph)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = samples // batch
    xb = torch.empty(batch, *sample, device=dev).contiguous(memory_format=fmt)
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
    if model_name in ("cnn", "resnet50", "mobilenetv2"):
        return us, f"images_per_s={batch / (us * 1e-6):.1f}"
    layer_flops = sum(m.in_features * m.out_features for m in model if isinstance(m, torch.nn.Linear))
    tflops = 6.0 * batch * layer_flops / (us * 1e-6) / 1e12
    return us, f"tflops={tflops:.1f}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--cases", default="mlp:32,mlp:256,mlp:2048,wide:8192,cnn:64,resnet50:64,mobilenetv2:64")
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
            torch.backends.cudnn.allow_tf32 = tf32
            for mode in ("eager", "graph"):
                steps = {"mlp": a.steps, "cnn": a.steps, "resnet50": max(10, a.steps // 20),
                         "mobilenetv2": max(10, a.steps // 10)}.get(name, max(20, a.steps // 10))
                try:
                    us, rate = bench(name, int(batch), steps, mode == "graph", dev)
                except ImportError as e:  # torchvision missing
                    print(f"torch model={name}: {e}", flush=True)
                    break
                print(f"torch model={name} precision={'tf32' if tf32 else 'fp32'} mode={mode} batch={batch} "
                      f"us_per_step={us:.1f} {rate}", flush=True)


if __name__ == "__main__":
    main()
