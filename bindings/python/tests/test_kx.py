"""Tests of the Python binding: training, arrays in and out, files, callbacks, and errors that carry
kx's status code and message. Run with KX_LIBRARY pointing at libkx.so.0 and bindings/python on
PYTHONPATH (ctest does both)."""
import math
import os
import tempfile
import unittest

import numpy as np

import kx


def blobs(n=600, seed=0):
    """Three separable clusters in 8 dimensions."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centres = rng.normal(0, 3, (3, 8)).astype(np.float32)
    x = centres[y] + rng.normal(0, 0.5, (n, 8)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def small_model(strategy=None, seed=1):
    m = kx.Sequential(strategy or kx.Strategy.mirrored(["cpu"]), input_shape=(8,))
    m.add_dense(16, "relu").add_dense(3, "softmax")
    m.compile(optimizer="adam", learning_rate=0.01, metrics=["accuracy"], seed=seed)
    return m


class Basics(unittest.TestCase):
    def test_version_and_devices(self):
        self.assertRegex(kx.version(), r"^\d+\.\d+\.\d+$")
        self.assertEqual(kx.device_count("cpu"), 1)
        self.assertGreaterEqual(kx.device_count("cuda"), 0)
        self.assertTrue(kx.device_status("cuda"))

    def test_training_learns_and_predict_returns_probabilities(self):
        x, y = blobs()
        with small_model() as m:
            data = kx.Dataset.from_arrays(x, y).shuffle(600, seed=3).batch(32)
            h = m.fit(data, epochs=5)
            self.assertEqual(len(h.history["loss"]), 5)
            self.assertLess(h.history["loss"][-1], h.history["loss"][0])
            loss, acc = m.evaluate(kx.Dataset.from_arrays(x, y))
            self.assertGreater(acc, 0.95)
            p = m.predict(x[:10])
            self.assertEqual(p.shape, (10, 3))
            np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
            self.assertGreater(np.mean(p.argmax(axis=1) == y[:10]), 0.8)

    def test_normalization_from_the_data_and_a_moving_average_of_the_weights(self):
        x, y = blobs()
        data = kx.Dataset.from_arrays(x, y).batch(32)
        mean, variance = data.feature_moments(8)
        np.testing.assert_allclose(mean, x.mean(axis=0), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(variance, x.var(axis=0), rtol=1e-4)
        with self.assertRaises(kx.Error):
            data.feature_moments(3)
        m = kx.Sequential(kx.Strategy.default(), input_shape=(8,))
        with self.assertRaises(kx.Error):
            m.add_normalization(mean, variance[:2])
        m.add_normalization(mean, variance).add_dense(3, "softmax")
        self.assertEqual(m.num_params, 16 + 8 * 3 + 3)
        m.compile(learning_rate=0.01, metrics=["accuracy"], use_ema=True, ema_momentum=0.5)
        m.fit(data, epochs=3)
        self.assertGreater(m.evaluate(data)[1], 0.95)
        # What the layer does, in numpy: the model's first weights are the statistics.
        w = m.get_weights_flat()
        np.testing.assert_allclose(w[:8], mean)
        np.testing.assert_allclose(w[8:16], variance)

    def test_mixed_precision_policies(self):
        rng = np.random.default_rng(5)
        x = rng.random((128, 8), dtype=np.float32)
        y = (x.sum(axis=1) > 4).astype(np.int32)
        for policy in ("mixed_bfloat16", "mixed_float16"):
            m = kx.Sequential(kx.Strategy.default(), input_shape=(8,))
            m.add_dense(16, "relu").add_dense(2, "softmax")
            m.compile(learning_rate=0.02, metrics=["accuracy"], seed=1, dtype_policy=policy)
            first = m.evaluate(kx.Dataset.from_arrays(x, y))[0]
            m.fit(kx.Dataset.from_arrays(x, y).batch(16), epochs=10)
            self.assertLess(m.evaluate(kx.Dataset.from_arrays(x, y))[0], 0.8 * first)  # it learns
            self.assertEqual(m.loss_scale(), 32768.0 if policy == "mixed_float16" else 1.0)
        m = kx.Sequential(kx.Strategy.default(), input_shape=(8,))
        m.add_dense(2, "softmax")
        with self.assertRaises(kx.Error):
            m.compile(dtype_policy="float64")

    def test_training_memory_is_reported_before_training(self):
        m = kx.Sequential(kx.Strategy.default(), input_shape=(8, 8, 1))
        m.add_conv2d(4, 3, activation="relu").add_flatten().add_dense(3, "softmax")
        with self.assertRaises(kx.Error):
            m.training_memory(16)  # before compile
        m.compile()
        r = m.training_memory(16)
        self.assertEqual(r["batch"], 16)
        self.assertEqual(r["weights"], 4 * m.num_params)
        self.assertEqual(r["optimizer_slots"], 2 * r["weights"])  # Adam
        self.assertLessEqual(r["step_arena"], r["step_arena_without_reuse"])
        self.assertEqual(r["total"], sum(r[k] for k in ("weights", "weight_gradients", "optimizer_slots",
                                                        "step_arena", "scratch", "batch_buffers")))
        with self.assertRaises(kx.Error):
            m.training_memory(0)

    def test_uint8_images_and_int32_labels(self):
        rng = np.random.default_rng(2)
        x = rng.integers(0, 256, (64, 4, 4), dtype=np.uint8)
        y = rng.integers(0, 2, 64).astype(np.int32)
        m = kx.Sequential(kx.Strategy.default(), input_shape=(4, 4))
        m.add_flatten().add_dense(2, "softmax")
        m.compile()
        m.fit(kx.Dataset.from_arrays(x, y).batch(16))
        self.assertEqual(len(kx.Dataset.from_arrays(x, y).take(10)), 10)

    def test_weights_round_trip_and_save_load(self):
        x, y = blobs(200)
        m = small_model()
        m.fit(kx.Dataset.from_arrays(x, y), epochs=1)
        w = m.get_weights_flat()
        self.assertEqual(w.shape, (m.num_params,))
        self.assertEqual(m.num_params, 8 * 16 + 16 + 16 * 3 + 3)
        other = small_model(seed=99)
        self.assertFalse(np.array_equal(other.get_weights_flat(), w))
        other.set_weights(w)
        np.testing.assert_array_equal(other.get_weights_flat(), w)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.kx")
            m.save(path)
            loaded = kx.load_model(kx.Strategy.default(), path)
            np.testing.assert_array_equal(loaded.get_weights_flat(), w)
            np.testing.assert_array_equal(loaded.predict(x[:5]), m.predict(x[:5]))
        self.assertIn('"Dense"', m.to_json())
        again = kx.Model.from_json(kx.Strategy.default(), m.to_json())
        self.assertEqual(again.num_params, m.num_params)

    def test_train_on_batch_is_one_step_of_fit(self):
        x, y = blobs(48)
        a, b = small_model(), small_model()
        h = a.fit(kx.Dataset.from_arrays(x, y).batch(48), epochs=1)
        loss, acc = b.train_on_batch(x, y)
        self.assertEqual(loss, h.history["loss"][0])
        self.assertEqual(acc, h.history["accuracy"][0])
        np.testing.assert_array_equal(a.get_weights_flat(), b.get_weights_flat())
        self.assertEqual(len(b.test_on_batch(x, y)), 2)

    def test_get_weights_is_keras_list_of_arrays(self):
        m = small_model()
        self.assertEqual([(n, s) for n, s, _ in m.weights],
                         [("dense/kernel", (8, 16)), ("dense/bias", (16,)), ("dense_1/kernel", (16, 3)),
                          ("dense_1/bias", (3,))])
        ws = m.get_weights()
        self.assertEqual([w.shape for w in ws], [(8, 16), (16,), (16, 3), (3,)])
        np.testing.assert_array_equal(np.concatenate([w.ravel() for w in ws]), m.get_weights_flat())
        np.testing.assert_array_equal(m.get_weight("dense_1/kernel"), ws[2])
        ws[3] = np.array([1, 2, 3], np.float32)
        m.set_weights(ws)
        np.testing.assert_array_equal(m.get_weights()[3], [1, 2, 3])
        m.set_weight("dense/bias", np.full(16, 0.5))
        np.testing.assert_array_equal(m.get_weight("dense/bias"), np.full(16, 0.5, np.float32))
        with self.assertRaises(kx.Error):
            m.set_weights(ws[:3])
        with self.assertRaises(kx.Error):
            m.set_weights([ws[0].T, ws[1], ws[2], ws[3]])
        with self.assertRaises(kx.Error):
            m.get_weight("dense_7/kernel")

    def test_cnn_layers_frozen_layers_and_weights_by_name(self):
        rng = np.random.default_rng(3)
        x = rng.random((32, 8, 8, 2), dtype=np.float32)
        y = (np.arange(32) % 3).astype(np.int64)

        def cnn(classes):
            m = kx.Sequential(kx.Strategy.default(), input_shape=(8, 8, 2))
            m.add_zero_padding2d(1).add_conv2d(4, 3).add_batch_norm().add_activation("relu")
            m.add_average_pool2d(2).add_global_average_pool2d().add_dense(classes, "softmax")
            return m.compile()

        m = cnn(3)
        self.assertEqual(m.layer_names[:3], ["zero_padding2d", "conv2d", "batch_normalization"])
        self.assertEqual(m.num_trainable_params, m.num_params - 8)
        m.set_trainable("conv2d", False)
        self.assertFalse(m.trainable("conv2d"))
        before = m.get_weights_flat()
        m.fit(kx.Dataset.from_arrays(x, y), epochs=1)
        after = m.get_weights_flat()
        np.testing.assert_array_equal(after[:2 * 9 * 4 + 4], before[:2 * 9 * 4 + 4])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "base.kx")
            m.save(path)
            other = cnn(5)
            with self.assertRaises(kx.Error):
                other.load_weights(path)
            self.assertEqual(other.load_weights(path, skip_mismatch=True), (6, 2))
        self.assertEqual(kx.Model.resnet50(kx.Strategy.default()).num_params, 25636712)

    def test_layers_without_bias_count_like_keras_and_train(self):
        s = kx.Strategy.default()
        m = kx.Sequential(s, input_shape=(784,)).add_dense(10, "softmax", use_bias=False)
        self.assertEqual(m.num_params, 7840)  # Keras: Dense(10, use_bias=False) on 784 inputs
        self.assertIn('"use_bias": false', m.to_json())
        self.assertEqual(kx.Model.from_json(s, m.to_json()).num_params, 7840)
        cnn = kx.Sequential(s, input_shape=(8, 8, 2))
        cnn.add_conv2d(4, 3, padding="same", use_bias=False).add_batch_norm().add_activation("relu")
        cnn.add_global_average_pool2d().add_dense(3, "softmax")
        self.assertEqual(cnn.num_params, 3 * 3 * 2 * 4 + 4 * 4 + 4 * 3 + 3)
        cnn.compile()
        rng = np.random.default_rng(5)
        x = rng.random((16, 8, 8, 2), dtype=np.float32)
        cnn.fit(kx.Dataset.from_arrays(x, (np.arange(16) % 3).astype(np.int64)), epochs=1)

    def test_callbacks_see_events_stop_and_checkpoint(self):
        x, y = blobs(320)
        events = []
        with tempfile.TemporaryDirectory() as d:
            cb = kx.Callbacks().model_checkpoint(os.path.join(d, "epoch-{epoch:02d}.kx"))
            cb.add(lambda e: events.append(e) or (e["kind"] == "epoch_end" and e["epoch"] == 1))
            h = small_model().fit(kx.Dataset.from_arrays(x, y).batch(32), epochs=5, callbacks=cb)
            self.assertTrue(h.stopped)
            self.assertEqual(len(h.history["loss"]), 2)
            self.assertEqual(sorted(os.listdir(d)), ["epoch-01.kx", "epoch-02.kx"])
            saved = [e["path"] for e in events if e["kind"] == "checkpoint_saved"]
            self.assertEqual([os.path.basename(p) for p in saved], ["epoch-01.kx", "epoch-02.kx"])
            # Resuming from the directory continues at epoch 3.
            h2 = small_model().fit(kx.Dataset.from_arrays(x, y).batch(32), epochs=3, resume_from=d)
            self.assertEqual(len(h2.history["loss"]), 1)
        self.assertEqual(sum(1 for e in events if e["kind"] == "batch_end"), 20)
        self.assertFalse(math.isnan([e for e in events if e["kind"] == "batch_end"][-1]["loss"]))

    def test_a_callback_reading_no_batch_metrics_sees_every_event_and_changes_nothing(self):
        x, y = blobs(320)
        kinds = []
        cb = kx.Callbacks().add(lambda e: kinds.append(e["kind"]), reads_batch_metrics=False)
        lazy = small_model().fit(kx.Dataset.from_arrays(x, y).batch(32), epochs=2, callbacks=cb)
        eager = small_model().fit(kx.Dataset.from_arrays(x, y).batch(32), epochs=2,
                                  callbacks=kx.Callbacks().add(lambda e: None))
        self.assertEqual(kinds.count("batch_end"), 20)
        self.assertEqual(lazy.history, eager.history)

    def test_an_exception_in_a_callback_stops_fit_and_is_raised(self):
        x, y = blobs(64)
        cb = kx.Callbacks()

        def boom(event):
            if event["kind"] == "batch_end":
                raise ValueError("from the callback")
        cb.add(boom)
        with self.assertRaisesRegex(ValueError, "from the callback"):
            small_model().fit(kx.Dataset.from_arrays(x, y).batch(8), epochs=2, callbacks=cb)


class Errors(unittest.TestCase):
    """Bad input raises kx.Error with the C status and kx's message; nothing is lost."""

    def assert_kx_error(self, code, pattern, fn, *args, **kwargs):
        with self.assertRaises(kx.Error) as ctx:
            fn(*args, **kwargs)
        self.assertEqual(ctx.exception.code, code)
        self.assertRegex(ctx.exception.message, pattern)
        return ctx.exception

    def test_multi_worker_needs_a_cluster_and_a_single_process_has_one_worker(self):
        s = kx.Strategy.default()
        self.assertEqual((s.num_workers, s.worker_index), (1, 0))
        saved = {k: os.environ.pop(k) for k in list(os.environ) if k == "TF_CONFIG" or k.startswith("OMPI_")}
        try:
            e = self.assert_kx_error(-1, "TF_CONFIG", kx.Strategy.multi_worker, ["cpu"])
            self.assertEqual(e.name, "KX_E_INVALID_ARGUMENT")
        finally:
            os.environ.update(saved)
        with self.assertRaises(kx.Error):
            s.set_timeout(0)

    def test_parameter_server_needs_a_cluster_with_ps_tasks(self):
        saved = {k: os.environ.pop(k) for k in list(os.environ) if k == "TF_CONFIG" or k.startswith("OMPI_")}
        try:
            e = self.assert_kx_error(-1, "TF_CONFIG", kx.Strategy.parameter_server, ["cpu"])
            self.assertEqual(e.name, "KX_E_INVALID_ARGUMENT")
            os.environ["TF_CONFIG"] = '{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 0}}'
            self.assert_kx_error(-1, "ps", kx.Strategy.parameter_server, ["cpu"])
        finally:
            os.environ.pop("TF_CONFIG", None)
            os.environ.update(saved)
        s = kx.Strategy.default()
        with self.assertRaises(kx.Error):
            s.serve()
        with self.assertRaises(kx.Error):
            s.set_staleness(2)

    def test_strategy_switches_change_how_steps_run_not_what_they_compute(self):
        x, y = blobs(200)
        weights = []
        for graphs, streaming in (("off", "auto"), ("emulate", "always")):
            s = kx.Strategy.mirrored(["cpu", "cpu"])
            s.set_step_graphs(graphs)
            s.set_data_streaming(streaming)
            s.set_cudnn(False)
            with small_model(s) as m:
                m.fit(kx.Dataset.from_arrays(x, y).shuffle(200, seed=5).batch(32), epochs=2, verbose=0)
                weights.append(m.get_weights_flat())
        np.testing.assert_array_equal(weights[0], weights[1])
        with self.assertRaises(kx.Error):
            kx.Strategy.default().set_step_graphs("sometimes")
        with self.assertRaises(kx.Error):
            kx.Strategy.default().set_data_streaming("never")

    def test_each_status_comes_with_its_message(self):
        s = kx.Strategy.default()
        e = self.assert_kx_error(-1, "positive", kx.Sequential, s, (0, 3))
        self.assertEqual(e.name, "KX_E_INVALID_ARGUMENT")
        # The names come from the library's kx_status_name.
        self.assertEqual([kx.status_name(c) for c in (0, 1, -6, -9, -100, -50)],
                         ["KX_OK", "KX_STOPPED", "KX_E_CORRUPT", "KX_E_COMM", "KX_E_INTERNAL", "KX_UNKNOWN_STATUS"])
        self.assert_kx_error(-1, "unknown device", kx.Strategy.mirrored, ["tpu:0"])
        m = kx.Sequential(s, (8,))
        self.assert_kx_error(-1, "units", m.add_dense, 0)
        m.add_dense(3, "softmax")
        x, y = blobs(32)
        self.assert_kx_error(-2, "compile", m.fit, kx.Dataset.from_arrays(x, y))
        m.compile()
        bad_labels = kx.Dataset.from_arrays(x, np.full(32, 7))
        self.assert_kx_error(-1, "label", m.fit, bad_labels)
        self.assert_kx_error(-1, "set_weights needs", m.set_weights, np.zeros(3, np.float32))
        self.assert_kx_error(-5, "nonexistent", kx.Dataset.from_idx, "/nonexistent/a.gz", "/nonexistent/b.gz")
        self.assert_kx_error(-1, ".", kx.Model.from_json, s, "{not json")
        with tempfile.NamedTemporaryFile(suffix=".kx") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
            f.flush()
            self.assert_kx_error(-6, ".", kx.load_model, s, f.name)
        # The model still trains after all of that.
        m.fit(kx.Dataset.from_arrays(x, y))

    def test_unknown_names_are_errors_before_reaching_c(self):
        m = kx.Sequential(kx.Strategy.default(), (8,))
        self.assert_kx_error(-1, "activation", m.add_dense, 3, "swish")
        self.assert_kx_error(-1, "loss", m.compile, loss="hinge")

    def test_closed_handles_are_misuse(self):
        s = kx.Strategy.default()
        s.close()
        self.assert_kx_error(-2, "closed", kx.Sequential, s, (3,))


