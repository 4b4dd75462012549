"""One peer measurement for bench/peers/compare.py: trains one workload with TensorFlow/Keras or
PyTorch on synthetic data and prints one JSON line with the fields bench_workload prints for kx.

    peer_train.py --framework keras|torch --config xla|graph|eager|compile
                  --workload mlp|cnn|resnet50|mobilenetv2|efficientnetb0|transformer|lstm
                  --batch B [--steps N] [--warmup W] [--threads T]

The same workloads, data and optimiser as kx's: the Fashion-MNIST MLP (784-256-256-10) and CNN,
ResNet50 (Keras's layout: a bias in every convolution, BatchNormalization epsilon 1.001e-5) at
64x64x3, MobileNetV2 (alpha 1.0, Keras's layout) and EfficientNetB0 (Keras's layout, its dropout and
drop-connect included) at 96x96x3 with 10 classes, the transformer
encoder of bench_workload, and LSTM(128) over 50 steps of 40 features then Dense(10, softmax); Adam
with Keras's epsilon (1e-7); sparse categorical cross-entropy; 32
batches of uniform [0, 1) inputs and labels 0..9 from a fixed seed, cycled.

Each framework in its best documented CPU setup: Keras on TensorFlow (oneDNN on, as TensorFlow's
default on x86) with `fit` over tf.data, with XLA (`jit_compile=True`) or as a tf.function graph
(`jit_compile=False`); PyTorch eager, or `torch.compile` (Inductor).
"""
import argparse
import json
import os
import resource
import time

import numpy as np


def data(workload, batch):
    shape = {"mlp": (784,), "cnn": (28, 28, 1), "resnet50": (64, 64, 3), "mobilenetv2": (96, 96, 3),
             "efficientnetb0": (96, 96, 3),
             "transformer": (64, 32), "lstm": (50, 40)}[workload]
    rng = np.random.default_rng(7)
    n = 32 * batch
    x = rng.random((n,) + shape, dtype=np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int64)
    return x, y


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# The transformer encoder of bench_workload: sequences [64, 32], Dense 128 per step, 2 blocks of
# attention (4 heads of 32) + Add + LayerNormalization and feed-forward (256 relu, 128) + Add +
# LayerNormalization, Flatten, Dense 10 softmax.
def keras_transformer(keras, layers):
    i = keras.Input((64, 32))
    x = layers.Dense(128)(i)
    for _ in range(2):
        a = layers.MultiHeadAttention(4, 32)(x, x)
        x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, a]))
        f = layers.Dense(128)(layers.Dense(256, activation="relu")(x))
        x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, f]))
    return keras.Model(i, layers.Dense(10, activation="softmax")(layers.Flatten()(x)))


def torch_transformer(nn):
    """The same encoder in PyTorch: post-norm blocks, as the Keras model (no dropout)."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = nn.MultiheadAttention(128, 4, batch_first=True)
            self.norm_a = nn.LayerNorm(128, eps=1e-6)
            self.ff = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 128))
            self.norm_f = nn.LayerNorm(128, eps=1e-6)

        def forward(self, x):
            x = self.norm_a(x + self.attention(x, x, x, need_weights=False)[0])
            return self.norm_f(x + self.ff(x))

    return nn.Sequential(nn.Linear(32, 128), Block(), Block(), nn.Flatten(), nn.Linear(64 * 128, 10))


def run_keras(a):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras
    from keras import layers

    keras.utils.set_random_seed(1)
    if a.workload == "mlp":
        model = keras.Sequential([keras.Input((784,)), layers.Dense(256, activation="relu"),
                                  layers.Dense(256, activation="relu"), layers.Dense(10, activation="softmax")])
    elif a.workload == "cnn":
        model = keras.Sequential([keras.Input((28, 28, 1)), layers.Conv2D(32, 3, activation="relu"),
                                  layers.MaxPooling2D(2), layers.Conv2D(64, 3, activation="relu"),
                                  layers.MaxPooling2D(2), layers.Flatten(), layers.Dropout(0.5),
                                  layers.Dense(10, activation="softmax")])
    elif a.workload == "mobilenetv2":
        model = keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10)
    elif a.workload == "efficientnetb0":
        model = keras.applications.EfficientNetB0(weights=None, input_shape=(96, 96, 3), classes=10)
    elif a.workload == "transformer":
        model = keras_transformer(keras, layers)
    elif a.workload == "lstm":
        model = keras.Sequential([keras.Input((50, 40)), layers.LSTM(128), layers.Dense(10, activation="softmax")])
    else:
        model = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    model.compile(optimizer=keras.optimizers.Adam(1e-3, epsilon=1e-7), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=a.config == "xla")
    x, y = data(a.workload, a.batch)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(a.batch, drop_remainder=True).repeat()
    ds = ds.prefetch(tf.data.AUTOTUNE)
    t0 = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=1, verbose=0)
    first_ms = (time.perf_counter() - t0) * 1e3
    model.fit(ds, epochs=1, steps_per_epoch=max(a.warmup - 1, 1), verbose=0)
    t0 = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=a.steps, verbose=0)
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    return f"tensorflow {tf.__version__}, keras {keras.__version__}", first_ms, ms


def torch_resnet50(nn):
    """ResNet50 as Keras builds it (v1: stride 2 in the first 1x1 convolution of stages 3 to 5, a bias
    in every convolution, BatchNormalization epsilon 1.001e-5 and Keras's momentum 0.99)."""

    def bn(c):
        return nn.BatchNorm2d(c, eps=1.001e-5, momentum=0.01)

    class Block(nn.Module):
        def __init__(self, cin, filters, stride, shortcut):
            super().__init__()
            f1, f2, f3 = filters
            self.body = nn.Sequential(nn.Conv2d(cin, f1, 1, stride), bn(f1), nn.ReLU(),
                                      nn.Conv2d(f1, f2, 3, 1, padding=1), bn(f2), nn.ReLU(),
                                      nn.Conv2d(f2, f3, 1), bn(f3))
            self.shortcut = nn.Sequential(nn.Conv2d(cin, f3, 1, stride), bn(f3)) if shortcut else nn.Identity()

        def forward(self, x):
            return (self.body(x) + self.shortcut(x)).relu()

    stages = [(3, (64, 64, 256), 1), (4, (128, 128, 512), 2), (6, (256, 256, 1024), 2), (3, (512, 512, 2048), 2)]
    mods = [nn.ZeroPad2d(3), nn.Conv2d(3, 64, 7, 2), bn(64), nn.ReLU(), nn.ZeroPad2d(1), nn.MaxPool2d(3, 2)]
    cin = 64
    for blocks, filters, stride in stages:
        for b in range(blocks):
            mods.append(Block(cin, filters, stride if b == 0 else 1, b == 0))
            cin = filters[2]
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 10)]
    return nn.Sequential(*mods)


