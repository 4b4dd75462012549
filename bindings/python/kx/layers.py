"""Keras-shaped layers over kx_model_add_layer: every layer kx has, by its Keras class name.

    x = kx.Input(shape=(28, 28, 1))
    y = kx.layers.Conv2D(filters=8, kernel_size=3, activation="relu")(x)
    y = kx.layers.Flatten()(y)
    model = kx.Model(inputs=x, outputs=kx.layers.Dense(units=10, activation="softmax")(y))

or kx.Sequential([kx.Input(shape=(784,)), kx.layers.Dense(units=10)]). A layer is its Keras config:
kx.layers.Dense(units=10) is {"class_name": "Dense", "config": {"units": 10}}; kx checks the settings when
the model is built. A layer kx adds later needs nothing here: kx.layers.<ClassName>(**config) reaches it.
"""
import json

from ._capi import lib

__all__ = ["Layer", "Input", "class_names"]


def class_names():
    """The Keras class names of kx's layers, in kx's order."""
    names, i = [], 0
    while True:
        name = lib.kx_layer_class_name(i)
        if name is None:
            return names
        names.append(name.decode())
        i += 1


def _plain(value):
    """A config value as JSON has it (tuples as lists)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class Layer:
    """A layer as its Keras config; call it on symbolic tensors (functional) or list it in Sequential."""

    def __init__(self, class_name, **config):
        self.class_name = class_name
        self.config = {k: _plain(v) for k, v in config.items()}

    def to_json(self):
        return json.dumps({"class_name": self.class_name, "config": self.config})

    def __call__(self, inputs):
        parents = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        for p in parents:
            if not isinstance(p, SymbolicTensor):
                raise TypeError(f"{self.class_name} is called on kx.Input(...) or another layer's output, "
                                f"not {type(p).__name__}")
        return SymbolicTensor(layer=self, parents=parents)

    def __repr__(self):
        return f"kx.layers.{self.class_name}({', '.join(f'{k}={v!r}' for k, v in self.config.items())})"


class SymbolicTensor:
    """The output of kx.Input or of a layer call: a node of a functional model not built yet."""

    def __init__(self, layer=None, parents=(), shape=None, name=None):
        self.layer, self.parents, self.shape, self.name = layer, list(parents), shape, name

    def input(self):
        """The Input this tensor comes from (a functional model has one)."""
        roots = {id(t): t for t in self._walk() if t.layer is None}
        if len(roots) != 1:
            raise ValueError(f"a kx functional model has one input; this graph has {len(roots)}")
        return next(iter(roots.values()))

    def _walk(self):
        seen, order, stack = set(), [], [(self, False)]
        while stack:
            t, done = stack.pop()
            if done:
                order.append(t)
                continue
            if id(t) in seen:
                continue
            seen.add(id(t))
            stack.append((t, True))
            stack.extend((p, False) for p in reversed(t.parents))
        return order  # every tensor after the tensors it reads


def Input(shape, name=None):
    """keras.Input: the model's input, shape per sample (no batch axis)."""
    return SymbolicTensor(shape=tuple(shape), name=name)


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)

    def make(*args, **config):
        if args:
            raise TypeError(f"kx.layers.{name} takes its Keras settings by name, e.g. Dense(units=10)")
        return Layer(name, **config)

    make.__name__ = name
    make.__doc__ = f"keras.layers.{name}(**config), as kx builds it (kx_model_add_layer)."
    return make


def __dir__():
    return sorted(set(__all__) | set(class_names()))