if __name__ == "__main__":
    unittest.main()


class FirstDay(unittest.TestCase):
    """Issue 20: summary(), validation_split, ReduceLROnPlateau, LearningRateScheduler, BackupAndRestore."""

    MLP_SUMMARY = (
        'Model: "sequential"\n'
        "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓\n"
        "┃ Layer (type)                    ┃ Output Shape           ┃       Param # ┃\n"
        "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩\n"
        "│ flatten (Flatten)               │ (None, 784)            │             0 │\n"
        "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
        "│ dense (Dense)                   │ (None, 128)            │       100,480 │\n"
        "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
        "│ dropout (Dropout)               │ (None, 128)            │             0 │\n"
        "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
        "│ dense_1 (Dense)                 │ (None, 10)             │         1,290 │\n"
        "└─────────────────────────────────┴────────────────────────┴───────────────┘\n"
        " Total params: 101,770 (397.54 KB)\n"
        " Trainable params: 101,770 (397.54 KB)\n"
        " Non-trainable params: 0 (0.00 B)\n")

    def test_summary_is_keras_table(self):
        m = kx.Sequential(kx.Strategy.mirrored(["cpu"]), input_shape=(28, 28))
        m.add_flatten().add_dense(128, "relu").add_dropout(0.2).add_dense(10, "softmax")
        lines = []
        m.summary(line_length=76, print_fn=lines.append)
        self.assertEqual(lines, [self.MLP_SUMMARY])
        self.assertEqual(m.num_params, 101770)
        lines.clear()
        m.summary(print_fn=lines.append)  # Keras's default width, at most the terminal's - 4
        self.assertIn("│ dense (Dense) ", lines[0])

    def test_validation_split_holds_out_the_last_samples(self):
        x, y = blobs(100)
        with small_model() as a, small_model() as b:
            ha = a.fit(kx.Dataset.from_arrays(x, y).shuffle(100, seed=1).batch(16), epochs=2, validation_split=0.25)
            held_out = kx.Dataset.from_arrays(x[75:], y[75:])
            hb = b.fit(kx.Dataset.from_arrays(x[:75], y[:75]).shuffle(75, seed=1).batch(16), epochs=2,
                       validation=held_out)
            self.assertEqual(ha.history["val_loss"], hb.history["val_loss"])
            self.assertEqual(ha.history["loss"], hb.history["loss"])

    def test_reduce_lr_on_plateau_and_scheduler_set_the_rate(self):
        x, y = blobs(64)
        data = kx.Dataset.from_arrays(x, y).batch(32)
        with small_model() as m:
            # After the first epoch the loss never improves by min_delta 10: with patience 1 the rate
            # halves at the end of epochs 2 and 3; each epoch logs the rate it trained with (Keras logs
            # before reducing).
            cbs = kx.Callbacks().reduce_lr_on_plateau(monitor="loss", factor=0.5, patience=1, min_delta=10.0)
            h = m.fit(data, epochs=4, callbacks=cbs)
            lr = float(np.float32(0.01))
            half = float(np.float32(lr * 0.5))
            self.assertEqual(h.history["learning_rate"], [lr, lr, half, float(np.float32(half * 0.5))])
        with small_model() as m:
            seen = []

            def schedule(epoch, lr):
                seen.append((epoch, lr))
                return 0.001 * (epoch + 1)
            h = m.fit(data, epochs=2, callbacks=kx.Callbacks().learning_rate_scheduler(schedule))
            self.assertEqual(seen, [(0, float(np.float32(0.01))), (1, float(np.float32(0.001)))])
            self.assertEqual(h.history["learning_rate"], [float(np.float32(0.001)), float(np.float32(0.002))])

            def broken(epoch, lr):
                raise KeyError("no rate")
            with self.assertRaises(KeyError):
                m.fit(data, epochs=1, callbacks=kx.Callbacks().learning_rate_scheduler(broken))

    def test_backup_and_restore_resumes_an_interrupted_fit(self):
        x, y = blobs(96)
        with tempfile.TemporaryDirectory() as tmp, small_model() as straight, small_model() as m:
            def data():
                return kx.Dataset.from_arrays(x, y).shuffle(96, seed=2).batch(32)
            straight.fit(data(), epochs=4)
            backup = os.path.join(tmp, "backup")

            def interrupt(event):
                if event["kind"] == "epoch_begin" and event["epoch"] == 2:
                    raise RuntimeError("interrupted")
            with self.assertRaises(RuntimeError):
                m.fit(data(), epochs=4, callbacks=kx.Callbacks().backup_and_restore(backup).add(interrupt))
            self.assertTrue(os.path.isdir(backup))
            h = m.fit(data(), epochs=4, callbacks=kx.Callbacks().backup_and_restore(backup))
            self.assertEqual(len(h.history["loss"]), 2)  # epochs 3 and 4 only
            self.assertFalse(os.path.exists(backup))
            for a, b in zip(m.get_weights(), straight.get_weights()):
                np.testing.assert_array_equal(a, b)

    def test_evaluate_shows_keras_bar(self):
        x, y = blobs(64)
        with small_model() as m:
            data = kx.Dataset.from_arrays(x, y).batch(32)
            self.assertEqual(m.evaluate(data, verbose=2), m.evaluate(data))


