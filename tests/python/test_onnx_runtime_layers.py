"""ONNX export of issue 34's convolutions and resampling and issue 35's sequence layers (LSTM, GRU,
Bidirectional as ONNX's LSTM and GRU operators, MultiHeadAttention as MatMul and Softmax nodes), run in
onnxruntime (from PyPI): each layer in a small model, exported, gives kx's predict within 1e-4 (the
sequence layers within 1e-5 relative). Models made in Keras (causal attention, attention_mask, a text
classifier) need Keras too, and are checked against Keras's predict as well. Skipped where onnxruntime
(or Keras) is not installed.

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
try:
    import keras
    from keras import layers
except ImportError:
    keras = None

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
    # Issue 35: LSTM and GRU as ONNX's operators (Keras's gate order, GRU's reset_after), MultiHeadAttention.
    "LSTM last": ((5, 3), "LSTM", dict(units=4)),
    "LSTM sequences backwards": ((5, 3), "LSTM", dict(units=4, return_sequences=True, go_backwards=True)),
    "LSTM backwards last": ((5, 3), "LSTM", dict(units=3, go_backwards=True)),
    "LSTM relu no bias": ((4, 2), "LSTM", dict(units=3, activation="relu", use_bias=False)),
    "LSTM linear gates": ((4, 2), "LSTM", dict(units=3, recurrent_activation="linear")),
    "GRU linear relu": ((4, 2), "GRU", dict(units=3, activation="linear", recurrent_activation="relu")),
    "GRU sequences": ((6, 3), "GRU", dict(units=4, return_sequences=True)),
    "GRU backwards sequences": ((6, 3), "GRU", dict(units=3, return_sequences=True, go_backwards=True)),
    "GRU last no bias": ((6, 3), "GRU", dict(units=3, use_bias=False)),
    "Bidirectional LSTM": ((5, 3), "Bidirectional", dict(layer=dict(class_name="LSTM", config=dict(units=4)))),
    "Bidirectional GRU sequences": ((5, 3), "Bidirectional", dict(
        layer=dict(class_name="GRU", config=dict(units=3, return_sequences=True)))),
    "MultiHeadAttention": ((6, 8), "MultiHeadAttention", dict(num_heads=2, key_dim=4)),
    "MultiHeadAttention value_dim output_shape no bias": ((5, 6), "MultiHeadAttention", dict(
        num_heads=3, key_dim=2, value_dim=4, output_shape=7, use_bias=False)),
}
# Layers called on (query, value): self-attention here.
TWO_INPUTS = {"MultiHeadAttention"}
SEQUENCE_LAYERS = {"LSTM", "GRU", "Bidirectional", "MultiHeadAttention"}
RTOL, ATOL = 1e-5, 1e-6


def run_onnx(path, x):
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@unittest.skipIf(onnxruntime is None, "onnxruntime is not installed")
class OnnxRuntimeLayers(unittest.TestCase):
    def test_each_layer_runs_in_onnxruntime_as_kx_predicts(self):
        rng = np.random.default_rng(3)
        with tempfile.TemporaryDirectory() as d:
            for name, (shape, cls, config) in CASES.items():
                with self.subTest(layer=name):
                    x_in = kx.Input(shape=shape)
                    layer = getattr(kx.layers, cls)(**config)
                    m = kx.Model(inputs=x_in, outputs=layer([x_in, x_in]) if cls in TWO_INPUTS else layer(x_in))
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
                    if cls in SEQUENCE_LAYERS:
                        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)

    def test_what_onnx_cannot_compute_as_kx_does_is_refused(self):
        # A mask (Keras carries the state over masked steps; ONNX's sequence_lens only cuts the end), a
        # Bidirectional whose layer goes backwards.
        cases = {
            "mask": ((5,), [kx.layers.Embedding(input_dim=6, output_dim=3, mask_zero=True), kx.layers.LSTM(units=2)],
                     "mask"),
            "backwards Bidirectional": ((4, 3), [kx.layers.Bidirectional(
                layer=dict(class_name="LSTM", config=dict(units=2, go_backwards=True)))], "backwards"),
        }
        with tempfile.TemporaryDirectory() as d:
            for name, (shape, stack, why) in cases.items():
                with self.subTest(case=name):
                    m = kx.Sequential([kx.Input(shape=shape)] + stack)
                    m.compile(loss="mse")
                    with self.assertRaisesRegex(kx.Error, why):
                        m.export_onnx(os.path.join(d, "refused.onnx"))
        # Activations kx's cells do not compute are refused when the layer is made (they used to run
        # as linear): nothing reaches the export.
        for layer in (kx.layers.GRU(units=2, activation="swish"),
                      kx.layers.LSTM(units=2, recurrent_activation="hard_sigmoid")):
            with self.subTest(layer=layer), self.assertRaisesRegex(kx.Error, "not supported in a recurrent layer"):
                kx.Sequential([kx.Input(shape=(4, 3)), layer])


@unittest.skipIf(onnxruntime is None or keras is None, "onnxruntime or Keras is not installed")
class KerasModelsInOnnxRuntime(unittest.TestCase):
    """Models made in Keras, opened by kx, exported: onnxruntime gives kx's predict and Keras's."""

    def check(self, model, x, name):
        with tempfile.TemporaryDirectory() as d:
            keras_path = os.path.join(d, "m.keras")
            model.save(keras_path)
            ours = kx.models.load_model(keras_path)
            want = ours.predict(x)
            onnx_path = os.path.join(d, "m.onnx")
            ours.export_onnx(onnx_path)
            got = run_onnx(onnx_path, x)
            print(f"{name}: onnxruntime vs kx predict: max |diff| {float(np.abs(got - want.reshape(got.shape)).max()):.3g}")
            np.testing.assert_allclose(got, want.reshape(got.shape), rtol=RTOL, atol=ATOL, err_msg=name + " vs kx")
            np.testing.assert_allclose(got, model.predict(x, verbose=0), rtol=1e-4, atol=1e-5, err_msg=name + " vs Keras")

    def test_text_classifier(self):
        keras.utils.set_random_seed(1)
        i = keras.Input((7,))
        x = layers.Embedding(20, 8)(i)
        x = layers.LSTM(6)(x)
        m = keras.Model(i, layers.Dense(3, activation="softmax")(x))
        m.compile(loss="mse")
        ids = np.random.default_rng(1).integers(0, 20, size=(4, 7)).astype(np.float32)
        self.check(m, ids, "Embedding -> LSTM -> Dense")

    def test_recurrent_stack(self):
        keras.utils.set_random_seed(2)
        i = keras.Input((6, 4))
        x = layers.GRU(5, return_sequences=True)(i)
        x = layers.Bidirectional(layers.LSTM(3, return_sequences=True))(x)
        x = layers.LSTM(4, go_backwards=True, return_sequences=True)(x)
        x = layers.Bidirectional(layers.GRU(3))(x)
        m = keras.Model(i, layers.Dense(2)(x))
        m.compile(loss="mse")
        x = np.random.default_rng(2).normal(size=(3, 6, 4)).astype(np.float32)
        self.check(m, x, "GRU -> Bidirectional LSTM -> backwards LSTM -> Bidirectional GRU")

    def test_transformer_block(self):
        rng = np.random.default_rng(3)
        for causal in (False, True):
            with self.subTest(causal=causal):
                keras.utils.set_random_seed(3)
                i = keras.Input((8, 6))
                x = layers.Dense(16)(i)
                a = layers.MultiHeadAttention(2, 8)(x, x, use_causal_mask=causal)
                x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, a]))
                f = layers.Dense(16)(layers.Dense(32, activation="relu")(x))
                x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, f]))
                m = keras.Model(i, layers.Dense(3, activation="softmax")(layers.Flatten()(x)))
                m.compile(loss="mse")
                self.check(m, rng.normal(size=(4, 8, 6)).astype(np.float32), f"transformer block causal {causal}")

    def test_attention_mask_and_cross_attention(self):
        # The mask from the graph (relu zeroes about half), alone and with the causal mask; with dropout
        # Keras's Softmax path (masked attention 0); a row masked throughout (zero kernel); key = value
        # from another projection.
        rng = np.random.default_rng(4)
        for causal, dropout, zero_mask in ((False, 0.0, False), (True, 0.0, False), (True, 0.3, False),
                                          (False, 0.0, True), (False, 0.3, True)):
            with self.subTest(causal=causal, dropout=dropout, zero_mask=zero_mask):
                keras.utils.set_random_seed(4)
                i = keras.Input((8, 6))
                x = layers.Dense(16)(i)
                v = layers.Dense(5)(i)
                init = "zeros" if zero_mask else "glorot_uniform"
                mask = layers.Dense(8, activation="relu", kernel_initializer=init)(i)
                a = layers.MultiHeadAttention(2, 4, dropout=dropout)(x, v, attention_mask=mask, use_causal_mask=causal)
                m = keras.Model(i, layers.Dense(3)(layers.Flatten()(a)))
                m.compile(loss="mse")
                self.check(m, rng.normal(size=(4, 8, 6)).astype(np.float32),
                           f"attention mask causal {causal} dropout {dropout} all masked {zero_mask}")


if __name__ == "__main__":
    unittest.main()
