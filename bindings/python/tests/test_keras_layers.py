"""The layers of the mobile models against the real Keras 3: each layer, in a small model built and
saved by Keras, opened in kx with the same weights, gives Keras's forward (<= 1e-5 relative) and
Keras's gradients (one SGD step of rate 1: the weights' change is the gradient, also of the layer
before it, which receives the layer's input gradient); and keras.applications.MobileNetV2 saved as
.keras opens in kx and predicts and trains as Keras does, and kx.applications.MobileNetV2 loads its
weights by name. Needs Keras 3 with TensorFlow (ctest's python_keras_layers runs this file in the
pinned environment of scripts/python_venv.sh keras); skipped without them."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TensorFlow turns its oneDNN kernels on by default only on some Intel CPUs; elsewhere (an AMD EPYC, say)
# its Eigen kernels refuse depthwise convolutions with unequal strides and dilated transposed ones, so
# the reference could not be computed. On every CPU alike:
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import numpy as np

import kx

try:
    import keras
    from keras import layers
    import tensorflow as tf
    # Each Keras model here takes a step or two: tracing its step into a graph took longer than the steps
    # themselves (this file ran 3.5x longer). Eagerly, Keras runs the same TensorFlow kernels.
    tf.config.run_functions_eagerly(True)
except ImportError:  # the test command's venv has it; a bare python3 does not
    keras = None

RTOL, ATOL = 1e-5, 1e-6

# Cases whose reference TensorFlow's oneDNN kernels do not give reproducibly: they run in a child process
# with TF_ENABLE_ONEDNN_OPTS=0 (its Eigen kernels). On an AVX2 CPU (AMD EPYC Zen 1) oneDNN's filter
# gradient of a transposed convolution whose kernel is smaller than its strides came out different in
# about 4 runs of 10 (the same weights and batch, three elements off by up to 0.08); Eigen's was the same
# in 40 runs of 40 and is kx's to 3e-8.
EIGEN_REFERENCE = {"Conv2DTranspose small kernel"}
# The child's environment variable: the layer cases it runs, as a JSON list.
CASES_VARIABLE = "KX_KERAS_LAYER_CASES"


# (input shape, the layer under test, input scale): a 1x1 convolution before it (Conv1D for
# (steps, channels) samples; its gradient is the layer's input gradient carried one step further) and
# a Dense after it.
def layer_cases():
    return {
        "ReLU6": ((6, 6, 3), layers.ReLU(max_value=6.0), 4.0),
        "ReLU leaky": ((6, 6, 3), layers.ReLU(negative_slope=0.2), 1.0),
        "ReLU capped leaky threshold": ((6, 6, 3), layers.ReLU(max_value=2.0, negative_slope=0.1, threshold=0.5), 2.0),
        "ReLU threshold": ((6, 6, 3), layers.ReLU(threshold=0.3), 1.0),
        "DepthwiseConv2D same": ((7, 6, 3), layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2), 1.0),
        "DepthwiseConv2D strided": ((7, 7, 4), layers.DepthwiseConv2D(3, strides=2, use_bias=False), 1.0),
        "DepthwiseConv2D relu": ((8, 8, 4), layers.DepthwiseConv2D((3, 2), strides=(2, 1), padding="same",
                                                                   activation="relu"), 1.0),
        "DepthwiseConv2D dilated": ((8, 7, 3), layers.DepthwiseConv2D(3, dilation_rate=2, padding="same",
                                                                      depth_multiplier=2), 1.0),
        "DepthwiseConv2D dilated valid": ((8, 8, 2), layers.DepthwiseConv2D((2, 3), dilation_rate=(3, 2),
                                                                            activation="relu"), 1.0),
        "Conv2D dilated": ((8, 7, 2), layers.Conv2D(3, 3, dilation_rate=2, padding="same"), 1.0),
        "Conv2D dilated valid": ((8, 8, 2), layers.Conv2D(2, (2, 3), dilation_rate=(3, 2), activation="relu",
                                                          use_bias=False), 1.0),
        "ZeroPadding2D default": ((5, 4, 3), layers.ZeroPadding2D(), 1.0),
        "GlobalAveragePooling2D keepdims": ((5, 4, 3), layers.GlobalAveragePooling2D(keepdims=True), 1.0),
        "Rescaling": ((5, 4, 3), layers.Rescaling(1.0 / 127.5, offset=-1.0), 100.0),
        # Per channel (the Conv2D before it has 5): lists, and a NumPy array Keras serialises as "__numpy__".
        "Rescaling per channel": ((5, 4, 3), layers.Rescaling([0.5, -2.0, 0.25, 1.5, 3.0],
                                                              offset=[0.1, 0.2, -0.3, 0.4, 0.5]), 1.0),
        "Rescaling NumPy scale": ((5, 4, 3), layers.Rescaling(np.array([0.437, 2.5, -1.0, 0.75, 1.25], np.float32),
                                                              offset=-1.0), 1.0),
        "Reshape": ((4, 4, 3), layers.Reshape((2, -1)), 1.0),
        "LeakyReLU default": ((6, 6, 3), layers.LeakyReLU(), 1.0),
        "LeakyReLU 0.1": ((6, 6, 3), layers.LeakyReLU(negative_slope=0.1), 1.0),
        "GlobalMaxPooling2D": ((5, 4, 3), layers.GlobalMaxPooling2D(), 1.0),
        "GlobalMaxPooling2D keepdims": ((5, 4, 3), layers.GlobalMaxPooling2D(keepdims=True), 1.0),
        "SeparableConv2D same": ((7, 6, 3), layers.SeparableConv2D(4, 3, padding="same", depth_multiplier=2), 1.0),
        "SeparableConv2D strided relu": ((8, 7, 3), layers.SeparableConv2D(3, (3, 2), strides=2, activation="relu",
                                                                           use_bias=False), 1.0),
        "SeparableConv2D dilated": ((8, 8, 2), layers.SeparableConv2D(3, 3, dilation_rate=2, padding="same"), 1.0),
        "Conv2DTranspose same": ((3, 4, 3), layers.Conv2DTranspose(4, 3, strides=2, padding="same"), 1.0),
        "Conv2DTranspose valid": ((3, 3, 2), layers.Conv2DTranspose(3, (2, 3), strides=(2, 1), activation="relu"), 1.0),
        "Conv2DTranspose small kernel": ((3, 3, 2), layers.Conv2DTranspose(2, 1, strides=3), 1.0),
        "Conv2DTranspose output_padding": ((3, 3, 2), layers.Conv2DTranspose(2, 3, strides=2, padding="same",
                                                                             output_padding=(0, 1)), 1.0),
        "Conv2DTranspose dilated": ((4, 3, 2), layers.Conv2DTranspose(2, 2, dilation_rate=2, padding="same"), 1.0),
        "UpSampling2D nearest": ((3, 4, 2), layers.UpSampling2D((2, 3)), 1.0),
        "UpSampling2D bilinear": ((3, 4, 2), layers.UpSampling2D(2, interpolation="bilinear"), 1.0),
        "UpSampling2D bilinear 3x1": ((3, 4, 2), layers.UpSampling2D((3, 1), interpolation="bilinear"), 1.0),
        "Conv1D valid": ((9, 3), layers.Conv1D(4, 3), 1.0),
        "Conv1D same strided": ((8, 3), layers.Conv1D(3, 3, strides=2, padding="same", activation="relu"), 1.0),
        "Conv1D causal dilated": ((9, 2), layers.Conv1D(3, 2, padding="causal", dilation_rate=2), 1.0),
        "Conv1D same dilated": ((10, 2), layers.Conv1D(2, 3, padding="same", dilation_rate=3, use_bias=False), 1.0),
        "MaxPooling1D": ((7, 3), layers.MaxPooling1D(), 1.0),
        "MaxPooling1D overlapping": ((7, 3), layers.MaxPooling1D(3, strides=1), 1.0),
        "AveragePooling1D": ((8, 3), layers.AveragePooling1D(3, strides=2), 1.0),
        "GlobalAveragePooling1D": ((6, 3), layers.GlobalAveragePooling1D(), 1.0),
        "GlobalAveragePooling1D keepdims": ((6, 3), layers.GlobalAveragePooling1D(keepdims=True), 1.0),
        **activation_cases(),
    }


# Keras's activation strings, as an Activation layer and in the layers that take `activation=`; the
# input scale spreads the values over the kinks (0, +-3, 6).
def activation_cases():
    cases = {}
    for name in ("relu6", "swish", "silu", "hard_swish", "hard_silu", "hard_sigmoid", "gelu", "elu", "leaky_relu",
                 "softplus"):
        cases[f"Activation {name}"] = ((5, 5, 3), layers.Activation(name), 4.0)
    for name in ("swish", "hard_swish", "gelu", "relu6"):
        cases[f"Conv2D {name}"] = ((6, 6, 3), layers.Conv2D(4, 3, padding="same", activation=name), 3.0)
        cases[f"DepthwiseConv2D {name}"] = ((6, 6, 3), layers.DepthwiseConv2D(3, activation=name), 3.0)
    return cases


# Layers of sequences [steps, features] (input shape, layer, call keyword arguments, whether the layer
# takes (query, value)): a Dense before it on every step, a Flatten and a Dense after it.
def sequence_cases():
    return {
        "Dense on sequences": ((5, 6), layers.Dense(4, activation="tanh"), {}, False),
        "LayerNormalization": ((5, 6), layers.LayerNormalization(), {}, False),
        "LayerNormalization epsilon 1e-6 no center": ((5, 6), layers.LayerNormalization(epsilon=1e-6, center=False),
                                                      {}, False),
        "MultiHeadAttention": ((6, 8), layers.MultiHeadAttention(2, 4), {}, True),
        "MultiHeadAttention causal": ((6, 8), layers.MultiHeadAttention(2, 4), {"use_causal_mask": True}, True),
        "MultiHeadAttention value_dim output_shape no bias": (
            (5, 6), layers.MultiHeadAttention(3, 2, value_dim=4, output_shape=7, use_bias=False), {}, True),
    }


def wrapped_sequence(shape, layer, kwargs, attention, cross=False):
    i = keras.Input(shape)
    x = layers.Dense(5, name="before")(i)
    if attention:
        # Cross-attention: the value from another projection of the input (key = value).
        v = layers.Dense(3, name="before_value")(i) if cross else x
        x = layer(x, v, **kwargs)
    else:
        x = layer(x)
    x = layers.Flatten()(x)
    o = layers.Dense(3, name="after")(x)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    return m


# A small transformer encoder: a projection plus a learned position term, two blocks of self-attention
# (the second causal, with dropout 0: one step must be deterministic) + residual + LayerNormalization
# + feed-forward + residual + LayerNormalization, then a classifier.
def transformer(steps=8, features=6, d_model=16):
    i = keras.Input((steps, features))
    x = layers.Dense(d_model, name="embed")(i)
    for block, causal in ((0, False), (1, True)):
        a = layers.MultiHeadAttention(2, 8, name=f"attention_{block}")(x, x, use_causal_mask=causal)
        x = layers.LayerNormalization(epsilon=1e-6, name=f"norm_a_{block}")(layers.Add()([x, a]))
        f = layers.Dense(32, activation="relu", name=f"ff_in_{block}")(x)
        f = layers.Dense(d_model, name=f"ff_out_{block}")(f)
        x = layers.LayerNormalization(epsilon=1e-6, name=f"norm_f_{block}")(layers.Add()([x, f]))
    x = layers.Flatten()(x)
    o = layers.Dense(3, activation="softmax", name="classes")(x)
    return keras.Model(i, o)


def wrapped(shape, layer):
    i = keras.Input(shape)
    before = layers.Conv1D if len(shape) == 2 else layers.Conv2D  # steps or images
    x = before(5, 1, name="before")(i)
    x = layer(x)
    x = layers.Flatten()(x)
    o = layers.Dense(3, name="after")(x)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    return m


def keras_weights(model):
    return [w.numpy() for w in model.weights]


def max_relative(got, want):
    got, want = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), ATOL / RTOL))) if got.size else 0.0


@unittest.skipIf(keras is None, "Keras is not installed (scripts/python_venv.sh keras makes the pinned environment)")
class KerasLayers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def save(self, model, name):
        path = os.path.join(self.dir.name, name.replace(" ", "_") + ".keras")
        model.save(path)
        return path

    def check_against_keras(self, name, theirs, shape, scale):
        """theirs (compiled with SGD(1.0) and mse) saved as .keras and opened in kx: the same forward and
        the same gradients (one step of rate 1: the weights' change). Returns kx's model."""
        rng = np.random.default_rng(4)
        x = (rng.normal(size=(8,) + shape) * scale).astype(np.float32)
        y = rng.normal(size=(8,) + tuple(theirs.output_shape[1:])).astype(np.float32)
        ours = kx.models.load_model(self.save(theirs, name))
        want = theirs.predict(x, verbose=0)
        got = ours.predict(x).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name}: forward")
        before = keras_weights(theirs)
        theirs.train_on_batch(x, y)
        ours.train_on_batch(x, y)
        steps = [(w0 - g.reshape(w0.shape), w0 - w1) for w0, w1, g in zip(before, keras_weights(theirs),
                                                                          ours.get_weights())]
        print(f"{name}: forward {max_relative(got, want):.1e}, gradients "
              f"{max(max_relative(a, b) for a, b in steps):.1e} (max relative difference)")
        for w0, w1, got in zip(before, keras_weights(theirs), ours.get_weights()):
            # Rate 1: the change is the gradient. A weight's gradient is a sum over the batch and the
            # positions: where its terms cancel, float32 rounding alone moves it by about 1e-4 of itself
            # (Keras's own value for such an element moved that much between its oneDNN and Eigen kernels,
            # kx unchanged). So the absolute tolerance is also RTOL of the weight's largest gradient.
            np.testing.assert_allclose(w0 - got.reshape(w0.shape), w0 - w1, rtol=RTOL,
                                       atol=max(ATOL, RTOL * float(np.abs(w0 - w1).max(initial=0.0))),
                                       err_msg=f"{name}: gradient")
        return ours, x

    def test_each_layer_gives_keras_forward_and_gradients(self):
        only = json.loads(os.environ.get(CASES_VARIABLE, "null"))
        in_child = set() if only is not None or os.environ["TF_ENABLE_ONEDNN_OPTS"] == "0" else EIGEN_REFERENCE
        cases = layer_cases()
        self.assertLessEqual(set(only or ()) | in_child, set(cases), "a case named for the child does not exist")
        ran = set()
        for name, (shape, layer, scale) in cases.items():
            if (only is not None and name not in only) or name in in_child:
                continue
            with self.subTest(layer=name):
                keras.utils.set_random_seed(3)
                ran.add(name)
                self.check_against_keras(name, wrapped(shape, layer), shape, scale)
        if only is not None:
            self.assertEqual(ran, set(only))
        if in_child:
            # TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, when it loads: Eigen's kernels need a new process.
            test = f"{type(self).__name__}.{self._testMethodName}"
            env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", **{CASES_VARIABLE: json.dumps(sorted(in_child))})
            child = subprocess.run([sys.executable, os.path.abspath(__file__), test], env=env,
                                   capture_output=True, text=True, timeout=600)
            print(child.stdout, child.stderr, sep="", end="")
            self.assertEqual(child.returncode, 0, f"{sorted(in_child)} against Eigen's kernels failed")
            self.assertIn("Ran 1 test", child.stderr)  # not skipped: a child without Keras would pass
            self.assertNotIn("skipped", child.stderr)

    def test_dense_activations_give_keras_forward_and_gradients(self):
        for act in ("swish", "hard_swish", "hard_sigmoid", "gelu", "elu", "leaky_relu", "softplus", "relu6"):
            with self.subTest(activation=act):
                keras.utils.set_random_seed(3)
                i = keras.Input((6,))
                o = layers.Dense(3, name="after")(layers.Dense(5, activation=act)(i))
                m = keras.Model(i, o)
                m.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
                self.check_against_keras(f"Dense {act}", m, (6,), 3.0)

    def test_operation_nodes_give_keras_forward_and_gradients_and_save_back(self):
        # MobileNetV3's hard_sigmoid and hard_swish as Keras writes them (x + 3.0, * (1.0 / 6.0), x * h),
        # squeeze-and-excite's broadcast products (the Multiply layer and the * operation), constants on
        # either side, a division by a tensor, a negation and keras.ops.gelu's tanh form.
        keras.utils.set_random_seed(3)
        i = keras.Input((6, 6, 3))
        x = layers.Conv2D(4, 1, name="before")(i)
        h = layers.ReLU(6.0)(x + 3.0) * (1.0 / 6.0)
        y = x * h
        s = layers.GlobalAveragePooling2D(keepdims=True)(y)
        s = layers.Conv2D(4, 1)(s)
        s = layers.Activation("hard_sigmoid")(s)
        z = layers.Multiply()([y, s])
        w = z * s
        v = -((1.0 - w) / 6 - x)
        v = 2.0 / (v * v + 1.0) + keras.ops.gelu(v, approximate=True)
        o = layers.Dense(3, name="after")(layers.Flatten()(v))
        theirs = keras.Model(i, o)
        theirs.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
        ours, x_in = self.check_against_keras("operations", theirs, (6, 6, 3), 2.0)
        # kx writes the operations back as Keras's nodes: Keras opens kx's file and predicts as kx does.
        out = os.path.join(self.dir.name, "operations_from_kx.keras")
        ours.save(out)
        again = keras.models.load_model(out, compile=False)  # kx writes SGD's rate 1.0 as 1, which Keras refuses
        want = ours.predict(x_in).reshape(-1, 3)
        np.testing.assert_allclose(again.predict(x_in, verbose=0), want, rtol=RTOL, atol=ATOL)

    def check_one_step(self, name, theirs, ours, x, y, skip=(), step_atol=ATOL):
        want = theirs.predict(x, verbose=0)
        got = ours.predict(x).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name}: forward")
        before = keras_weights(theirs)
        theirs.train_on_batch(x, y)
        ours.train_on_batch(x, y)
        worst = 0.0
        for v, w0, w1, got_w in zip(theirs.weights, before, keras_weights(theirs), ours.get_weights()):
            if v.path in skip:
                continue
            worst = max(worst, max_relative(w0 - got_w.reshape(w0.shape), w0 - w1))
            np.testing.assert_allclose(w0 - got_w.reshape(w0.shape), w0 - w1, rtol=RTOL, atol=step_atol,
                                       err_msg=f"{name}: step of {v.path}")
        print(f"{name}: forward {max_relative(got, want):.1e}, step {worst:.1e} (max relative difference)")

    def test_each_sequence_layer_gives_keras_forward_and_gradients(self):
        cases = [(name, case, False) for name, case in sequence_cases().items()]
        cases.append(("MultiHeadAttention cross", ((6, 8), layers.MultiHeadAttention(2, 3), {}, True), True))
        for name, (shape, layer, kwargs, attention), cross in cases:
            with self.subTest(layer=name):
                keras.utils.set_random_seed(3)
                theirs = wrapped_sequence(shape, layer, kwargs, attention, cross)
                rng = np.random.default_rng(4)
                x = rng.normal(size=(8,) + shape).astype(np.float32)
                y = rng.normal(size=(8, 3)).astype(np.float32)
                ours = kx.models.load_model(self.save(theirs, name))
                self.check_one_step(name, theirs, ours, x, y)

    def test_transformer_takes_keras_adam_step(self):
        keras.utils.set_random_seed(8)
        theirs = transformer()
        theirs.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
        rng = np.random.default_rng(9)
        x = rng.normal(size=(16, 8, 6)).astype(np.float32)
        y = rng.integers(0, 3, 16).astype(np.float32)
        ours = kx.models.load_model(self.save(theirs, "transformer"))
        self.assertEqual(ours.layer_names, [l.name for l in theirs.layers[1:]])
        # The key projection's bias moves every score of a query alike, which the softmax ignores: its
        # gradient is zero but for rounding, and Adam turns rounding noise into full steps.
        keys = {f"attention_{b}/key/bias" for b in (0, 1)}
        # Adam's first step is lr g / (|g| + epsilon): where |g| is near epsilon (1e-7), a difference d
        # in g moves the step by about lr d / epsilon, so float32-level differences of such gradients
        # (1e-10) move their steps by 1e-6. 1% of the rate bounds that; larger steps stay within 1e-5.
        self.check_one_step("transformer, one Adam step", theirs, ours, x, y, skip=keys, step_atol=1e-2 * 1e-3)
        # And back: the trained kx model saved as .keras opens in Keras and predicts as kx does.
        path = os.path.join(self.dir.name, "transformer_from_kx.keras")
        ours.save(path)
        again = keras.models.load_model(path)
        np.testing.assert_allclose(again.predict(x, verbose=0), ours.predict(x).reshape(16, 3), rtol=RTOL, atol=ATOL,
                                   err_msg="kx's .keras file in Keras")
    def test_attention_mask_from_the_graph_gives_keras_forward_and_adam_step(self):
        # attention(x, x, attention_mask=m, use_causal_mask=...) with m = relu(Dense(8)(input)) [8, 8]: zeros
        # mask about half the positions (kx's models have one input, so the mask is computed from it).
        def model(causal, dropout, zero_mask):
            keras.utils.set_random_seed(8)
            i = keras.Input((8, 6))
            x = layers.Dense(16, name="embed")(i)
            init = "zeros" if zero_mask else "glorot_uniform"
            m = layers.Dense(8, activation="relu", kernel_initializer=init, name="mask_source")(i)
            a = layers.MultiHeadAttention(2, 8, dropout=dropout, name="attention")(
                x, x, attention_mask=m, use_causal_mask=causal)
            o = layers.Dense(3, activation="softmax", name="classes")(layers.Flatten()(a))
            theirs = keras.Model(i, o)
            theirs.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
            return theirs
        rng = np.random.default_rng(9)
        x = rng.normal(size=(16, 8, 6)).astype(np.float32)
        y = rng.integers(0, 3, 16).astype(np.float32)
        for causal in (False, True):
            with self.subTest(causal=causal):
                theirs = model(causal, 0.0, False)
                name = f"attention mask causal {causal}"
                ours = kx.models.load_model(self.save(theirs, name))
                keys = {"attention/key/bias"}  # see test_transformer_takes_keras_adam_step
                self.check_one_step(name + ", one Adam step", theirs, ours, x, y, skip=keys, step_atol=1e-2 * 1e-3)
                path = os.path.join(self.dir.name, name.replace(" ", "_") + "_from_kx.keras")
                ours.save(path)
                again = keras.models.load_model(path)
                np.testing.assert_allclose(again.predict(x, verbose=0), ours.predict(x).reshape(16, 3), rtol=RTOL,
                                           atol=ATOL, err_msg="kx's .keras file in Keras")
        # Every position masked: Keras's fused path (dropout 0) attends uniformly, its Softmax path
        # (dropout on) nowhere; predict (no dropout) tells them apart.
        for dropout in (0.0, 0.25):
            with self.subTest(all_masked=True, dropout=dropout):
                theirs = model(False, dropout, True)
                ours = kx.models.load_model(self.save(theirs, f"attention all masked {dropout}"))
                want = theirs.predict(x, verbose=0)
                np.testing.assert_allclose(ours.predict(x).reshape(want.shape), want, rtol=RTOL, atol=ATOL,
                                           err_msg=f"all masked, dropout {dropout}")

    @staticmethod
    def padded_tokens(rng, n=8, steps=8, vocab=20):
        """Ids in 1..vocab-1 with 0 (padding) at the end, at the start and in holes; every sample keeps
        a token (Keras's masked average of no steps is 0 / 0)."""
        ids = rng.integers(1, vocab, size=(n, steps)).astype(np.int32)
        for r in range(n):
            if r % 3 == 0:
                ids[r, steps - 1 - r % (steps - 1):] = 0
            elif r % 3 == 1:
                ids[r, : r % steps] = 0
            else:
                ids[r, ::3] = 0
        return ids

    @staticmethod
    def masked_attention_cases():
        """Models of token ids whose Embedding(mask_zero=True) masks reach MultiHeadAttention (or not,
        as in Keras), each a function of the attention's dropout."""
        def embedded(i, name="embedding"):
            return layers.Embedding(20, 8, mask_zero=True, name=name)(i)

        def head(x):
            return layers.Dense(3, name="classes")(layers.GlobalAveragePooling1D()(x))

        def attention(dropout=0.0, **call):
            return lambda q, v: layers.MultiHeadAttention(2, 4, dropout=dropout, name="attention")(q, v, **call)

        def mha(i, dropout):  # the brief's model: Embedding -> MHA -> GlobalAveragePooling1D -> Dense
            x = embedded(i)
            return head(attention(dropout)(x, x))

        def block(i, dropout):  # the layers of an encoder block between the Embedding and the pooling
            x = layers.Dense(8, name="project")(embedded(i))
            x = layers.Dropout(dropout)(x)
            a = attention(dropout)(x, x)
            x = layers.LayerNormalization(name="norm")(layers.Add()([x, a]))
            return head(layers.Dense(8, activation="relu", name="feed_forward")(x))

        def causal(i, dropout):
            x = embedded(i)
            return head(attention(dropout, use_causal_mask=True)(x, x))

        def two_masks(i, dropout):  # two Embeddings' masks: Add ORs them (the same ids: the same mask)
            x = layers.Add()([embedded(i), embedded(i, "second")])
            return head(attention(dropout)(x, embedded(i, "values")))

        def ended(i, dropout):  # an operation node (x * 2 + 0.5) ends Keras's mask
            x = embedded(i) * 2.0 + 0.5
            return head(attention(dropout)(x, x))

        def masked_sum(i, dropout):  # Add of a masked and an unmasked tensor: Keras sums the values as
            x = embedded(i)           # they are (the padding's too, which Flatten hands on)
            x = layers.Add()([x, layers.Dense(8, name="unmasked")(x * 1.5)])
            return layers.Dense(3, name="classes")(layers.Flatten()(layers.Dropout(dropout)(x)))

        return {"MHA": mha, "encoder block": block, "causal": causal, "two masks": two_masks,
                "operation node": ended, "masked sum": masked_sum}

    def test_keras_masks_reach_attention_as_in_keras(self):
        rng = np.random.default_rng(4)
        x = self.padded_tokens(rng)
        y = rng.normal(size=(8, 3)).astype(np.float32)
        for name, body in self.masked_attention_cases().items():
            def model(dropout, optimizer, loss="mse"):
                keras.backend.clear_session()
                keras.utils.set_random_seed(3)
                i = keras.Input((8,), dtype="int32")
                m = keras.Model(i, body(i, dropout))
                m.compile(optimizer=optimizer, loss=loss)
                return m
            with self.subTest(model=name, step="gradients"):
                theirs = model(0.0, keras.optimizers.SGD(1.0))
                ours = kx.models.load_model(self.save(theirs, name))
                self.check_one_step(f"masked {name}", theirs, ours, x, y)
            with self.subTest(model=name, step="Adam"):
                theirs = model(0.0, keras.optimizers.Adam(1e-3))
                ours = kx.models.load_model(self.save(theirs, name + " adam"))
                # See test_transformer_takes_keras_adam_step; the embeddings' step differs where an id
                # repeats in the batch (TensorFlow's IndexedSlices, test_text_classifier_takes_one_adam_step_as_keras),
                # their gradient is checked above.
                keys = {"attention/key/bias", "embedding/embeddings", "second/embeddings", "values/embeddings"}
                self.check_one_step(f"masked {name}, one Adam step", theirs, ours, x, y, skip=keys,
                                    step_atol=1e-2 * 1e-3)
            with self.subTest(model=name, step="dropout, predict"):  # Keras's Softmax path
                theirs = model(0.25, keras.optimizers.SGD(1.0))
                ours = kx.models.load_model(self.save(theirs, name + " dropout"))
                want = theirs.predict(x, verbose=0)
                np.testing.assert_allclose(ours.predict(x).reshape(want.shape), want, rtol=RTOL, atol=ATOL)

    def test_recurrent_dropout_models_open_and_predict_as_keras(self):
        # LSTM and GRU with input and recurrent dropout: a .keras file opens, and inference (no dropout)
        # is Keras's.
        keras.utils.set_random_seed(3)
        i = keras.Input((6, 4))
        x = layers.LSTM(5, return_sequences=True, dropout=0.3, recurrent_dropout=0.2)(i)
        x = layers.GRU(4, return_sequences=True, recurrent_dropout=0.4)(x)
        x = layers.Bidirectional(layers.GRU(3, dropout=0.2, recurrent_dropout=0.1))(x)
        theirs = keras.Model(i, layers.Dense(2)(x))
        theirs.compile(optimizer="adam", loss="mse")
        ours = kx.models.load_model(self.save(theirs, "recurrent dropout"))
        x = np.random.default_rng(1).normal(size=(8, 6, 4)).astype(np.float32)
        want = theirs.predict(x, verbose=0)
        np.testing.assert_allclose(ours.predict(x).reshape(want.shape), want, rtol=RTOL, atol=ATOL)

    def small_model(self, name, optimizer, loss):
        # A Dense model compiled in Keras, saved and opened in kx with its compile config.
        keras.utils.set_random_seed(8)
        i = keras.Input((6,))
        x = layers.Dense(5, activation="tanh", name="hidden")(i)
        o = layers.Dense(3, name="out")(x)
        theirs = keras.Model(i, o)
        theirs.compile(optimizer=optimizer, loss=loss)
        return theirs, kx.models.load_model(self.save(theirs, name))

    def test_losses_give_keras_value_and_gradient(self):
        rng = np.random.default_rng(9)
        x = rng.normal(size=(16, 6)).astype(np.float32)
        y = (rng.normal(size=(16, 3)) * 2).astype(np.float32)  # errors on both sides of Huber's delta
        # Not Huber(delta=0.3): Keras 3.15's Huber.get_config leaves delta out, so its own file reloads
        # with delta 1 (kx reads a delta where a config has one; tests/unit/test_losses.cpp checks 0.7).
        for name, loss in (("mae", "mae"), ("mean_absolute_error", keras.losses.MeanAbsoluteError()),
                           ("huber default", keras.losses.Huber()), ("huber function", "huber")):
            with self.subTest(loss=name):
                theirs, ours = self.small_model("loss " + name, keras.optimizers.SGD(1.0), loss)
                before = keras_weights(theirs)
                want_loss = float(theirs.train_on_batch(x, y))
                got = ours.train_on_batch(x, y)
                got_loss = float(got[0] if isinstance(got, (tuple, list)) else got)
                print(f"loss {name}: value {got_loss:.7g} (Keras {want_loss:.7g})")
                self.assertLessEqual(abs(got_loss - want_loss), RTOL * abs(want_loss) + ATOL, name)
                for w0, w1, w in zip(before, keras_weights(theirs), ours.get_weights()):
                    np.testing.assert_allclose(w0 - w.reshape(w0.shape), w0 - w1, rtol=RTOL, atol=ATOL,
                                               err_msg=f"{name}: gradient")

    def test_optimizers_take_keras_steps(self):
        rng = np.random.default_rng(10)
        batches = [(rng.normal(size=(16, 6)).astype(np.float32), rng.normal(size=(16, 3)).astype(np.float32))
                   for _ in range(6)]
        cases = {
            "AdamW default": lambda: keras.optimizers.AdamW(),
            "AdamW strong decay": lambda: keras.optimizers.AdamW(learning_rate=0.01, weight_decay=0.1, beta_1=0.8),
            "RMSprop default": lambda: keras.optimizers.RMSprop(),
            "RMSprop momentum centered": lambda: keras.optimizers.RMSprop(learning_rate=0.01, rho=0.8, momentum=0.5,
                                                                          centered=True),
            "RMSprop momentum": lambda: keras.optimizers.RMSprop(learning_rate=0.005, momentum=0.9),
        }
        # The same optimizers set by kx's own compile (kx_compile_options' fields, not a Keras file).
        direct = {
            "AdamW default": dict(optimizer="adamw"),
            "AdamW strong decay": dict(optimizer="adamw", learning_rate=0.01, weight_decay=0.1, beta1=0.8),
            "RMSprop default": dict(optimizer="rmsprop"),
            "RMSprop momentum centered": dict(optimizer="rmsprop", learning_rate=0.01, rho=0.8, momentum=0.5,
                                              centered=True),
            "RMSprop momentum": dict(optimizer="rmsprop", learning_rate=0.005, momentum=0.9),
        }
        for name, make in cases.items():
            with self.subTest(optimizer=name):
                theirs, ours = self.small_model("optimizer " + name, make(), "mse")
                i = kx.Input(shape=(6,))
                compiled = kx.Model(inputs=i, outputs=kx.layers.Dense(units=3)(
                    kx.layers.Dense(units=5, activation="tanh")(i)))
                compiled.compile(loss="mse", **direct[name])
                compiled.set_weights(keras_weights(theirs))
                for x, y in batches[:3]:
                    theirs.train_on_batch(x, y)
                    ours.train_on_batch(x, y)
                    compiled.train_on_batch(x, y)
                for w, k in zip(keras_weights(theirs), compiled.get_weights()):
                    np.testing.assert_allclose(k.reshape(w.shape), w, rtol=RTOL, atol=ATOL,
                                               err_msg=f"{name}: 3 steps, compiled by kx")
                worst = max(max_relative(w, k.reshape(w.shape)) for w, k in zip(keras_weights(theirs), ours.get_weights()))
                print(f"{name}: weights after 3 steps, max relative difference {worst:.1e}")
                for w, k in zip(keras_weights(theirs), ours.get_weights()):
                    np.testing.assert_allclose(k.reshape(w.shape), w, rtol=RTOL, atol=ATOL, err_msg=f"{name}: 3 steps")
                # Keras's file with its optimizer state: kx continues from its slots as Keras does.
                resumed = kx.models.load_model(self.save(theirs, "resumed " + name))
                for x, y in batches[3:]:
                    theirs.train_on_batch(x, y)
                    resumed.train_on_batch(x, y)
                for w, k in zip(keras_weights(theirs), resumed.get_weights()):
                    np.testing.assert_allclose(k.reshape(w.shape), w, rtol=RTOL, atol=ATOL, err_msg=f"{name}: resumed")

    @staticmethod
    def mobilenet(shape, alpha, policy="float32"):
        keras.backend.clear_session()  # Keras's own names: global_average_pooling2d, not ..._1
        keras.config.set_dtype_policy(policy)
        try:
            keras.utils.set_random_seed(5)
            m = keras.applications.MobileNetV2(weights=None, input_shape=shape, alpha=alpha, classes=10)
        finally:
            keras.config.set_dtype_policy("float32")
        m.compile(optimizer=keras.optimizers.SGD(1.0), loss="sparse_categorical_crossentropy")
        rng = np.random.default_rng(6)
        x = rng.uniform(-1, 1, size=(8,) + shape).astype(np.float32)
        y = rng.integers(0, 10, 8).astype(np.float32)
        return m, x, y

    def test_mobilenet_v2_opens_predicts_and_trains_as_keras(self):
        # The gradients of MobileNetV2's first layers in training mode (batch statistics over a few
        # samples, BatchNormalization after every convolution) are ill-conditioned: float32 Keras
        # differs from float64 Keras by 1e-4 of a weight's largest gradient, and a BN's beta before
        # the next block's convolution and BN has a gradient that is zero in exact arithmetic and
        # rounding noise in float32. So one step is judged as Keras's own float32 step is: against the
        # float64 Keras step, kx's error at most twice float32 Keras's (and at most 1e-5 where Keras is
        # exact to that).
        for shape, alpha in (((32, 32, 3), 1.0), ((96, 96, 3), 0.35)):
            with self.subTest(shape=shape, alpha=alpha):
                theirs, x, y = self.mobilenet(shape, alpha)
                exact, _, _ = self.mobilenet(shape, alpha, "float64")
                exact.set_weights([w.numpy().astype(np.float64) for w in theirs.weights])
                path = self.save(theirs, f"mobilenet_v2_{shape[0]}_{alpha}")
                ours = kx.models.load_model(path)
                self.assertEqual(ours.layer_names, [l.name for l in theirs.layers[1:]])
                want = theirs.predict(x, verbose=0)
                got = ours.predict(x).reshape(want.shape)
                print(f"MobileNetV2 {shape} alpha {alpha}: predict, max relative difference {max_relative(got, want):.1e}")
                np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg="predict")
                before = [w.numpy().astype(np.float64) for w in theirs.weights]
                theirs.train_on_batch(x, y)
                exact.train_on_batch(x.astype(np.float64), y)
                ours.train_on_batch(x, y)
                worst_keras = worst_kx = 0.0
                for v, w0, w32, w64, w_kx in zip(theirs.weights, before, theirs.weights, exact.weights, ours.get_weights()):
                    truth = w0 - w64.numpy()
                    scale = np.abs(truth).max()
                    if "moving" in v.path or scale < 1e-4:  # statistics; gradients zero in exact arithmetic
                        continue
                    keras_err = np.abs(w0 - w32.numpy() - truth).max() / scale
                    kx_err = np.abs(w0 - w_kx.reshape(w0.shape) - truth).max() / scale
                    worst_keras, worst_kx = max(worst_keras, keras_err), max(worst_kx, kx_err)
                    self.assertLessEqual(kx_err, max(2 * keras_err, RTOL), v.path)
                print(f"MobileNetV2 {shape} alpha {alpha}: one step's gradient against float64 Keras, worst error "
                      f"(of a weight's largest gradient): kx {worst_kx:.1e}, float32 Keras {worst_keras:.1e}")

    @staticmethod
    def mobilenet_v3(which, shape, policy="float32", optimizer=None, **kwargs):
        keras.backend.clear_session()  # Keras's own automatic names: re_lu, activation, add, multiply
        keras.config.set_dtype_policy(policy)
        try:
            keras.utils.set_random_seed(5)
            # No dropout: its masks differ between any two libraries.
            m = getattr(keras.applications, which)(weights=None, input_shape=shape, classes=10, dropout_rate=0.0,
                                                   **kwargs)
        finally:
            keras.config.set_dtype_policy("float32")
        m.compile(optimizer=optimizer or keras.optimizers.SGD(1.0), loss="sparse_categorical_crossentropy")
        rng = np.random.default_rng(6)
        x = rng.uniform(0, 255, size=(8,) + shape).astype(np.float32)  # the model rescales to [-1, 1]
        y = rng.integers(0, 10, 8).astype(np.float32)
        return m, x, y

    def test_mobilenet_v3_opens_predicts_and_trains_as_keras(self):
        # As MobileNetV2's test above: one SGD step judged against float64 Keras (measured: kx's worst
        # error 1.34e-5 of a weight's largest gradient, float32 Keras's 1.35e-5; the Adam step is the
        # next test).
        for which, kwargs in (("MobileNetV3Small", {}), ("MobileNetV3Large", {}),
                              ("MobileNetV3Small", {"minimalistic": True, "alpha": 0.75})):
            shape = (64, 64, 3)
            with self.subTest(model=which, **kwargs):
                theirs, x, y = self.mobilenet_v3(which, shape, **kwargs)
                exact, _, _ = self.mobilenet_v3(which, shape, "float64", **kwargs)
                exact.set_weights([w.numpy().astype(np.float64) for w in theirs.weights])
                path = self.save(theirs, f"{which}_{len(kwargs)}")
                ours = kx.models.load_model(path)
                names = [l["name"] for l in theirs.get_config()["layers"][1:]]
                self.assertEqual(sorted(ours.layer_names), sorted(names))  # layers and operations
                want = theirs.predict(x, verbose=0)
                got = ours.predict(x).reshape(want.shape)
                print(f"{which} {kwargs}: predict, max relative difference {max_relative(got, want):.1e}")
                np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg="predict")
                before = [w.numpy().astype(np.float64) for w in theirs.weights]
                theirs.train_on_batch(x, y)
                exact.train_on_batch(x.astype(np.float64), y)
                ours.train_on_batch(x, y)
                worst_keras = worst_kx = 0.0
                for v, w0, w64, w_kx in zip(theirs.weights, before, exact.weights, ours.get_weights()):
                    truth = w0 - w64.numpy()
                    scale = np.abs(truth).max()
                    if "moving" in v.path or scale < 1e-4:
                        continue
                    keras_err = np.abs(w0 - v.numpy() - truth).max() / scale
                    kx_err = np.abs(w0 - w_kx.reshape(w0.shape) - truth).max() / scale
                    worst_keras, worst_kx = max(worst_keras, keras_err), max(worst_kx, kx_err)
                    self.assertLessEqual(kx_err, max(2 * keras_err, RTOL), v.path)
                print(f"{which} {kwargs}: one step's gradient against float64 Keras, worst error: kx {worst_kx:.1e}, "
                      f"float32 Keras {worst_keras:.1e}")

    def test_mobilenet_v3_adam_step_as_keras(self):
        # One Adam step of MobileNetV3Small against float64 Keras, judged as EfficientNetB0's below. Adam's
        # first step is lr * g / (|g| + 1e-7): where |g| is a millionth of the weight's largest gradient,
        # float32's gradient noise (kx's and Keras's alike: 1.3e-5 of the largest, from batch
        # normalisation over 8 samples) moves that step by 1e-2 of the rate, in float32 Keras as in kx
        # (measured: 1.15e-2 and 1.30e-2 over every element; over elements above 1e-2 of the largest
        # gradient both 5.98e-5). So the elements under 1e-3 of the weight's largest gradient (from a
        # float64 SGD step) are left out, and per weight kx's error (L2, relative to the float64
        # update's) is at most 3x float32 Keras's or 2e-5, over the model at most 2x Keras's worst.
        which, shape = "MobileNetV3Small", (64, 64, 3)
        theirs, x, y = self.mobilenet_v3(which, shape, optimizer=keras.optimizers.Adam(1e-3))
        exact, _, _ = self.mobilenet_v3(which, shape, "float64", optimizer=keras.optimizers.Adam(1e-3))
        gradient, _, _ = self.mobilenet_v3(which, shape, "float64")  # SGD(1): its step is the gradient
        before = [w.numpy().astype(np.float64) for w in theirs.weights]
        for m in (exact, gradient):
            m.set_weights(before)
        ours = kx.models.load_model(self.save(theirs, which + "_adam"))
        theirs.train_on_batch(x, y)
        exact.train_on_batch(x.astype(np.float64), y)
        gradient.train_on_batch(x.astype(np.float64), y)
        ours.train_on_batch(x, y)
        worst_keras = worst_kx = 0.0
        for v, w0, w64, wg, w_kx in zip(theirs.weights, before, exact.weights, gradient.weights, ours.get_weights()):
            g = np.abs(w0 - wg.numpy())
            if "moving" in v.path or g.max() < 1e-4:
                continue
            clear = g > 1e-3 * g.max()
            truth = (w0 - w64.numpy())[clear]
            scale = np.linalg.norm(truth)
            keras_err = np.linalg.norm((w0 - v.numpy())[clear] - truth) / scale
            kx_err = np.linalg.norm((w0 - w_kx.reshape(w0.shape))[clear] - truth) / scale
            worst_keras, worst_kx = max(worst_keras, keras_err), max(worst_kx, kx_err)
            self.assertLessEqual(kx_err, max(3 * keras_err, 2 * RTOL), v.path)
        print(f"{which}: one Adam step against float64 Keras, worst relative error of a weight's update: "
              f"kx {worst_kx:.1e}, float32 Keras {worst_keras:.1e}")
        self.assertLessEqual(worst_kx, 2 * worst_keras)

    @staticmethod
    def efficientnet_b0(policy="float32", optimizer=None, dropout=True, source=None):
        """keras.applications.EfficientNetB0 at its smallest input (32x32), 4 classes, its Normalization
        adapted to the data (so that its statistics, weights in the file, are not the initial 0 and 1).
        dropout=False: the same model with every Dropout's rate 0 in its config (the drop-connect
        layers, noise_shape (None, 1, 1, 1), and the top dropout kept as layers), for comparing a
        training step: Keras's and kx's masks come from different generators. The public builder has
        no drop_connect_rate, hence the config. source: a model whose weights it takes."""
        shape = (32, 32, 3)
        keras.backend.clear_session()
        keras.config.set_dtype_policy(policy)
        try:
            keras.utils.set_random_seed(5)
            m = keras.applications.EfficientNetB0(weights=None, input_shape=shape, classes=4)
            if not dropout:
                config = m.get_config()
                for layer in config["layers"]:
                    if layer["class_name"] == "Dropout":
                        layer["config"]["rate"] = 0.0
                m = keras.Model.from_config(config)
        finally:
            keras.config.set_dtype_policy("float32")
        rng = np.random.default_rng(7)
        x = rng.uniform(0, 255, size=(8,) + shape).astype(np.float32)  # the model rescales by 1/255
        y = rng.integers(0, 4, 8).astype(np.float32)
        norm = m.get_layer("normalization")
        if source is None:
            norm.adapt(x / 255.0)
        else:
            m.set_weights([w.numpy().astype(policy) for w in source.weights])
            norm.finalize_state()  # Keras's normalization reads its statistics from its weights here
        m.compile(optimizer=optimizer or keras.optimizers.SGD(1.0), loss="sparse_categorical_crossentropy")
        return m, x, y

    def test_efficientnet_b0_opens_predicts_and_trains_as_keras(self):
        # Keras's EfficientNetB0 as it is, with its drop-connect and top dropout: kx opens it and
        # predicts what Keras predicts (dropout is the identity there).
        theirs, x, _ = self.efficientnet_b0()
        self.assertTrue(any(l.get_config().get("noise_shape") for l in theirs.layers if isinstance(l, layers.Dropout)))
        ours = kx.models.load_model(self.save(theirs, "efficientnet_b0"))
        names = [l["name"] for l in theirs.get_config()["layers"][1:]]
        self.assertEqual(sorted(ours.layer_names), sorted(names))
        self.assertEqual(ours.num_params, theirs.count_params() - 1)  # Keras counts Normalization's count
        want = theirs.predict(x, verbose=0)
        got = ours.predict(x).reshape(want.shape)
        print(f"EfficientNetB0: predict, max relative difference {max_relative(got, want):.1e}")
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg="predict")
        # kx's own .keras file opens in Keras: the adapted Normalization gets the count Keras expects.
        back = os.path.join(self.dir.name, "efficientnet_b0_from_kx.keras")
        ours.save(back)
        np.testing.assert_allclose(keras.models.load_model(back).predict(x, verbose=0), want, rtol=RTOL, atol=ATOL,
                                   err_msg="Keras predicting from kx's file")

        # One SGD step (rate 1: the change is the gradient) and one Adam step, dropout rates 0, each
        # judged against float64 Keras as float32 Keras's own step is. At 32x32 the last blocks are 1x1,
        # so their BatchNormalizations normalise over 8 values in training, which leaves float32
        # gradients ill-conditioned (float32 Keras is 5e-5 off float64 on some weights, and its largest
        # element errors are rounding noise): per weight, the update's error (L2 over its elements,
        # relative to the float64 update's) is at most 3x float32 Keras's, or 2e-5 (float32 Keras's own
        # varies by some 10% from run to run, its threads summing in another order; measured, kx's is
        # under 2x Keras's but for weights of 1e-5 and less), and over the model kx's worst is at most
        # twice Keras's worst; the statistics and the weights whose gradient is zero in exact
        # arithmetic are left out. Adam's elements
        # whose gradient is within float32's noise (under 1e-3 of the weight's largest) are left out
        # too: its first step is +-lr there whatever the gradient's size, so its sign is the step.
        gradients = {}
        for optimizer, lr in (("SGD", 1.0), ("Adam", 1e-3)):
            theirs, x, y = self.efficientnet_b0(optimizer=getattr(keras.optimizers, optimizer)(lr), dropout=False)
            exact, _, _ = self.efficientnet_b0("float64", getattr(keras.optimizers, optimizer)(lr), False, theirs)
            ours = kx.models.load_model(self.save(theirs, "efficientnet_b0_" + optimizer))
            np.testing.assert_allclose(ours.predict(x).reshape(-1, 4), theirs.predict(x, verbose=0), rtol=RTOL, atol=ATOL)
            before = [w.numpy().astype(np.float64) for w in theirs.weights]
            theirs.train_on_batch(x, y)
            exact.train_on_batch(x.astype(np.float64), y)
            ours.train_on_batch(x, y)
            kx_weights = iter(ours.get_weights())
            worst_keras = worst_kx = 0.0
            for v, w0, w64 in zip(theirs.weights, before, exact.weights):
                if v.path == "normalization/count":
                    continue  # Keras's adapt() sample count: no weight of kx's
                w_kx = next(kx_weights).reshape(w0.shape)
                truth = w0 - w64.numpy()
                if optimizer == "SGD":
                    gradients[v.path] = np.abs(truth)
                g = gradients[v.path]
                if v.path.startswith("normalization/"):  # the adapted statistics: read, never trained
                    np.testing.assert_array_equal(w_kx, w0, v.path)
                    continue
                if "moving" in v.path or g.max() < 1e-4:
                    continue
                clear = g > 1e-3 * g.max() if optimizer == "Adam" else np.ones(g.shape, bool)
                scale = np.linalg.norm(truth[clear])
                keras_err = np.linalg.norm((w0 - v.numpy())[clear] - truth[clear]) / scale
                kx_err = np.linalg.norm((w0 - w_kx)[clear] - truth[clear]) / scale
                worst_keras, worst_kx = max(worst_keras, keras_err), max(worst_kx, kx_err)
                self.assertLessEqual(kx_err, max(3 * keras_err, 2 * RTOL), f"{optimizer} {v.path}")
            print(f"EfficientNetB0: one {optimizer} step against float64 Keras, worst relative error of a weight's "
                  f"update: kx {worst_kx:.1e}, float32 Keras {worst_keras:.1e}")
            self.assertLessEqual(worst_kx, 2 * worst_keras, optimizer)

    def test_kx_mobilenet_v3_has_keras_names_and_loads_its_weights(self):
        for which in ("MobileNetV3Small", "MobileNetV3Large"):
            with self.subTest(model=which):
                theirs, x, _ = self.mobilenet_v3(which, (64, 64, 3))
                path = os.path.join(self.dir.name, which + ".weights.h5")
                theirs.save_weights(path)
                ours = getattr(kx.applications, which)(input_shape=(64, 64, 3), classes=10, dropout_rate=0.0)
                names = [l["name"] for l in theirs.get_config()["layers"][1:]]
                self.assertEqual(sorted(ours.layer_names), sorted(names))
                self.assertEqual(ours.num_params, theirs.count_params())
                ours.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
                loaded, skipped = ours.load_weights(path)
                self.assertEqual((loaded, skipped), (len(ours.weights), 0))
                want = theirs.predict(x, verbose=0)
                np.testing.assert_allclose(ours.predict(x).reshape(want.shape), want, rtol=RTOL, atol=ATOL)

    def test_kx_efficientnet_b0_has_keras_names_and_loads_its_weights(self):
        # kx's own EfficientNetB0 against Keras's (32x32, 4 classes): the same layers in the same order,
        # the same weights in the same order and shapes (Keras's Normalization count aside), and with
        # Keras's .weights.h5 loaded by name, Keras's predictions. The file's BatchNormalization moving
        # statistics and Normalization's adapted ones are moved off their initial 0 and 1 first, so
        # that a statistic left unread would show.
        theirs, x, _ = self.efficientnet_b0()
        rng = np.random.default_rng(8)
        for layer in theirs.layers:
            if isinstance(layer, layers.BatchNormalization):
                n = layer.moving_mean.shape[0]
                layer.moving_mean.assign(rng.normal(size=n).astype(np.float32) * 0.1)
                layer.moving_variance.assign(rng.uniform(0.5, 2.0, size=n).astype(np.float32))
        path = os.path.join(self.dir.name, "efficientnet_b0.weights.h5")
        theirs.save_weights(path)
        ours = kx.applications.EfficientNetB0(input_shape=(32, 32, 3), classes=4)
        self.assertEqual(ours.layer_names, [l.name for l in theirs.layers[1:]])
        keras_weights_ = [(w.path, tuple(w.shape)) for w in theirs.weights if w.path != "normalization/count"]
        self.assertEqual([(name, shape) for name, shape, _ in ours.weights], keras_weights_)
        self.assertEqual(ours.num_params, theirs.count_params() - 1)
        # Keras's initializers (VarianceScaling on fan_out) in kx's config, layer for layer.
        ours_layers = {l["config"]["name"]: l["config"] for l in json.loads(ours.to_json())["config"]["layers"]}
        compared = 0
        for layer in theirs.get_config()["layers"]:
            for key in ("kernel_initializer", "depthwise_initializer"):
                if key in layer["config"]:
                    want, got = layer["config"][key], ours_layers[layer["config"]["name"]].get(key)
                    self.assertIsNotNone(got, f"{layer['config']['name']} {key}")
                    self.assertEqual(got["class_name"], want["class_name"])
                    for setting in ("scale", "mode", "distribution"):
                        self.assertEqual(got["config"].get(setting), want["config"][setting], layer["config"]["name"])
                    compared += 1
        self.assertGreater(compared, 80)
        ours.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        loaded, skipped = ours.load_weights(path)
        self.assertEqual((loaded, skipped), (len(ours.weights), 0))
        want = theirs.predict(x, verbose=0)
        got = ours.predict(x).reshape(want.shape)
        print(f"kx EfficientNetB0 with Keras's weights: predict, max relative difference {max_relative(got, want):.1e}")
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
        keras.backend.clear_session()
        keras_without_top = keras.applications.EfficientNetB0(weights=None, input_shape=(64, 64, 3),
                                                               include_top=False, pooling="max")
        without_top = kx.applications.EfficientNetB0(input_shape=(64, 64, 3), include_top=False, pooling="max")
        self.assertEqual(without_top.layer_names, [l.name for l in keras_without_top.layers[1:]])
        self.assertEqual(without_top.num_params, keras_without_top.count_params() - 1)

    def test_kx_mobilenet_v2_has_keras_names_and_loads_its_weights(self):
        theirs, x, _ = self.mobilenet((32, 32, 3), 1.0)
        rng = np.random.default_rng(7)  # moving statistics away from 0 and 1, as after training
        for layer in theirs.layers:
            if isinstance(layer, layers.BatchNormalization):
                n = layer.moving_mean.shape[0]
                layer.moving_mean.assign(rng.normal(size=n).astype(np.float32) * 0.1)
                layer.moving_variance.assign(rng.uniform(0.5, 2.0, size=n).astype(np.float32))
        path = self.save(theirs, "mobilenet_v2_by_name")
        ours = kx.applications.MobileNetV2(input_shape=(32, 32, 3), classes=10)
        self.assertEqual(ours.layer_names, [l.name for l in theirs.layers[1:]])
        self.assertEqual(ours.num_params, theirs.count_params())
        ours.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        loaded, skipped = ours.load_weights(path)
        self.assertEqual((loaded, skipped), (len(ours.weights), 0))
        want = theirs.predict(x, verbose=0)
        np.testing.assert_allclose(ours.predict(x).reshape(want.shape), want, rtol=RTOL, atol=ATOL)
        without_top = kx.applications.MobileNetV2(input_shape=(64, 64, 3), alpha=0.5, include_top=False, pooling="avg")
        keras.backend.clear_session()
        keras_without_top = keras.applications.MobileNetV2(weights=None, input_shape=(64, 64, 3), alpha=0.5,
                                                           include_top=False, pooling="avg")
        self.assertEqual(without_top.num_params, keras_without_top.count_params())

    # ---- Sequence layers: Embedding, LSTM, GRU, Bidirectional (issue 35) ----

    @staticmethod
    def sequence_model(body, optimizer=None):
        """Input -> body (a function of a tensor) -> Dense(3), compiled with SGD(1) (the weights' change
        is the gradient) or the given optimizer."""
        m = body()
        m.compile(optimizer=optimizer or keras.optimizers.SGD(1.0), loss="mse")
        return m

    def assert_same_step(self, name, theirs, ours, x, y):
        want = theirs.predict(x, verbose=0)
        got = ours.predict(x).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name}: forward")
        before = keras_weights(theirs)
        theirs.train_on_batch(x, y)
        ours.train_on_batch(x, y)
        after = ours.get_weights()
        self.assertEqual(len(after), len(before), name)
        worst = 0.0
        for v, w0, w1, got_w in zip(theirs.weights, before, keras_weights(theirs), after):
            change_kx, change_keras = w0 - got_w.reshape(w0.shape), w0 - w1
            worst = max(worst, max_relative(change_kx, change_keras))
            np.testing.assert_allclose(change_kx, change_keras, rtol=RTOL, atol=ATOL, err_msg=f"{name}: {v.path}")
        print(f"{name}: forward {max_relative(got, want):.1e}, step {worst:.1e} (max relative difference)")

    @staticmethod
    def recurrent_cases():
        def floats(layer, steps=6, features=4):
            def body():
                i = keras.Input((steps, features))
                x = layer()(i)
                if len(x.shape) == 3:
                    x = layers.Flatten()(x)
                return keras.Model(i, layers.Dense(3, name="after")(x))
            return body, ("float", steps, features)

        def tokens(make, steps=7, vocab=9):
            def body():
                i = keras.Input((steps,), dtype="int32")
                x = layers.Embedding(vocab, 4, mask_zero=True, name="embedding")(i)
                x = make(x)
                return keras.Model(i, layers.Dense(3, name="after")(x))
            return body, ("int", steps, vocab)

        def padded(make, steps=7, features=3):
            # Steps all 0.5 (padding at the end, the start, holes: sequence_data's "padded") masked by
            # Masking(0.5), or steps a ReLU Dense zeroes masked by Masking(0.0): its gradient then
            # reaches the Dense before it.
            def body():
                i = keras.Input((steps, features))
                x = make(i)
                return keras.Model(i, layers.Dense(3, name="after")(x))
            return body, ("padded", steps, features)

        return {
            "Masking into LSTM": padded(lambda i: layers.LSTM(5)(layers.Masking(mask_value=0.5)(i))),
            "Masking into GRU sequences into LSTM": padded(
                lambda i: layers.LSTM(3)(layers.GRU(4, return_sequences=True)(layers.Masking(0.5)(i)))),
            "Dense relu into Masking into LSTM": padded(lambda i: layers.LSTM(4)(layers.Masking(0.0)(
                layers.Dense(2, activation="relu", name="before")(i)))),
            "LSTM last": floats(lambda: layers.LSTM(5)),
            "LSTM sequences": floats(lambda: layers.LSTM(5, return_sequences=True)),
            "LSTM backwards sequences": floats(lambda: layers.LSTM(4, return_sequences=True, go_backwards=True)),
            "LSTM relu no bias": floats(lambda: layers.LSTM(3, activation="relu", use_bias=False)),
            "GRU last": floats(lambda: layers.GRU(5)),
            "GRU sequences backwards": floats(lambda: layers.GRU(4, return_sequences=True, go_backwards=True)),
            "Bidirectional LSTM": floats(lambda: layers.Bidirectional(layers.LSTM(4))),
            "Bidirectional GRU sequences": floats(lambda: layers.Bidirectional(layers.GRU(3, return_sequences=True))),
            "masked LSTM": tokens(lambda x: layers.LSTM(5)(x)),
            "masked LSTM sequences into GRU": tokens(lambda x: layers.GRU(3)(layers.LSTM(4, return_sequences=True)(x))),
            "masked Bidirectional LSTM": tokens(lambda x: layers.Bidirectional(layers.LSTM(4))(x)),
            "masked Bidirectional sequences into LSTM": tokens(
                lambda x: layers.LSTM(3)(layers.Bidirectional(layers.GRU(3, return_sequences=True))(x))),
        }

    @staticmethod
    def sequence_data(kind, steps, size, rng, n=8):
        if kind == "float":
            return rng.normal(size=(n, steps, size)).astype(np.float32)
        # Padded steps at the end, at the start, and holes: 0.5 (Masking's mask_value) over whole
        # steps of floats, or id 0 (Embedding's mask_zero).
        x, pad = ((rng.normal(size=(n, steps, size)).astype(np.float32), 0.5) if kind == "padded"
                  else (rng.integers(1, size, size=(n, steps)).astype(np.int32), 0))
        for r in range(n):
            if r % 3 == 0:
                x[r, steps - 1 - r % steps:] = pad
            elif r % 3 == 1:
                x[r, : r % steps] = pad
            else:
                x[r, ::3] = pad
        return x

    def test_recurrent_layers_give_keras_forward_and_gradients(self):
        for name, (body, (kind, steps, size)) in self.recurrent_cases().items():
            with self.subTest(layer=name):
                keras.backend.clear_session()
                keras.utils.set_random_seed(3)
                theirs = self.sequence_model(body)
                rng = np.random.default_rng(4)
                x = self.sequence_data(kind, steps, size, rng)
                y = rng.normal(size=(8, 3)).astype(np.float32)
                ours = kx.models.load_model(self.save(theirs, name))
                self.assert_same_step(name, theirs, ours, x, y)

    def test_text_classifier_takes_one_adam_step_as_keras(self):
        # Keras on TensorFlow updates an Embedding with its gradient as tf.IndexedSlices: Adam's second
        # moment then sums the squares of each occurrence's gradient where an id repeats in the batch
        # (keras.ops.square of the slices), where kx, like Keras on JAX or PyTorch, squares the summed
        # gradient. So every id occurs once here (0, the padding, has no gradient either way).
        keras.backend.clear_session()
        keras.utils.set_random_seed(8)

        def body():
            i = keras.Input((10,), dtype="int32")
            x = layers.Embedding(100, 8, mask_zero=True)(i)
            x = layers.Bidirectional(layers.LSTM(6))(x)
            return keras.Model(i, layers.Dense(3, name="after")(x))

        theirs = self.sequence_model(body, keras.optimizers.Adam(1e-2))
        rng = np.random.default_rng(9)
        padded = self.sequence_data("int", 10, 100, rng)
        x = np.where(padded != 0, rng.permutation(np.arange(1, 100))[:80].reshape(8, 10), 0).astype(np.int32)
        y = rng.normal(size=(8, 3)).astype(np.float32)
        ours = kx.models.load_model(self.save(theirs, "text_classifier_adam"))
        before = keras_weights(theirs)
        theirs.train_on_batch(x, y)
        ours.train_on_batch(x, y)
        for v, w0, w1, got in zip(theirs.weights, before, keras_weights(theirs), ours.get_weights()):
            np.testing.assert_allclose(got.reshape(w1.shape), w1, rtol=RTOL, atol=ATOL, err_msg=v.path)
        # And the file kx writes opens in Keras with the same weights.
        path = os.path.join(self.dir.name, "text_classifier_from_kx.keras")
        ours.save_keras(path)
        again = keras.models.load_model(path)
        for w, got in zip(again.weights, ours.get_weights()):
            np.testing.assert_array_equal(w.numpy(), got.reshape(w.shape), err_msg=w.path)
        np.testing.assert_allclose(again.predict(x, verbose=0), ours.predict(x).reshape(-1, 3), rtol=RTOL, atol=ATOL)

    def test_masked_sequence_labeller_loss_metrics_and_adam_step_as_keras(self):
        # Embedding(mask_zero=True) -> LSTM(return_sequences=True) -> Dense(softmax) per step: Keras leaves
        # the padded steps out of the loss (its sum over the unmasked steps of each batch, 0 for a batch
        # with none) and out of the accuracy (weights times the mask), and so out of the gradient.
        def labeller(optimizer):
            keras.backend.clear_session()
            keras.utils.set_random_seed(12)
            i = keras.Input((6,), dtype="int32")
            x = layers.Embedding(100, 4, mask_zero=True, name="embedding")(i)
            x = layers.LSTM(5, return_sequences=True, name="lstm")(x)
            m = keras.Model(i, layers.Dense(3, activation="softmax", name="tags")(x))
            m.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
            return m

        theirs = labeller(keras.optimizers.Adam(1e-2))
        rng = np.random.default_rng(13)
        padded = self.padded_tokens(rng, n=10, steps=6, vocab=100)
        padded[8:] = 0  # the last batch of 4 below (samples 8 and 9) is fully masked
        padded[5] = 0   # and a sample of the second batch
        # Every id once (see test_text_classifier_takes_one_adam_step_as_keras: Adam's embedding step).
        x = np.where(padded != 0, rng.permutation(np.arange(1, 100))[:60].reshape(10, 6), 0).astype(np.int32)
        y = rng.integers(0, 3, size=(10, 6)).astype(np.int32)
        w = rng.uniform(0.25, 2.0, size=10).astype(np.float32)
        ours = kx.models.load_model(self.save(theirs, "masked_labeller"))
        want = theirs.predict(x, verbose=0)
        np.testing.assert_allclose(ours.predict(x).reshape(want.shape), want, rtol=RTOL, atol=ATOL)
        for weights in (None, w):
            # Keras 3.15 refuses sample weights of shape [samples] beside a [samples, steps] mask
            # (Incompatible shapes): kx weighs each step by its sample's weight, as Keras does with the
            # weights repeated per step.
            per_step = None if weights is None else np.repeat(weights[:, None], 6, axis=1)
            want_loss, want_acc = theirs.evaluate(x, y, sample_weight=per_step, batch_size=4, verbose=0)
            if weights is not None:
                # kx weighs accuracy by the sample weights, as Keras's weighted_metrics (its `metrics`
                # ignore them): Keras's metric given the weights times the mask, as its apply_mask does.
                accuracy = keras.metrics.SparseCategoricalAccuracy()
                accuracy.update_state(y, want, sample_weight=per_step * (x != 0))
                want_acc = float(accuracy.result())
            got_loss, got_acc = ours.evaluate(kx.Dataset.from_arrays(x, y, weights).batch(4))
            print(f"masked labeller evaluate: loss {got_loss:.7g} (Keras {want_loss:.7g}), "
                  f"accuracy {got_acc:.7g} (Keras {want_acc:.7g})")
            self.assertLessEqual(abs(got_loss - want_loss), RTOL * abs(want_loss), weights)
            self.assertLessEqual(abs(got_acc - want_acc), RTOL * abs(want_acc), weights)
        # Normalised over the whole data instead of batch by batch (the fully masked batch counting 0),
        # the loss would differ: the comparison can fail.
        whole = theirs.evaluate(x, y, batch_size=10, verbose=0)[0]
        self.assertGreater(abs(whole - ours.evaluate(kx.Dataset.from_arrays(x, y).batch(4))[0]), 1e-2 * whole)
        # The gradient (a step of SGD(1.0)), then one Adam step. Adam's first step is lr * g / (|g| + eps):
        # where a gradient is near its epsilon (1e-7) the step amplifies float32's rounding of g, hence
        # the step's absolute tolerance, 1e-4 of the rate.
        sgd = labeller(keras.optimizers.SGD(1.0))
        for name, keras_model, atol in (("gradient", sgd, ATOL), ("Adam step", theirs, 1e-4 * 1e-2)):
            kx_model = kx.models.load_model(self.save(keras_model, "masked_labeller " + name))
            before = keras_weights(keras_model)
            want_loss, want_acc = keras_model.train_on_batch(x, y)
            got_loss, got_acc = kx_model.train_on_batch(x, y)
            self.assertLessEqual(abs(got_loss - want_loss), RTOL * abs(want_loss), name)
            self.assertLessEqual(abs(got_acc - want_acc), RTOL * abs(want_acc), name)
            worst = 0.0
            for v, w0, w1, got in zip(keras_model.weights, before, keras_weights(keras_model), kx_model.get_weights()):
                worst = max(worst, max_relative(w0 - got.reshape(w0.shape), w0 - w1))
                np.testing.assert_allclose(w0 - got.reshape(w0.shape), w0 - w1, rtol=RTOL, atol=atol,
                                           err_msg=f"masked labeller, {name} of {v.path}")
            print(f"masked labeller, {name}: {worst:.1e} (max relative difference)")


