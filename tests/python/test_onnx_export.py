"""ONNX export: onnx's checker (full_check) accepts the file, and OpenCV's DNN module (a runtime that
shares no code with kx) runs it with outputs equal to kx's predict within 1e-4, for an MLP, a
functional CNN with every exported layer kind, an image-output model and ResNet50 (32x32x3, 10 classes).

    KX_LIBRARY=build/libkx.so.0 PYTHONPATH=bindings/python python3 tests/python/test_onnx_export.py
"""
import json
import os
import tempfile
import unittest

import cv2
import numpy as np
import onnx
import onnx.numpy_helper

import kx

TOLERANCE = 1e-4


def layer(class_name, name, inbound, **config):
    config.update(name=name, trainable=True)
    return {"class_name": class_name, "name": name, "config": config,
            "inbound_nodes": [[[i, 0, 0, {}] for i in inbound]]}


def functional(input_shape, layers):
    inp = {"class_name": "InputLayer", "name": "input_layer", "inbound_nodes": [],
           "config": {"batch_shape": [None, *input_shape], "name": "input_layer"}}
    last = layers[-1]["name"]
    return json.dumps({"class_name": "Functional", "config": {
        "name": "functional", "layers": [inp, *layers], "input_layers": [["input_layer", 0, 0]],
        "output_layers": [[last, 0, 0]]}})


def randomize_batch_norms(model, rng):
    """Moving statistics and affine weights away from their initial 0/1, so inference form matters."""
    for name, shape, _ in model.weights:
        kind = name.rsplit("/", 1)[1]
        if kind in ("gamma", "moving_variance"):
            model.set_weight(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))
        elif kind in ("beta", "moving_mean"):
            model.set_weight(name, rng.uniform(-0.2, 0.2, shape).astype(np.float32))


