"""Keras's model files against the real Keras 3: models built and trained in Keras, saved as .keras,
legacy .h5 and .weights.h5, opened in kx (predict, one training step from the file's optimizer
state), and kx's .keras files opened in Keras. Needs Keras 3 with TensorFlow (the pinned virtual
environment of scripts/python_venv.sh keras: ctest's python_keras_files runs this file with it); skipped
without them. KX_LIBRARY and PYTHONPATH as for the other binding tests."""
import os
import subprocess
import sys
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


def mlp():
    m = keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu"), layers.Dense(3, activation="softmax")])
    m.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m, np.random.default_rng(1).integers(0, 3, 32).astype(np.float32)


def cnn():
    m = keras.Sequential([
        keras.Input((8, 8, 2)),
        layers.Conv2D(4, 3, padding="same", activation="relu"),
        layers.BatchNormalization(),
        layers.MaxPooling2D(),
        layers.Conv2D(6, 3, activation="relu"),
        layers.AveragePooling2D(pool_size=2),
        layers.Flatten(),
        layers.Dense(3, activation="softmax"),
    ])
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return m, np.random.default_rng(2).integers(0, 3, 32).astype(np.float32)


def graph():
    i = keras.Input((6,), name="features")
    a = layers.Dense(5, activation="tanh", name="left")(i)
    b = layers.Dense(5, name="right")(i)
    s = layers.Add()([a, b])
    c = layers.Concatenate()([s, a])
    n = layers.BatchNormalization()(c)
    o = layers.Dense(2)(n)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    return m, np.random.default_rng(3).normal(size=(32, 2)).astype(np.float32)


def with_dropout():
    m = keras.Sequential([keras.Input((4, 4, 1)), layers.Flatten(), layers.Dropout(0.3), layers.Dense(2)])
    m.compile(optimizer="adam", loss="mse")
    return m, np.zeros((32, 2), np.float32)


def resnet50():
    # Keras Applications' own ResNet50 at the smallest input it takes: every layer name and weight
    # layout as in the ImageNet weight files users fine-tune from.
    # SGD with momentum, not Adam: a convolution's bias before BatchNormalization has no gradient in
    # exact arithmetic, and Adam's per-element scaling turns the float32 remainder (different in any
    # two libraries) into a step of the full learning rate; SGD keeps one step comparable.
    m = keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3), classes=4)
    m.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss="sparse_categorical_crossentropy")
    return m, np.random.default_rng(4).integers(0, 4, 32).astype(np.float32)


MODELS = {"mlp": mlp, "cnn": cnn, "graph": graph, "dropout": with_dropout, "resnet50": resnet50}
TRAINS = {"mlp", "cnn", "graph", "resnet50"}  # dropout's masks differ between any two libraries
# ResNet50 at 32x32 normalises its last stage over 16 values per channel, where a second step amplifies
# float32 rounding: kx and Keras, each taking two steps from Keras's own file, end up to 1.6e-3 apart
# (an Intel Xeon; TensorFlow with and without oneDNN 4e-5 apart after one). Its second steps are
# compared kx against kx; the small models' against Keras.
SECOND_STEP_AS_KERAS = {"mlp", "cnn", "graph"}


def inputs(model, seed=5):
    return np.random.default_rng(seed).normal(size=(32,) + tuple(model.input_shape[1:])).astype(np.float32)


def keras_weights(model):
    return [w.numpy() for w in model.weights]


def assert_close(test, got, want, what):
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


