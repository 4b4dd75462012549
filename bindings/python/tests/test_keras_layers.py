"""The layers of the mobile models against the real Keras 3: each layer, in a small model built and
saved by Keras, opened in kx with the same weights, gives Keras's forward (<= 1e-5 relative) and
Keras's gradients (one SGD step of rate 1: the weights' change is the gradient, also of the layer
before it, which receives the layer's input gradient); and keras.applications.MobileNetV2 saved as
.keras opens in kx and predicts and trains as Keras does, and kx.applications.MobileNetV2 loads its
weights by name. Needs Keras 3 with TensorFlow (ctest's python_keras_layers runs this file in the
pinned environment of scripts/python_venv.sh keras); skipped without them."""
import os
import tempfile
import unittest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

import kx

try:
    import keras
    from keras import layers
except ImportError:  # the test command's venv has it; a bare python3 does not
    keras = None

RTOL, ATOL = 1e-5, 1e-6


# (input shape, the layer under test, input scale): a 1x1 convolution before it (whose gradient is
# the layer's input gradient carried one step further) and a Dense after it.
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
        "ZeroPadding2D default": ((5, 4, 3), layers.ZeroPadding2D(), 1.0),
        "GlobalAveragePooling2D keepdims": ((5, 4, 3), layers.GlobalAveragePooling2D(keepdims=True), 1.0),
        "Rescaling": ((5, 4, 3), layers.Rescaling(1.0 / 127.5, offset=-1.0), 100.0),
        "Reshape": ((4, 4, 3), layers.Reshape((2, -1)), 1.0),
        "LeakyReLU default": ((6, 6, 3), layers.LeakyReLU(), 1.0),
        "LeakyReLU 0.1": ((6, 6, 3), layers.LeakyReLU(negative_slope=0.1), 1.0),
        "GlobalMaxPooling2D": ((5, 4, 3), layers.GlobalMaxPooling2D(), 1.0),
        "GlobalMaxPooling2D keepdims": ((5, 4, 3), layers.GlobalMaxPooling2D(keepdims=True), 1.0),
    }


def wrapped(shape, layer):
    i = keras.Input(shape)
    x = layers.Conv2D(5, 1, name="before")(i)
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

    def test_each_layer_gives_keras_forward_and_gradients(self):
        for name, (shape, layer, scale) in layer_cases().items():
            with self.subTest(layer=name):
                keras.utils.set_random_seed(3)
                theirs = wrapped(shape, layer)
                rng = np.random.default_rng(4)
                x = (rng.normal(size=(8,) + shape) * scale).astype(np.float32)
                y = rng.normal(size=(8, 3)).astype(np.float32)
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
                    # Rate 1: the change is the gradient.
                    np.testing.assert_allclose(w0 - got.reshape(w0.shape), w0 - w1, rtol=RTOL, atol=ATOL,
                                               err_msg=f"{name}: gradient")

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

        return {
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
        ids = rng.integers(1, size, size=(n, steps)).astype(np.int32)
        for r in range(n):  # padding at the end, at the start, and holes
            if r % 3 == 0:
                ids[r, steps - 1 - r % steps:] = 0
            elif r % 3 == 1:
                ids[r, : r % steps] = 0
            else:
                ids[r, ::3] = 0
        return ids

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


if __name__ == "__main__":
    unittest.main()
