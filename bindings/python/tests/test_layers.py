"""The Keras-shaped front: kx.layers.<ClassName>(**config), kx.Input, kx.Sequential([...]) and
kx.Model(inputs=, outputs=), over kx_model_add_layer. Each layer kx lists has a case in LAYER_CASES."""
import os
import tempfile
import unittest

import numpy as np

import kx

try:  # Debian's python3-opencv and python3-onnx: the exported files run by a runtime sharing no code with kx
    import cv2
    import onnx
except ImportError:
    cv2 = onnx = None

# (input shape, the layer, whether it merges two inputs): one per class kx lists.
LAYER_CASES = {
    "Dense": ((4,), dict(units=3, activation="relu"), False),
    "Flatten": ((2, 3), {}, False),
    "Dropout": ((4,), dict(rate=0.5), False),
    "Conv2D": ((5, 5, 2), dict(filters=3, kernel_size=(3, 3), padding="same"), False),
    "MaxPooling2D": ((4, 4, 2), dict(pool_size=2), False),
    "AveragePooling2D": ((4, 4, 2), dict(pool_size=(2, 2)), False),
    "GlobalAveragePooling2D": ((4, 4, 2), {}, False),
    "ZeroPadding2D": ((3, 3, 1), dict(padding=((1, 0), (0, 2))), False),
    "Normalization": ((3,), dict(mean=[1, 2, 3], variance=[1, 4, 9]), False),
    "BatchNormalization": ((3,), dict(epsilon=1e-3), False),
    "Add": ((4,), {}, True),
    "Concatenate": ((4,), dict(axis=-1), True),
    "Activation": ((4,), dict(activation="tanh"), False),
    "ReLU": ((2, 3), dict(max_value=6.0), False),
    "DepthwiseConv2D": ((5, 5, 2), dict(kernel_size=3, padding="same", depth_multiplier=2), False),
    "Rescaling": ((4,), dict(scale=0.5, offset=-1.0), False),
    "Reshape": ((6,), dict(target_shape=(2, -1)), False),
    "LeakyReLU": ((2, 3), dict(negative_slope=0.1), False),
    "GlobalMaxPooling2D": ((4, 3, 2), {}, False),
    "LayerNormalization": ((5,), dict(epsilon=1e-6), False),
    "MultiHeadAttention": ((4, 3), dict(num_heads=2, key_dim=2), True),
    "Conv1D": ((6, 2), dict(filters=3, kernel_size=3, padding="causal"), False),
    "MaxPooling1D": ((6, 2), dict(pool_size=2), False),
    "AveragePooling1D": ((6, 2), dict(pool_size=3), False),
    "GlobalAveragePooling1D": ((6, 2), {}, False),
    "SeparableConv2D": ((5, 5, 2), dict(filters=3, kernel_size=3, padding="same"), False),
    "Conv2DTranspose": ((3, 3, 2), dict(filters=2, kernel_size=3, strides=2), False),
    "UpSampling2D": ((3, 3, 2), dict(interpolation="bilinear"), False),
    "Multiply": ((4,), {}, True),
    "TensorOperation": ((4,), dict(operation="Multiply", arguments=[None, 2.0]), False),
    "Embedding": ((5,), dict(input_dim=6, output_dim=3, mask_zero=True), False),
    "LSTM": ((4, 3), dict(units=2, return_sequences=True), False),
    "GRU": ((4, 3), dict(units=2), False),
    "Bidirectional": ((4, 3), dict(layer=dict(class_name="LSTM", config=dict(units=2))), False),
    "Masking": ((4, 3), dict(mask_value=0.5), False),
}
# Layers whose inputs are token ids below a bound, and layers whose ONNX form (ONNX's LSTM and GRU
# operators, attention's 4-D MatMul) is run in onnxruntime (tests/python/test_onnx_runtime_layers.py),
# not in OpenCV.
ID_INPUTS = {"Embedding": 6}
ONNXRUNTIME_ONLY = {"MultiHeadAttention", "LSTM", "GRU", "Bidirectional"}