@unittest.skipIf(keras is None, "Keras is not installed (scripts/python_venv.sh keras makes the pinned environment)")
class KerasFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.files = {}
        for name, make in MODELS.items():
            keras.utils.set_random_seed(7)
            model, y = make()
            x = inputs(model)
            model.fit(x, y, epochs=1, batch_size=8, verbose=0)  # the optimizer has state to carry over
            paths = {ext: os.path.join(cls.dir.name, name + ext) for ext in (".keras", ".h5", ".weights.h5")}
            model.save(paths[".keras"])
            model.save(paths[".h5"])
            model.save_weights(paths[".weights.h5"])
            cls.files[name] = (paths, x, y, model.predict(x, verbose=0))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_kx_predicts_what_keras_predicts(self):
        for name, (paths, x, _, want) in self.files.items():
            for ext in (".keras", ".h5"):
                with self.subTest(model=name, file=ext):
                    m = kx.models.load_model(paths[ext])
                    assert_close(self, m.predict(x).reshape(want.shape), want, f"{name}{ext}")

    def test_weights_files_by_layer_name(self):
        for name, (paths, x, _, want) in self.files.items():
            for ext in (".weights.h5", ".h5", ".keras"):
                with self.subTest(model=name, file=ext):
                    m = kx.models.load_model(paths[".keras"])
                    m.set_weights_flat(np.zeros(m.num_params, np.float32))
                    loaded, skipped = m.load_weights(paths[ext])
                    self.assertEqual((loaded, skipped), (len(m.weights), 0))
                    assert_close(self, m.predict(x).reshape(want.shape), want, f"{name}{ext}")

    def test_one_training_step_as_keras_takes_it(self):
        for name in sorted(TRAINS):
            paths, x, y, _ = self.files[name]
            for ext in (".keras", ".h5"):
                with self.subTest(model=name, file=ext):
                    # Keras 3.15 cannot train a model it opened from a legacy .h5 (its optimizer is
                    # rebuilt for other variables): the .keras file, saved from the same state, is
                    # the reference for both.
                    theirs = keras.models.load_model(paths[".keras"])
                    ours = kx.models.load_model(paths[ext])
                    theirs.train_on_batch(x[:16], y[:16])
                    ours.train_on_batch(x[:16], y[:16])
                    for w, got in zip(keras_weights(theirs), ours.get_weights()):
                        assert_close(self, got, w, f"{name}{ext} after one step")

    def test_keras_opens_what_kx_saves_and_trains_on_from_it(self):
        for name, (paths, x, y, _) in self.files.items():
            with self.subTest(model=name):
                ours = kx.models.load_model(paths[".keras"])
                ours.train_on_batch(x[:16], y[:16])  # a state of kx's own
                out = os.path.join(self.dir.name, name + ".kx.keras")
                ours.save(out)
                # and back: kx reads its own .keras file
                again = kx.models.load_model(out)
                assert_close(self, again.predict(x), ours.predict(x), f"{name} reopened")
                theirs = keras.models.load_model(out)
                assert_close(self, theirs.predict(x, verbose=0).reshape(-1), ours.predict(x).reshape(-1), f"{name} saved by kx")
                if name in TRAINS:
                    ours.train_on_batch(x[16:], y[16:])
                    # kx's file holds its whole state: a step from it is the step kx takes in memory.
                    again.train_on_batch(x[16:], y[16:])
                    for w, got in zip(ours.get_weights(), again.get_weights()):
                        np.testing.assert_array_equal(got, w, err_msg=f"{name}: kx's step after its save")
                if name in SECOND_STEP_AS_KERAS:
                    theirs.train_on_batch(x[16:], y[16:])
                    for w, got in zip(keras_weights(theirs), ours.get_weights()):
                        assert_close(self, got, w, f"{name}: the step after kx's save")

    def test_a_whole_learning_rate_goes_back_to_keras_as_a_float(self):
        # kx's JSON once wrote SGD(1.0) as "learning_rate": 1, which Keras refuses to deserialize.
        m = keras.Sequential([keras.Input((3,)), layers.Dense(2)])
        m.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
        path = os.path.join(self.dir.name, "lr_one.keras")
        m.save(path)
        out = os.path.join(self.dir.name, "lr_one.kx.keras")
        kx.models.load_model(path).save(out)
        self.assertEqual(float(keras.models.load_model(out).optimizer.learning_rate), 1.0)

    def test_uncompiled_keras_model_opens_uncompiled_with_its_weights(self):
        model = keras.Sequential([keras.Input((3,)), layers.Dense(2)])
        path = os.path.join(self.dir.name, "plain.keras")
        model.save(path)
        m = kx.models.load_model(path)
        with self.assertRaises(kx.Error) as e:
            m.predict(np.zeros((1, 3), np.float32))
        self.assertEqual(e.exception.name, "KX_E_MISUSE")
        m.compile(optimizer="sgd", loss="mean_squared_error")
        x = inputs(model)
        assert_close(self, m.predict(x), model.predict(x, verbose=0), "uncompiled model after compile")

    def test_masked_attention_model_opens_and_predicts_as_keras(self):
        # Embedding(mask_zero=True) -> MultiHeadAttention -> GlobalAveragePooling1D -> Dense on padded ids,
        # fitted in Keras: the .keras file predicts in kx what Keras predicts (the masks reach the
        # attention and the pooling), and kx's own file of it predicts the same in Keras.
        keras.utils.set_random_seed(7)
        i = keras.Input((8,), dtype="int32")
        x = layers.Embedding(20, 8, mask_zero=True)(i)
        a = layers.MultiHeadAttention(2, 4)(x, x)
        x = layers.LayerNormalization()(layers.Add()([x, a]))
        o = layers.Dense(3, activation="softmax")(layers.GlobalAveragePooling1D()(x))
        theirs = keras.Model(i, o)
        theirs.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        rng = np.random.default_rng(5)
        ids = rng.integers(1, 20, size=(32, 8)).astype(np.int32)
        for r in range(32):
            ids[r, 1 + r % 7:] = 0  # 1 to 7 tokens, then padding
        theirs.fit(ids, rng.integers(0, 3, 32).astype(np.float32), epochs=1, batch_size=8, verbose=0)
        path = os.path.join(self.dir.name, "masked_attention.keras")
        theirs.save(path)
        want = theirs.predict(ids, verbose=0)
        ours = kx.models.load_model(path)
        assert_close(self, ours.predict(ids).reshape(want.shape), want, "masked attention")
        back = os.path.join(self.dir.name, "masked_attention_from_kx.keras")
        ours.save(back)
        assert_close(self, keras.models.load_model(back).predict(ids, verbose=0), want, "kx's file in Keras")

    def test_masking_model_opens_both_ways(self):
        # Masking(mask_value=-1) -> LSTM -> Dense on sequences padded with steps of -1, fitted in Keras: kx
        # opens the file and predicts what Keras predicts (the padding changes nothing), and Keras opens
        # kx's file with the mask value and predicts the same.
        keras.utils.set_random_seed(7)
        i = keras.Input((6, 3))
        x = layers.LSTM(4)(layers.Masking(mask_value=-1.0)(i))
        theirs = keras.Model(i, layers.Dense(2)(x))
        theirs.compile(optimizer="adam", loss="mse")
        rng = np.random.default_rng(6)
        x_in = rng.normal(size=(16, 6, 3)).astype(np.float32)
        for r in range(16):
            x_in[r, 1 + r % 5:] = -1.0  # 1 to 5 steps, then padding
        theirs.fit(x_in, rng.normal(size=(16, 2)).astype(np.float32), epochs=1, batch_size=8, verbose=0)
        path = os.path.join(self.dir.name, "masking.keras")
        theirs.save(path)
        want = theirs.predict(x_in, verbose=0)
        ours = kx.models.load_model(path)
        got = ours.predict(x_in).reshape(want.shape)
        assert_close(self, got, want, "masking")
        trimmed = x_in.copy()
        trimmed[0, 1:] = 5.0  # sample 0 keeps one step: unmasked values after it change its prediction
        self.assertGreater(float(np.abs(ours.predict(trimmed).reshape(want.shape)[0] - got[0]).max()), 1e-4)
        back = os.path.join(self.dir.name, "masking_from_kx.keras")
        ours.save(back)
        again = keras.models.load_model(back)
        by_class = {type(l).__name__: l for l in again.layers}
        self.assertEqual(by_class["Masking"].mask_value, -1.0)
        assert_close(self, again.predict(x_in, verbose=0), got, "kx's file in Keras")

    def test_recurrent_dropout_models_open_both_ways(self):
        # LSTM and GRU (in Bidirectional too) with dropout and recurrent_dropout, fitted in Keras: kx opens
        # the file and predicts what Keras predicts (inference has no dropout), trains on it, and Keras
        # opens kx's file with the setting and predicts what kx predicts.
        keras.utils.set_random_seed(7)
        i = keras.Input((6, 4))
        x = layers.LSTM(5, return_sequences=True, dropout=0.2, recurrent_dropout=0.3)(i)
        x = layers.Bidirectional(layers.GRU(3, recurrent_dropout=0.25))(x)
        theirs = keras.Model(i, layers.Dense(2)(x))
        theirs.compile(optimizer="adam", loss="mse")
        rng = np.random.default_rng(6)
        x_in = rng.normal(size=(32, 6, 4)).astype(np.float32)
        y = rng.normal(size=(32, 2)).astype(np.float32)
        theirs.fit(x_in, y, epochs=1, batch_size=8, verbose=0)
        path = os.path.join(self.dir.name, "recurrent_dropout.keras")
        theirs.save(path)
        want = theirs.predict(x_in, verbose=0)
        ours = kx.models.load_model(path)
        assert_close(self, ours.predict(x_in).reshape(want.shape), want, "recurrent_dropout")
        before = np.concatenate([w.ravel() for w in ours.get_weights()])
        ours.train_on_batch(x_in, y)
        after = np.concatenate([w.ravel() for w in ours.get_weights()])
        self.assertTrue(np.all(np.isfinite(after)))
        self.assertGreater(np.max(np.abs(after - before)), 0.0)
        back = os.path.join(self.dir.name, "recurrent_dropout_from_kx.keras")
        ours.save(back)
        again = keras.models.load_model(back)
        by_class = {type(l).__name__: l for l in again.layers}
        self.assertEqual(by_class["LSTM"].recurrent_dropout, 0.3)
        self.assertEqual(by_class["Bidirectional"].forward_layer.recurrent_dropout, 0.25)
        assert_close(self, again.predict(x_in, verbose=0), ours.predict(x_in).reshape(want.shape), "kx's file in Keras")

    def refused(self, model, needle, compile_args=None):
        model.compile(**(compile_args or {"optimizer": "adam", "loss": "mse"}))
        path = os.path.join(self.dir.name, "refused.keras")
        model.save(path)
        with self.assertRaises(kx.Error) as e:
            kx.models.load_model(path)
        self.assertEqual(e.exception.name, "KX_E_UNSUPPORTED", e.exception.message)
        self.assertIn(needle, e.exception.message)

    def test_what_kx_cannot_train_is_refused_by_name(self):
        i = keras.Input((4,))
        self.refused(keras.Model(i, keras.ops.power(layers.Dense(4)(i), 3.0)), "op Power")
        self.refused(keras.Sequential([keras.Input((5, 3)), layers.SimpleRNN(2)]), "layer class SimpleRNN")
        i = keras.Input((5, 3))
        self.refused(keras.Model(i, layers.LSTM(2, return_state=True)(i)[0]), "return_state")
        self.refused(keras.Sequential([keras.Input((6, 6, 1)), layers.MaxPooling2D(padding="same")]), "padding")
        self.refused(keras.Sequential([keras.Input((3,)), layers.Dense(2, kernel_regularizer="l2")]), "kernel_regularizer")
        self.refused(keras.Sequential([keras.Input((3,)), layers.Dense(2, activation="mish")]), "mish")
        self.refused(keras.Sequential([keras.Input((3,)), layers.Dense(2)]), "Adagrad",
                     {"optimizer": "adagrad", "loss": "mse"})

    def test_without_libhdf5_keras_files_are_unavailable(self):
        code = ("import kx, sys\n"
                "try:\n    kx.models.load_model(sys.argv[1])\nexcept kx.Error as e:\n    print(e.name, e.message)\n")
        env = dict(os.environ, KX_HDF5_LIBRARY="/nonexistent/libhdf5.so")
        out = subprocess.run([sys.executable, "-c", code, self.files["mlp"][0][".keras"]], env=env,
                             capture_output=True, text=True, check=True).stdout
        self.assertTrue(out.startswith("KX_E_UNSUPPORTED"), out)
        self.assertIn("HDF5 is unavailable", out)

    def test_a_file_that_crashes_libhdf5_is_corrupt_and_python_goes_on(self):
        # libhdf5 1.10.8 segfaults on this damaged global heap; kx reads HDF5 in kx-hdf5-reader.
        killer = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "fuzz", "libhdf5_killers",
                              "segv-in-H5HG_read.h5")
        with self.assertRaises(kx.Error) as e:
            kx.models.load_model(killer)
        self.assertEqual(e.exception.name, "KX_E_CORRUPT", e.exception.message)
        self.assertIn("segv-in-H5HG_read.h5", e.exception.message)
        self.assertIn("HDF5 reader", e.exception.message)
        m = kx.models.load_model(self.files["mlp"][0][".keras"])  # and the process reads the next file
        self.assertGreater(len(m.layer_names), 0)


if __name__ == "__main__":
    unittest.main()