def ks_distance(a, b):
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical distributions."""
    a, b = np.sort(np.ravel(a)), np.sort(np.ravel(b))
    grid = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, grid, side="right") / a.size -
                               np.searchsorted(b, grid, side="right") / b.size)))


def orthogonality_error(w, gain):
    """max |G - gain^2 I| for G = W^T W (rows >= cols) or W W^T, W the weight as [leading axes, last axis]."""
    m = np.asarray(w, np.float64).reshape(-1, np.shape(w)[-1])
    g = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    return float(np.max(np.abs(g - gain * gain * np.eye(g.shape[0]))))


@unittest.skipIf(keras is None, "Keras is not installed (scripts/python_venv.sh keras makes the pinned environment)")
class KerasInitializers(unittest.TestCase):
    """Layers' initial weights against Keras 3's: the layer's Keras config (get_config()) handed to kx as
    kx_model_add_layer takes it, and each weight compared with the one Keras draws. Keras's random stream is
    not kx's, so deterministic initializers (Zeros, Ones, Constant, LSTM's unit_forget_bias layout) must give
    the same values, random ones the same distribution (two-sample Kolmogorov-Smirnov distance below its
    0.1% critical value, 1.95 sqrt((n + m) / (n m)), and the same deviation within 10%), and Orthogonal
    orthogonal matrices times the gain in both."""

    @staticmethod
    def initial_weights(layer, shape, int_input=False, attention=False):
        keras.utils.set_random_seed(5)
        i = keras.Input(shape, dtype="int32" if int_input else "float32")
        layer(i, i) if attention else layer(i)
        theirs = [(v.path, v.numpy()) for v in layer.weights]
        x = kx.Input(shape=shape)
        ours = kx.Model(inputs=x, outputs=kx.layers.Layer(type(layer).__name__, **layer.get_config())(x))
        ours.compile(optimizer="sgd", loss="mse", seed=11)
        return theirs, ours.get_weights()

    def check(self, name, layer, shape, orthogonal=None, int_input=False, attention=False):
        """orthogonal: {index of a weight: gain} for the weights Orthogonal draws."""
        theirs, ours = self.initial_weights(layer, shape, int_input, attention)
        self.assertEqual([w.shape for _, w in theirs], [w.shape for w in ours], name)
        for k, ((path, want), got) in enumerate(zip(theirs, ours)):
            with self.subTest(layer=name, weight=path):
                if np.unique(want).size < 8:  # a constant, or LSTM's bias layout: the same values
                    np.testing.assert_array_equal(got, want)
                    continue
                if orthogonal and k in orthogonal:
                    self.assertLess(orthogonality_error(want, orthogonal[k]), 1e-5)  # Keras's semantics, as read
                    self.assertLess(orthogonality_error(got, orthogonal[k]), 1e-5)
                n = want.size
                self.assertGreaterEqual(n, 400, "too few values to compare distributions")
                d = ks_distance(got, want)
                self.assertLess(d, 1.95 * np.sqrt(2.0 / n), f"KS distance {d:.3f}")
                self.assertLess(abs(np.std(got) / np.std(want) - 1), 0.1)
                print(f"{name} {path}: KS {d:.3f}, deviation {np.std(got):.4f} (kx) {np.std(want):.4f} (Keras)")

    def test_recurrent_layers_initialise_as_keras(self):
        init = keras.initializers
        self.check("LSTM", layers.LSTM(64, kernel_initializer="he_normal", bias_initializer=init.Constant(0.3)),
                   (5, 48), orthogonal={1: 1.0})
        self.check("LSTM gain, no forget bias", layers.LSTM(32, recurrent_initializer=init.Orthogonal(gain=1.7),
                                                            unit_forget_bias=False, bias_initializer="ones"),
                   (4, 40), orthogonal={1: 1.7})
        self.check("GRU", layers.GRU(40, kernel_initializer=init.RandomNormal(0.2, 0.3),
                                     bias_initializer=init.Constant(-0.5)), (4, 30), orthogonal={1: 1.0})
        self.check("Bidirectional LSTM", layers.Bidirectional(layers.LSTM(24, kernel_initializer="lecun_uniform",
                                                                          recurrent_initializer="glorot_normal")),
                   (5, 40))
        self.check("Bidirectional GRU", layers.Bidirectional(layers.GRU(20, return_sequences=True)), (5, 40),
                   orthogonal={1: 1.0, 4: 1.0})

    def test_convolutions_initialise_as_keras(self):
        init = keras.initializers
        self.check("SeparableConv2D", layers.SeparableConv2D(32, 3, depth_multiplier=2, depthwise_initializer="he_uniform",
                                                             pointwise_initializer=init.Orthogonal(),
                                                             bias_initializer="ones"),
                   (8, 8, 24), orthogonal={1: 1.0})
        self.check("SeparableConv2D defaults", layers.SeparableConv2D(32, 3, depth_multiplier=4), (8, 8, 16))
        self.check("Conv2DTranspose", layers.Conv2DTranspose(24, 3, strides=2, kernel_initializer="glorot_normal",
                                                             bias_initializer=init.Constant(0.1)), (4, 4, 32))
        self.check("Conv2DTranspose he_uniform", layers.Conv2DTranspose(16, 2, kernel_initializer="he_uniform"),
                   (4, 4, 40))
        self.check("Conv2D orthogonal", layers.Conv2D(16, 3, kernel_initializer=init.Orthogonal(gain=0.5)), (6, 6, 8),
                   orthogonal={0: 0.5})
        self.check("Dense orthogonal wide", layers.Dense(96, kernel_initializer="orthogonal"), (20,), orthogonal={0: 1.0})

    def test_normalizations_embedding_and_attention_initialise_as_keras(self):
        init = keras.initializers
        self.check("BatchNormalization", layers.BatchNormalization(
            gamma_initializer=init.Constant(2.0), beta_initializer="ones", moving_mean_initializer=init.Constant(-1.0),
            moving_variance_initializer=init.Constant(3.0)), (4, 4, 5))
        self.check("LayerNormalization", layers.LayerNormalization(gamma_initializer=init.RandomUniform(0.5, 1.5),
                                                                   beta_initializer=init.Constant(0.25)), (6, 400))
        self.check("Embedding", layers.Embedding(300, 32), (7,), int_input=True)
        self.check("Embedding truncated normal", layers.Embedding(300, 32, embeddings_initializer=init.TruncatedNormal(
            stddev=0.2)), (7,), int_input=True)
        self.check("MultiHeadAttention", layers.MultiHeadAttention(4, 16, value_dim=12), (6, 40), attention=True)
        self.check("MultiHeadAttention he_normal", layers.MultiHeadAttention(
            4, 16, value_dim=12, kernel_initializer="he_normal", bias_initializer=init.Constant(0.2)), (6, 40),
            attention=True)
        self.check("MultiHeadAttention variance scaling", layers.MultiHeadAttention(
            2, 32, kernel_initializer=init.VarianceScaling(3.0, "fan_out", "uniform")), (6, 40), attention=True)


if __name__ == "__main__":
    unittest.main()