class KerasShapedFront(unittest.TestCase):
    def test_every_listed_layer_has_a_case_that_builds_predicts_and_exports(self):
        self.assertEqual(sorted(kx.layers.class_names()), sorted(LAYER_CASES))
        for cls, (shape, config, merge) in LAYER_CASES.items():
            with self.subTest(layer=cls):
                x = kx.Input(shape=shape)
                layer = getattr(kx.layers, cls)(**config)
                y = layer([x, x]) if merge else layer(x)
                m = kx.Model(inputs=x, outputs=y)
                self.assertEqual(len(m.layer_names), 1)
                m.compile(loss="mse")
                rng = np.random.default_rng(0)
                if cls in ID_INPUTS:
                    x = rng.integers(0, ID_INPUTS[cls], size=(3,) + shape).astype(np.float32)
                else:
                    x = rng.normal(size=(3,) + shape).astype(np.float32)
                out = m.predict(x).reshape(3, -1)
                self.assertIn(cls, m.to_json())
                with tempfile.TemporaryDirectory() as d:
                    path = os.path.join(d, "m.onnx")
                    m.export_onnx(path)
                    self.assertGreater(os.path.getsize(path), 0)
                    if cv2 is None:
                        continue
                    onnx.checker.check_model(onnx.load(path), full_check=True)
                    if cls in ONNXRUNTIME_ONLY:
                        continue
                    net = cv2.dnn.readNetFromONNX(path)
                    # cv2 reads a 3-D array as one image of channels: rank-2 samples get a unit axis.
                    net.setInput(np.ascontiguousarray(x if x.ndim != 3 else x[..., None]))
                    got = net.forward().reshape(3, -1)
                    self.assertLessEqual(float(np.abs(got - out).max()), 1e-4)

    def test_rescaling_per_channel_predicts_and_exports(self):
        # Keras's per-channel lists, on images (ONNX's NCHW constants [C, 1, 1]) and on features.
        for shape, scale, offset in (((3, 4, 2), [0.5, -2.0], [1.0, 0.25]), ((3,), [0.5, 4.0, -1.0], 0.5)):
            with self.subTest(shape=shape):
                x = kx.Input(shape=shape)
                m = kx.Model(inputs=x, outputs=kx.layers.Rescaling(scale=scale, offset=offset)(x))
                m.compile(loss="mse")
                xs = np.random.default_rng(2).normal(size=(3,) + shape).astype(np.float32)
                out = m.predict(xs).reshape(xs.shape)
                want = xs * np.array(scale, np.float32) + np.array(offset, np.float32)
                np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
                if cv2 is None:
                    continue
                with tempfile.TemporaryDirectory() as d:
                    path = os.path.join(d, "m.onnx")
                    m.export_onnx(path)
                    onnx.checker.check_model(onnx.load(path), full_check=True)
                    net = cv2.dnn.readNetFromONNX(path)
                    net.setInput(xs)
                    got = net.forward().reshape(out.shape)
                    self.assertLessEqual(float(np.abs(got - out).max()), 1e-5)

    def test_sequential_from_a_list_equals_the_add_methods(self):
        a = kx.Sequential([kx.Input(shape=(28, 28)), kx.layers.Flatten(), kx.layers.Dense(units=16, activation="relu"),
                           kx.layers.Dense(units=10, activation="softmax")])
        b = kx.Sequential(kx.Strategy.default(), input_shape=(28, 28))
        b.add_flatten().add_dense(16, "relu").add_dense(10, "softmax")
        self.assertEqual(a.layer_names, b.layer_names)
        self.assertEqual(a.num_params, b.num_params)
        self.assertEqual(a.to_json(), b.to_json())

    def test_functional_residual_block_trains(self):
        x = kx.Input(shape=(6,), name="features")
        h = kx.layers.Dense(units=6, activation="relu")(x)
        s = kx.layers.Add()([x, h])
        y = kx.layers.Dense(units=2, activation="softmax", name="head")(s)
        m = kx.Model(inputs=x, outputs=y)
        self.assertEqual(m.layer_names, ["dense", "add", "head"])
        m.compile(metrics=["accuracy"])
        xs = np.random.default_rng(1).normal(size=(64, 6)).astype(np.float32)
        ys = (xs[:, 0] > 0).astype(np.int64)
        h = m.fit(kx.Dataset.from_arrays(xs, ys).batch(16), epochs=3)
        self.assertTrue(np.isfinite(h.history["loss"][-1]))
        self.assertIn('"Functional"', m.to_json())

    def test_bad_layers_raise_kx_errors(self):
        with self.assertRaises(kx.Error) as e:
            kx.Sequential([kx.Input(shape=(4,)), kx.layers.NoSuchLayer()])
        self.assertIn("NoSuchLayer", str(e.exception))
        with self.assertRaises(kx.Error):
            kx.Sequential([kx.Input(shape=(4,)), kx.layers.Dense(units="three")])
        with self.assertRaises(TypeError):
            kx.layers.Dense(10)  # settings go by name
        x = kx.Input(shape=(4,))
        shared = kx.layers.Dense(units=4)
        with self.assertRaises(kx.Error):
            kx.Model(inputs=x, outputs=kx.layers.Add()([shared(x), shared(x)]))


if __name__ == "__main__":
    unittest.main()
