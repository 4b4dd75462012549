"""Writes the small Keras files kept in tests/fuzz/corpus/keras_file/ (the C++ tests' fixtures and the
fuzzer's seeds) with the real Keras 3 (the environment of scripts/python_venv.sh keras):

  python tests/tools/make_keras_fixtures.py tests/fuzz/corpus/keras_file

mlp.*: Dense(3, relu) -> Dense(2, softmax) on 4 inputs, trained one step with Adam (so the files hold
optimizer state); graph.keras: a functional Add of two Dense layers. expected.txt: Keras's predictions
for the inputs 0.1 * (1 + i) of the first sample and the zeros of the second."""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
keras.utils.set_random_seed(3)
m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu", name="hidden"),
                      keras.layers.Dense(2, activation="softmax", name="probs")])
m.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
m.train_on_batch(np.ones((2, 4), np.float32), np.array([0, 1]))
m.save(os.path.join(out, "mlp.keras"))
m.save(os.path.join(out, "mlp.h5"))
m.save_weights(os.path.join(out, "mlp.weights.h5"))
x = np.stack([0.1 * (1 + np.arange(4, dtype=np.float32)), np.zeros(4, np.float32)])
np.savetxt(os.path.join(out, "expected.txt"), m.predict(x, verbose=0), fmt="%.9g")
i = keras.Input((2,), name="x")
s = keras.layers.Add(name="sum")([keras.layers.Dense(2, name="a")(i), keras.layers.Dense(2, name="b")(i)])
keras.Model(i, s).save(os.path.join(out, "graph.keras"))