def run_numpy(proto, x):
    """The graph's nodes evaluated in numpy, for the few operators of the graphs given to it."""
    values = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    values[proto.graph.input[0].name] = x.astype(np.float32)
    attrs = lambda n: {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
    for n in proto.graph.node:
        a, i = attrs(n), [values[name] for name in n.input]
        if n.op_type == "Mul":
            y = i[0] * i[1]
        elif n.op_type == "Add":
            y = i[0] + i[1]
        elif n.op_type == "Identity":
            y = i[0]
        elif n.op_type == "Flatten":
            y = i[0].reshape(i[0].shape[0], -1)
        elif n.op_type == "Gemm":
            y = i[0] @ (i[1].T if a.get("transB") else i[1]) + (i[2] if len(i) > 2 else 0)
        elif n.op_type == "Softmax":
            e = np.exp(i[0] - i[0].max(axis=a["axis"], keepdims=True))
            y = e / e.sum(axis=a["axis"], keepdims=True)
        else:
            raise AssertionError(f"run_numpy has no {n.op_type}")
        values[n.output[0]] = y.astype(np.float32)
    return values[proto.graph.output[0].name]


class OnnxExport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.strategy = kx.Strategy.default()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_export(self, model, x, name, runtime="opencv"):
        expected = model.predict(x).reshape(len(x), -1)
        path = os.path.join(self.tmp.name, name + ".onnx")
        model.export_onnx(path)
        proto = onnx.load(path)
        onnx.checker.check_model(proto, full_check=True)  # also infers every shape
        self.assertEqual([o.domain for o in proto.opset_import], [""])
        self.assertGreaterEqual(proto.opset_import[0].version, 13)
        # The declared input and output: [batch, *shape], channels last as kx's.
        dims = lambda v: [d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim]
        self.assertEqual(dims(proto.graph.input[0]), ["batch", *x.shape[1:]])
        if runtime == "opencv":
            net = cv2.dnn.readNetFromONNX(path)
            # cv2 turns a 3-D array into a 2-D image of channels: samples of rank 2 go in with a unit axis
            # (the same values in the same order; only their count of axes differs).
            net.setInput(np.ascontiguousarray(x if x.ndim != 3 else x[..., None]))
            got = net.forward().reshape(len(x), -1)
            runtime = f"OpenCV DNN {cv2.__version__}"
        else:
            got = run_numpy(proto, x).reshape(len(x), -1)
            runtime = "a numpy evaluation of its nodes"
        self.assertEqual(got.shape, expected.shape)
        diff = float(np.abs(got - expected).max())
        print(f"{name}: {len(proto.graph.node)} nodes, {runtime} vs kx predict: max |diff| {diff:.3g}")
        self.assertLessEqual(diff, TOLERANCE)
        return proto

    def test_mlp(self):
        m = kx.Sequential(self.strategy, (28, 28))
        m.add_flatten()
        m.add_normalization([0.3], [0.09])
        m.add_dense(64, "relu")
        m.add_dropout(0.2)
        m.add_dense(32, "tanh", use_bias=False)
        m.add_dense(16, "sigmoid")
        m.add_dense(10, "softmax")
        m.compile(metrics=["accuracy"])
        rng = np.random.default_rng(3)
        x = rng.uniform(0, 1, (64, 28, 28)).astype(np.float32)
        m.train_on_batch(x, rng.integers(0, 10, 64).astype(np.float32))  # weights away from their init
        proto = self.check_export(m, x[:5], "mlp")
        ops = [n.op_type for n in proto.graph.node]
        self.assertNotIn("Transpose", ops)  # no image, nothing to reorder
        self.assertNotIn("Dropout", ops)

    def test_normalization_of_sequences(self):
        # Samples of rank 2 normalised over their last axis: x * scale + shift, broadcast. OpenCV's
        # Python binding cannot hand it such an input (above), so numpy evaluates the ONNX nodes.
        m = kx.Sequential(self.strategy, (7, 4))
        m.add_normalization([0.5, -1.0, 2.0, 0.0], [4.0, 0.25, 1.0, 0.0])
        m.add_activation("softmax")
        m.add_flatten()
        m.add_dense(3)
        m.compile(loss="mse")
        x = np.random.default_rng(7).standard_normal((3, 7, 4)).astype(np.float32)
        proto = self.check_export(m, x, "sequence_normalization", runtime="numpy")
        self.assertIn("Mul", [n.op_type for n in proto.graph.node])

    def test_functional_cnn(self):
        layers = [
            layer("ZeroPadding2D", "pad", ["input_layer"], padding=[[1, 2], [2, 1]]),
            layer("Conv2D", "c1", ["pad"], filters=8, kernel_size=[3, 3], strides=[2, 2], padding="same",
                  activation="relu", use_bias=True),
            layer("BatchNormalization", "bn", ["c1"], axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True),
            layer("Conv2D", "c2", ["bn"], filters=8, kernel_size=[3, 3], strides=[1, 1], padding="same",
                  activation="linear", use_bias=False),
            layer("Add", "add", ["bn", "c2"]),
            layer("Activation", "act", ["add"], activation="tanh"),
            layer("Conv2D", "c3", ["act"], filters=4, kernel_size=[1, 1], strides=[1, 1], padding="valid",
                  activation="sigmoid", use_bias=True),
            layer("Concatenate", "cat", ["act", "c3"], axis=-1),
            layer("MaxPooling2D", "mp", ["cat"], pool_size=[2, 2], strides=[2, 2], padding="valid"),
            layer("AveragePooling2D", "ap", ["cat"], pool_size=[3, 3], strides=[2, 2], padding="valid"),
            layer("GlobalAveragePooling2D", "gap", ["ap"]),
            layer("Flatten", "flat", ["mp"]),
            layer("Concatenate", "cat2", ["gap", "flat"], axis=-1),
            layer("Dropout", "drop", ["cat2"], rate=0.3),
            layer("Dense", "out", ["drop"], units=10, activation="softmax", use_bias=True),
        ]
        m = kx.Model.from_json(self.strategy, functional((16, 16, 3), layers))
        m.compile()
        rng = np.random.default_rng(4)
        randomize_batch_norms(m, rng)
        x = rng.standard_normal((4, 16, 16, 3)).astype(np.float32)
        proto = self.check_export(m, x, "cnn")
        ops = [n.op_type for n in proto.graph.node]
        for op in ("Pad", "Conv", "BatchNormalization", "Add", "Tanh", "Sigmoid", "Concat", "MaxPool",
                   "AveragePool", "GlobalAveragePool", "Flatten", "Gemm", "Softmax"):
            self.assertIn(op, ops)
        # One Transpose in (NHWC -> NCHW) and one back before Flatten keeps kx's element order.
        self.assertEqual(ops.count("Transpose"), 2)

    def test_image_output(self):
        m = kx.Sequential(self.strategy, (6, 5, 2))
        m.add_conv2d(3, (3, 2), padding="same", activation="relu")
        m.add_batch_norm()
        m.add_activation("softmax")  # over the channels, as Keras
        m.compile(loss="mse")
        rng = np.random.default_rng(5)
        randomize_batch_norms(m, rng)
        x = rng.standard_normal((3, 6, 5, 2)).astype(np.float32)
        proto = self.check_export(m, x, "image_output")
        dims = [d.dim_value or d.dim_param for d in proto.graph.output[0].type.tensor_type.shape.dim]
        self.assertEqual(dims, ["batch", 6, 5, 3])

    def test_resnet50(self):
        m = kx.Model.resnet50(self.strategy, (32, 32, 3), include_top=True, classes=10)
        m.compile()
        rng = np.random.default_rng(6)
        randomize_batch_norms(m, rng)
        x = rng.uniform(0, 1, (2, 32, 32, 3)).astype(np.float32)
        proto = self.check_export(m, x, "resnet50")
        self.assertEqual(sum(n.op_type == "Conv" for n in proto.graph.node), 53)

    def test_errors(self):
        m = kx.Sequential(self.strategy, (3,))
        m.add_dense(2)
        with self.assertRaises(kx.Error) as e:
            m.export_onnx(os.path.join(self.tmp.name, "uncompiled.onnx"))
        self.assertEqual(e.exception.code, -2)  # KX_E_MISUSE
        m.compile()
        with self.assertRaises(kx.Error):
            m.export_onnx(os.path.join(self.tmp.name, "no-such-dir", "m.onnx"))


if __name__ == "__main__":
    unittest.main()