def softmax_regression():
    m = kx.Sequential(kx.Strategy.mirrored(["cpu"]), input_shape=(8,))
    m.add_dense(3, "softmax")
    m.compile(optimizer="sgd", learning_rate=0.5, metrics=["accuracy"], seed=3)
    return m


def weighted_step_by_hand(kernel, bias, x, y, w, lr=0.5):
    """float64: Keras's weighted loss sum(w * l) / n, accuracy sum(w * hit) / sum(w), and the SGD step."""
    x, kernel, bias = x.astype(np.float64), kernel.astype(np.float64), bias.astype(np.float64)
    z = x @ kernel + bias
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    n = len(y)
    onehot = np.eye(3)[y]
    loss = np.sum(w * -np.log(p[np.arange(n), y])) / n
    accuracy = np.sum(w * (p.argmax(axis=1) == y)) / np.sum(w)
    dz = w[:, None] * (p - onehot) / n
    return kernel - lr * x.T @ dz, bias - lr * dz.sum(axis=0), loss, accuracy


class Weights(unittest.TestCase):
    """Keras's class_weight and sample_weight against a hand computation of one SGD step."""

    def check_step(self, data, x, y, w, **fit_args):
        with softmax_regression() as m:
            kernel, bias = m.get_weights()
            h = m.fit(data, **fit_args)
            k_ref, b_ref, loss, accuracy = weighted_step_by_hand(kernel, bias, x, y, w)
            k, b = m.get_weights()
            np.testing.assert_allclose(k, k_ref, atol=2e-6)
            np.testing.assert_allclose(b, b_ref, atol=2e-6)
            self.assertAlmostEqual(h.history["loss"][0], loss, places=6)
            self.assertAlmostEqual(h.history["accuracy"][0], accuracy, places=10)
            # The weights matter: the unweighted step lands elsewhere.
            k_plain, _, _, _ = weighted_step_by_hand(kernel, bias, x, y, np.ones(len(y)))
            self.assertGreater(np.abs(k - k_plain).max(), 1e-3)

    def test_class_weight_changes_the_step_as_a_hand_computation(self):
        x, y = blobs(24, seed=4)
        class_weight = {0: 3.0, 2: 0.25}  # class 1 weighs 1, as Keras's dict.get(c, 1.0)
        w = np.array([class_weight.get(int(c), 1.0) for c in y])
        self.check_step(kx.Dataset.from_arrays(x, y).batch(24), x, y, w, class_weight=class_weight)

    def test_sample_weights_change_the_step_and_weigh_evaluate(self):
        x, y = blobs(24, seed=5)
        w = np.random.default_rng(6).uniform(0, 2, 24).astype(np.float32)
        w[:3] = 0
        self.check_step(kx.Dataset.from_arrays(x, y, sample_weight=w).batch(24), x, y, w.astype(np.float64))
        with softmax_regression() as m:
            kernel, bias = m.get_weights()
            loss, accuracy = m.evaluate(kx.Dataset.from_arrays(x, y, sample_weight=w).batch(10))
            _, _, loss_ref, accuracy_ref = weighted_step_by_hand(kernel, bias, x, y, w.astype(np.float64))
            self.assertAlmostEqual(loss, loss_ref, places=6)
            self.assertAlmostEqual(accuracy, accuracy_ref, places=10)

    def test_bad_weights_are_errors(self):
        x, y = blobs(8)
        for bad in (-1.0, float("nan")):
            w = np.ones(8)
            w[2] = bad
            with self.assertRaises(kx.Error) as e:
                kx.Dataset.from_arrays(x, y, sample_weight=w)
            self.assertEqual(e.exception.name, "KX_E_INVALID_ARGUMENT")
        with softmax_regression() as m:
            with self.assertRaises(kx.Error) as e:
                m.fit(kx.Dataset.from_arrays(x, y), class_weight={1: -2.0})
            self.assertEqual(e.exception.name, "KX_E_INVALID_ARGUMENT")
            with self.assertRaises(kx.Error) as e:  # Keras refuses both together
                m.fit(kx.Dataset.from_arrays(x, y, sample_weight=np.ones(8)), class_weight={1: 2.0})
            self.assertEqual(e.exception.name, "KX_E_INVALID_ARGUMENT")
