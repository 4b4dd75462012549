"""ONNX export of issue 34's convolutions and resampling, run in onnxruntime (from PyPI): each layer in a
small model, exported, gives kx's predict within 1e-4. Skipped where onnxruntime is not installed.

    KX_LIBRARY=build/libkx.so.0 PYTHONPATH=bindings/python /work/venv-bench/bin/python \\
        tests/python/test_onnx_runtime_layers.py
"""
import os
import tempfile
import unittest

import numpy as np

import kx

try:
    import onnxruntime
except ImportError:
    onnxruntime = None

TOLERANCE = 1e-4

# (input shape, the layer's class and config).
CASES = {
    "Conv1D causal dilated": ((9, 3), "Conv1D", dict(filters=4, kernel_size=3, padding="causal", dilation_rate=2,
                                                     activation="relu")),
    "Conv1D same strided": ((10, 2), "Conv1D", dict(filters=3, kernel_size=4, strides=3, padding="same")),
    "Conv1D valid": ((7, 2), "Conv1D", dict(filters=2, kernel_size=3)),
    "MaxPooling1D": ((7, 3), "MaxPooling1D", dict(pool_size=3, strides=2)),
    "AveragePooling1D": ((8, 3), "AveragePooling1D", {}),
    "GlobalAveragePooling1D": ((6, 3), "GlobalAveragePooling1D", {}),
    "GlobalAveragePooling1D keepdims": ((6, 3), "GlobalAveragePooling1D", dict(keepdims=True)),
    "SeparableConv2D": ((6, 5, 3), "SeparableConv2D", dict(filters=4, kernel_size=3, padding="same",
                                                           depth_multiplier=2, activation="tanh")),
    "SeparableConv2D dilated": ((8, 8, 2), "SeparableConv2D", dict(filters=3, kernel_size=3, dilation_rate=2)),
    "DepthwiseConv2D dilated": ((8, 7, 3), "DepthwiseConv2D", dict(kernel_size=3, dilation_rate=2, padding="same",
                                                                   depth_multiplier=2)),
    "Conv2D dilated": ((8, 7, 2), "Conv2D", dict(filters=3, kernel_size=(3, 2), dilation_rate=(2, 3), padding="same")),
    "Conv2DTranspose same": ((3, 4, 2), "Conv2DTranspose", dict(filters=3, kernel_size=3, strides=2, padding="same")),
    "Conv2DTranspose valid": ((3, 3, 2), "Conv2DTranspose", dict(filters=2, kernel_size=(2, 3), strides=(2, 1))),
    "Conv2DTranspose small kernel": ((3, 3, 2), "Conv2DTranspose", dict(filters=2, kernel_size=1, strides=3)),
    "Conv2DTranspose output_padding": ((3, 3, 2), "Conv2DTranspose", dict(filters=2, kernel_size=3, strides=2,
                                                                          padding="same", output_padding=(0, 1))),
    "UpSampling2D nearest": ((3, 4, 2), "UpSampling2D", dict(size=(2, 3))),
    "UpSampling2D bilinear": ((3, 4, 2), "UpSampling2D", dict(interpolation="bilinear")),
    "UpSampling2D bilinear 3x1": ((3, 4, 2), "UpSampling2D", dict(size=(3, 1), interpolation="bilinear")),
}


@unittest.skipIf(onnxruntime is None, "onnxruntime is not installed")
class OnnxRuntimeLayers(unittest.TestCase):
    def test_each_layer_runs_in_onnxruntime_as_kx_predicts(self):
        rng = np.random.default_rng(3)
        with tempfile.TemporaryDirectory() as d:
            for name, (shape, cls, config) in CASES.items():
                with self.subTest(layer=name):
                    x_in = kx.Input(shape=shape)
                    m = kx.Model(inputs=x_in, outputs=getattr(kx.layers, cls)(**config)(x_in))
                    m.compile(loss="mse")
                    # Weights away from their initial values (a zero bias would hide its layout).
                    m.set_weights([rng.normal(size=wshape).astype(np.float32) for _, wshape, _ in m.weights])
                    x = rng.normal(size=(3,) + shape).astype(np.float32)
                    want = m.predict(x).reshape(3, -1)
                    path = os.path.join(d, name.replace(" ", "_") + ".onnx")
                    m.export_onnx(path)
                    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
                    got = session.run(None, {session.get_inputs()[0].name: x})[0].reshape(3, -1)
                    diff = float(np.abs(got - want).max())
                    print(f"{name}: onnxruntime {onnxruntime.__version__} vs kx predict: max |diff| {diff:.3g}")
                    self.assertLessEqual(diff, TOLERANCE)


if __name__ == "__main__":
    unittest.main()
