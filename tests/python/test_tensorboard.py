"""TensorBoard event files written by kx's TensorBoard callback, decoded independently: every
TFRecord's masked CRC-32C recomputed here, each Event parsed by python3-protobuf from a .proto compiled
by protoc now, and the scalars compared with the fit's history.

    KX_LIBRARY=build/libkx.so.0 PYTHONPATH=bindings/python python3 tests/python/test_tensorboard.py
"""
import ctypes
import glob
import importlib
import os
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

import kx

HERE = os.path.dirname(os.path.abspath(__file__))


def crc32c(data):
    """CRC-32C (Castagnoli), bit by bit."""
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def masked(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def compile_proto(out_dir):
    subprocess.run(["protoc", f"--proto_path={HERE}", f"--python_out={out_dir}",
                    os.path.join(HERE, "tensorboard_event.proto")], check=True)
    sys.path.insert(0, out_dir)
    return importlib.import_module("tensorboard_event_pb2")


class EventFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pb = compile_proto(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def read_events(self, directory):
        files = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
        self.assertEqual(len(files), 1, files)
        with open(files[0], "rb") as f:
            data = f.read()
        events, pos = [], 0
        while pos < len(data):
            self.assertLessEqual(pos + 12, len(data), "a truncated record header")
            header = data[pos:pos + 8]
            (length,) = struct.unpack("<Q", header)
            (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
            self.assertEqual(length_crc, masked(crc32c(header)), f"length CRC of the record at {pos}")
            body = data[pos + 12:pos + 12 + length]
            self.assertEqual(len(body), length, "a truncated record")
            (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
            self.assertEqual(body_crc, masked(crc32c(body)), f"data CRC of the record at {pos}")
            event = self.pb.Event()
            event.ParseFromString(body)
            # Every byte is a known field, written as protobuf itself would write it.
            self.assertEqual(event.SerializeToString(), body)
            events.append(event)
            pos += 16 + length
        return events

    def scalars(self, events):
        out = {}
        for e in events[1:]:
            self.assertEqual(e.WhichOneof("what"), "summary")
            self.assertEqual(len(e.summary.value), 1)
            v = e.summary.value[0]
            if v.WhichOneof("value") == "simple_value":
                out.setdefault(v.tag, {})[e.step] = v.simple_value
        return out

    def test_scalars_and_histograms_equal_the_fit(self):
        rng = np.random.default_rng(1)
        x = rng.standard_normal((96, 6)).astype(np.float32)
        y = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
        s = kx.Strategy.default()
        m = kx.Sequential(s, (6,))
        m.add_dense(16, "relu")
        m.add_dense(3, "softmax")
        lr0 = 0.01
        m.compile(optimizer="sgd", learning_rate=lr0, metrics=["accuracy"])
        train = kx.Dataset.from_arrays(x, y).batch(16)          # 6 steps per epoch
        val = kx.Dataset.from_arrays(x[:40], y[:40]).batch(16)
        log_dir = os.path.join(self.tmp.name, "logs")
        cb = kx.Callbacks().tensorboard(log_dir, update_freq=3, histogram_freq=2)
        kx.check(kx._capi.lib.kx_callbacks_add_step_decay(ctypes.c_void_p(cb.handle), ctypes.c_double(0.5),
                                                          ctypes.c_int32(1)))  # lr0 * 0.5^epoch
        started = time.time()
        history = m.fit(train, epochs=3, validation=val, callbacks=cb).history

        train_events = self.read_events(os.path.join(log_dir, "train"))
        first = train_events[0]
        self.assertEqual(first.file_version, "brain.Event:2")
        times = [e.wall_time for e in train_events]
        self.assertEqual(times, sorted(times))
        self.assertGreaterEqual(times[0], started - 1)
        self.assertLessEqual(times[-1], time.time() + 1)

        sc = self.scalars(train_events)
        f32 = lambda v: float(np.float32(v))  # simple_value is a float
        self.assertEqual(sc["epoch_loss"], {e: f32(history["loss"][e]) for e in range(3)})
        self.assertEqual(sc["epoch_accuracy"], {e: f32(history["accuracy"][e]) for e in range(3)})
        self.assertEqual(sc["epoch_learning_rate"], {e: f32(lr0 * 0.5 ** e) for e in range(3)})
        # Every 3 of the 18 batches, at the global batch count.
        self.assertEqual(sorted(sc["batch_loss"]), [3, 6, 9, 12, 15, 18])
        self.assertEqual(sorted(sc["batch_accuracy"]), [3, 6, 9, 12, 15, 18])
        # The running mean at an epoch's last batch is the epoch's loss.
        for e in range(3):
            self.assertEqual(sc["batch_loss"][6 * (e + 1)], f32(history["loss"][e]))
            self.assertEqual(sc["batch_learning_rate"][6 * e + 3], f32(lr0 * 0.5 ** e))

        val_sc = self.scalars(self.read_events(os.path.join(log_dir, "validation")))
        self.assertEqual(val_sc["epoch_loss"], {e: f32(history["val_loss"][e]) for e in range(3)})
        self.assertEqual(val_sc["epoch_accuracy"], {e: f32(history["val_accuracy"][e]) for e in range(3)})
        self.assertEqual(set(val_sc), {"epoch_loss", "epoch_accuracy"})

        # Histograms of every weight at epochs 0 and 2; those of epoch 2 are of the final weights.
        histos = {}
        for e in train_events[1:]:
            v = e.summary.value[0]
            if v.WhichOneof("value") == "histo":
                histos[(v.tag, e.step)] = v.histo
        names = [n for n, _, _ in m.weights]
        self.assertEqual(set(histos), {(n + "/histogram", step) for n in names for step in (0, 2)})
        for name in names:
            w = m.get_weight(name).astype(np.float64).ravel()
            h = histos[(name + "/histogram", 2)]
            self.assertEqual(h.num, w.size)
            self.assertEqual(h.min, w.min())
            self.assertEqual(h.max, w.max())
            self.assertAlmostEqual(h.sum, w.sum(), delta=1e-9 * max(1.0, np.abs(w).sum()))
            self.assertAlmostEqual(h.sum_squares, (w * w).sum(), delta=1e-9 * max(1.0, (w * w).sum()))
            self.assertEqual(sum(h.bucket), w.size)
            self.assertEqual(list(h.bucket_limit), sorted(h.bucket_limit))
            self.assertEqual(h.bucket_limit[-1], w.max())
            # Each bucket counts the values in (previous limit, limit].
            lower = -np.inf
            for limit, count in zip(h.bucket_limit, h.bucket):
                self.assertEqual(count, np.count_nonzero((w > lower) & (w <= limit)), name)
                lower = limit

    def test_without_validation_or_batches(self):
        x = np.linspace(-1, 1, 40, dtype=np.float32).reshape(20, 2)
        y = (x[:, 0] > 0).astype(np.float32).reshape(-1, 1)
        m = kx.Sequential(kx.Strategy.default(), (2,))
        m.add_dense(1, "sigmoid")
        m.compile(loss="binary_crossentropy")
        log_dir = os.path.join(self.tmp.name, "plain")
        history = m.fit(kx.Dataset.from_arrays(x, y).batch(5), epochs=2,
                        callbacks=kx.Callbacks().tensorboard(log_dir)).history
        self.assertFalse(os.path.exists(os.path.join(log_dir, "validation")))
        sc = self.scalars(self.read_events(os.path.join(log_dir, "train")))
        self.assertEqual(set(sc), {"epoch_loss", "epoch_learning_rate"})
        self.assertEqual(sc["epoch_loss"], {e: float(np.float32(history["loss"][e])) for e in range(2)})

    def test_bad_arguments(self):
        with self.assertRaises(kx.Error):
            kx.Callbacks().tensorboard("logs", update_freq=-1)
        with self.assertRaises(kx.Error):
            kx.Callbacks().tensorboard("", update_freq=0)


if __name__ == "__main__":
    unittest.main()