def torch_mobilenet_v2(nn):
    """MobileNetV2 (alpha 1.0) as Keras builds it: no bias in the convolutions, BatchNormalization
    epsilon 1e-3 and momentum 0.999, ReLU6, a stride-2 depthwise convolution after padding one row and
    column at the bottom and right (Keras's correct_pad for even sizes)."""

    def bn(c):
        return nn.BatchNorm2d(c, eps=1e-3, momentum=0.001)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride, expansion):
            super().__init__()
            mid = cin * expansion
            mods = [] if expansion == 1 else [nn.Conv2d(cin, mid, 1, bias=False), bn(mid), nn.ReLU6()]
            if stride == 2:
                mods += [nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(mid, mid, 3, 2, groups=mid, bias=False)]
            else:
                mods += [nn.Conv2d(mid, mid, 3, 1, padding=1, groups=mid, bias=False)]
            mods += [bn(mid), nn.ReLU6(), nn.Conv2d(mid, cout, 1, bias=False), bn(cout)]
            self.body = nn.Sequential(*mods)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    # (filters, stride, expansion) of Keras's blocks 0 to 16
    blocks = [(16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (32, 1, 6), (64, 2, 6), (64, 1, 6),
              (64, 1, 6), (64, 1, 6), (96, 1, 6), (96, 1, 6), (96, 1, 6), (160, 2, 6), (160, 1, 6), (160, 1, 6),
              (320, 1, 6)]
    mods = [nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(3, 32, 3, 2, bias=False), bn(32), nn.ReLU6()]
    cin = 32
    for filters, stride, expansion in blocks:
        mods.append(Block(cin, filters, stride, expansion))
        cin = filters
    mods += [nn.Conv2d(cin, 1280, 1, bias=False), bn(1280), nn.ReLU6(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
             nn.Linear(1280, 10)]
    return nn.Sequential(*mods)


def torch_efficientnet_b0(torch, nn):
    """EfficientNetB0 as Keras builds it (torchvision is not in the bench venv): the stem's rescaling by
    1/255 and normalisation (Keras's Normalization, here its initial mean 0 and variance 1, as
    buffers), BatchNormalization epsilon 1e-3 and momentum 0.99, swish (SiLU), stride-2 convolutions
    after Keras's correct_pad, squeeze-and-excite on the block's input filters / 4, drop-connect
    (one keep-or-drop per sample, rate 0.2 * block / 16) before each residual sum, Dropout(0.2) before
    the classifier."""

    def bn(c):
        return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)

    class CorrectPad(nn.Module):
        """imagenet_utils.correct_pad: for an even size, one row (column) less on top (left)."""

        def __init__(self, kernel):
            super().__init__()
            self.c = kernel // 2

        def forward(self, x):
            h, w = x.shape[2], x.shape[3]
            c = self.c
            return nn.functional.pad(x, (c - (1 - w % 2), c, c - (1 - h % 2), c))

    class DropConnect(nn.Module):
        def __init__(self, rate):
            super().__init__()
            self.rate = rate

        def forward(self, x):
            if not self.training or self.rate == 0:
                return x
            keep = torch.empty(x.shape[0], 1, 1, 1, dtype=x.dtype).bernoulli_(1 - self.rate)
            return x * keep / (1 - self.rate)

    class Block(nn.Module):
        def __init__(self, cin, cout, kernel, stride, expand, drop_rate):
            super().__init__()
            mid = cin * expand
            mods = [] if expand == 1 else [nn.Conv2d(cin, mid, 1, bias=False), bn(mid), nn.SiLU()]
            if stride == 2:
                mods += [CorrectPad(kernel), nn.Conv2d(mid, mid, kernel, 2, groups=mid, bias=False)]
            else:
                mods += [nn.Conv2d(mid, mid, kernel, 1, padding=kernel // 2, groups=mid, bias=False)]
            mods += [bn(mid), nn.SiLU()]
            self.body = nn.Sequential(*mods)
            se = max(1, int(cin * 0.25))
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, se, 1), nn.SiLU(), nn.Conv2d(se, mid, 1),
                                    nn.Sigmoid())
            self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), bn(cout))
            self.residual = stride == 1 and cin == cout
            self.drop = DropConnect(drop_rate) if self.residual and drop_rate > 0 else nn.Identity()

        def forward(self, x):
            y = self.body(x)
            y = self.project(y * self.se(y))
            return self.drop(y) + x if self.residual else y

    class Stem(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.zeros(1, 3, 1, 1))
            self.register_buffer("std", torch.ones(1, 3, 1, 1))

        def forward(self, x):
            return (x * (1.0 / 255.0) - self.mean) / self.std

    # (kernel, repeats, filters in, filters out, expansion, stride) of Keras's DEFAULT_BLOCKS_ARGS
    stages = [(3, 1, 32, 16, 1, 1), (3, 2, 16, 24, 6, 2), (5, 2, 24, 40, 6, 2), (3, 3, 40, 80, 6, 2),
              (5, 3, 80, 112, 6, 1), (5, 4, 112, 192, 6, 2), (3, 1, 192, 320, 6, 1)]
    total = sum(s[1] for s in stages)
    mods = [Stem(), CorrectPad(3), nn.Conv2d(3, 32, 3, 2, bias=False), bn(32), nn.SiLU()]
    b = 0
    for kernel, repeats, cin, cout, expand, stride in stages:
        for j in range(repeats):
            mods.append(Block(cin if j == 0 else cout, cout, kernel, stride if j == 0 else 1, expand, 0.2 * b / total))
            b += 1
    mods += [nn.Conv2d(320, 1280, 1, bias=False), bn(1280), nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
             nn.Dropout(0.2), nn.Linear(1280, 10)]
    return nn.Sequential(*mods)


def TorchLstm(nn):
    """LSTM(128) over [batch, 50, 40] (batch first), its last step's h, then Linear(128, 10)."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(40, 128, batch_first=True)
            self.out = nn.Linear(128, 10)

        def forward(self, x):
            y, _ = self.lstm(x)
            return self.out(y[:, -1])

    return Model()


def run_torch(a):
    import torch

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    nn = torch.nn
    if a.workload == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    elif a.workload == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(1600, 10))
    elif a.workload == "mobilenetv2":
        model = torch_mobilenet_v2(nn)
    elif a.workload == "efficientnetb0":
        model = torch_efficientnet_b0(torch, nn)
    elif a.workload == "transformer":
        model = torch_transformer(nn)
    elif a.workload == "lstm":
        model = TorchLstm(nn)
    else:
        model = torch_resnet50(nn)
    x, y = data(a.workload, a.batch)
    if x.ndim == 4:  # PyTorch's layout is channels first (channels_last memory format for convolutions)
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    if x.ndim == 4:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()  # the softmax and its cross-entropy fused, as Keras fuses them
    step_model = torch.compile(model) if a.config == "compile" else model
    n = x.shape[0] // a.batch

    def step(i):
        j = (i % n) * a.batch
        opt.zero_grad(set_to_none=True)
        out = step_model(x[j:j + a.batch])
        loss = loss_fn(out, y[j:j + a.batch])
        loss.backward()
        opt.step()
        # the accuracy Keras and kx compute each step
        (out.detach().argmax(1) == y[j:j + a.batch]).float().mean()

    t0 = time.perf_counter()
    step(0)
    first_ms = (time.perf_counter() - t0) * 1e3
    for i in range(1, a.warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(a.steps):
        step(a.warmup + i)
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    return f"torch {torch.__version__}", first_ms, ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--framework", choices=["keras", "torch"], required=True)
    p.add_argument("--config", choices=["xla", "graph", "eager", "compile"], required=True)
    p.add_argument("--workload", choices=["mlp", "cnn", "resnet50", "mobilenetv2", "efficientnetb0", "transformer", "lstm"], required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    version, first_ms, ms = (run_keras if a.framework == "keras" else run_torch)(a)
    print(json.dumps({"framework": a.framework, "config": a.config, "version": version, "workload": a.workload,
                      "batch": a.batch, "threads": a.threads, "first_step_ms": round(first_ms, 3),
                      "ms_per_step": round(ms, 4), "peak_rss_mb": round(peak_rss_mb(), 1)}), flush=True)


if __name__ == "__main__":
    main()
