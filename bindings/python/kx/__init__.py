"""kx for Python: Keras-like training on kx's C library, with numpy arrays in and out.

    import kx
    strategy = kx.Strategy.default()                  # the first GPU, else the CPU
    model = kx.Sequential(strategy, input_shape=(28, 28))
    model.add_flatten(); model.add_dense(128, "relu"); model.add_dense(10, "softmax")
    model.compile(optimizer="adam", metrics=["accuracy"])
    train = kx.Dataset.from_arrays(x, y).shuffle(60000, seed=42).batch(32)
    history = model.fit(train, epochs=5, verbose=1)

Every failure raises kx.Error with the C status (.code, .name) and kx's message. Objects free their
C handles on close() (or as context managers), and when garbage-collected.
"""
import ctypes
import math
import shutil

import numpy as np

from . import _capi, layers
from ._capi import Error, check, lib, status_name
from .layers import Input

c_int64 = ctypes.c_int64
P_FLOAT = ctypes.POINTER(ctypes.c_float)

__all__ = ["Error", "Strategy", "Model", "Sequential", "Input", "layers", "Dataset", "Callbacks", "History", "load_model", "load_keras", "models",
           "image_dataset_from_directory",
           "version", "device_count", "device_status", "status_name"]

_ACTIVATIONS = {None: 0, "linear": 0, "none": 0, "relu": 1, "sigmoid": 2, "tanh": 3, "softmax": 4}
_LOSSES = {"sparse_categorical_crossentropy": 0, "categorical_crossentropy": 1, "binary_crossentropy": 2,
           "mean_squared_error": 3, "mse": 3, "mean_absolute_error": 4, "mae": 4, "huber": 5, "huber_loss": 5}
_OPTIMIZERS = {"adam": 0, "sgd": 1, "adamw": 2, "rmsprop": 3}
# The dtypes kx reads directly (kx_dtype): their arrays reach kx without a conversion copy.
_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.int32): 1, np.dtype(np.int64): 2, np.dtype(np.uint8): 3,
           np.dtype(np.float64): 4}
_PRECISIONS = {"float32": 0, "mixed_bfloat16": 1, "mixed_float16": 2}  # kx_precision
_DEVICE_KINDS = {"cpu": 0, "cuda": 1}


def _lookup(table, key, what):
    k = key.lower() if isinstance(key, str) else key
    if k not in table:
        raise Error(-1, f"unknown {what} {key!r} (expected one of {sorted(str(t) for t in table if t)})")
    return table[k]


def _layer_flags(use_bias):
    """The KX_LAYER_* flags of a Dense or Conv2D layer."""
    return 0 if use_bias else _capi.LAYER_NO_BIAS


def version():
    """kx's version string, e.g. "0.1.0"."""
    return lib.kx_version_string().decode()


def device_count(kind="cuda"):
    """Devices of a kind ("cpu" or "cuda"); 0 CUDA devices without a GPU, driver or CUDA module."""
    return check(lib.kx_device_count(_lookup(_DEVICE_KINDS, kind, "device kind")))


def device_status(kind="cuda"):
    """What kx found for a kind of device, as text (where the CUDA module is, each GPU, or why none)."""
    out = ctypes.c_void_p()
    check(lib.kx_device_status(_lookup(_DEVICE_KINDS, kind, "device kind"), ctypes.byref(out)))
    return _capi.take_string(out)


class _Handle:
    """Owns one C handle; close() (or leaving a with-block, or garbage collection) destroys it."""
    _destroy = None

    def __init__(self, handle):
        self._h = handle

    @property
    def handle(self):
        if not self._h:
            raise Error(-2, f"{type(self).__name__} is closed")
        return self._h

    def close(self):
        if self._h:
            type(self)._destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


class Strategy(_Handle):
    """Which devices train: Strategy.default() or Strategy.mirrored(["cuda:0", "cuda:1"])."""
    _destroy = staticmethod(lib.kx_strategy_destroy)

    @classmethod
    def default(cls):
        out = ctypes.c_void_p()
        check(lib.kx_strategy_create_default(ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def mirrored(cls, devices=None):
        """Replicas on the named devices ("cpu", "cuda:N"; a repeated name makes logical replicas);
        None: every GPU, or one CPU replica without GPUs."""
        out = ctypes.c_void_p()
        if devices is None:
            check(lib.kx_strategy_create_mirrored(None, 0, ctypes.byref(out)))
        else:
            names = (ctypes.c_char_p * len(devices))(*[d.encode() for d in devices])
            check(lib.kx_strategy_create_mirrored(names, len(devices), ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def multi_worker(cls, devices=("cpu",)):
        """MultiWorkerMirroredStrategy: this worker's replica devices; the cluster comes from mpirun's
        environment, else TF_CONFIG. Returns once every worker has joined."""
        names = (ctypes.c_char_p * len(devices))(*[d.encode() for d in devices])
        out = ctypes.c_void_p()
        check(lib.kx_strategy_create_multi_worker(names, len(devices), ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def parameter_server(cls, devices=("cpu",)):
        """ParameterServerStrategy: this task's replica devices; the cluster (chief, worker and ps
        tasks) comes from TF_CONFIG. Returns once every task has joined. A ps task then calls serve();
        the chief and the workers call fit on the same model."""
        names = (ctypes.c_char_p * len(devices))(*[d.encode() for d in devices])
        out = ctypes.c_void_p()
        check(lib.kx_strategy_create_parameter_server(names, len(devices), ctypes.byref(out)))
        return cls(out.value)

    def serve(self):
        """A ps task: serves its shard of the weights until the chief's fit ends (KX_E_COMM if the
        chief is lost)."""
        check(lib.kx_strategy_serve(self.handle))

    def set_staleness(self, max_steps_ahead):
        """A worker may run at most this many batches ahead of the slowest live one (0: unbounded)."""
        check(lib.kx_strategy_set_staleness(self.handle, int(max_steps_ahead)))

    @property
    def num_workers(self):
        return lib.kx_strategy_num_workers(self.handle)

    @property
    def worker_index(self):
        """0 for the chief, which shows the progress bar, runs callbacks and writes checkpoints."""
        return lib.kx_strategy_worker_index(self.handle)

    def set_timeout(self, milliseconds):
        """How long a collective with other workers waits before failing with KX_E_COMM."""
        check(lib.kx_strategy_set_timeout(self.handle, int(milliseconds)))

    @property
    def num_replicas_in_sync(self):
        return lib.kx_strategy_num_replicas(self.handle)

    def set_num_threads(self, n):
        check(lib.kx_strategy_set_num_threads(self.handle, n))

    def set_tf32(self, enabled):
        check(lib.kx_strategy_set_tf32(self.handle, 1 if enabled else 0))

    def set_step_graphs(self, mode):
        """"auto" (record each step as a CUDA graph where possible), "off" or "emulate" (tests)."""
        check(lib.kx_strategy_set_step_graphs(self.handle, _lookup({"auto": 0, "off": 1, "emulate": 2}, mode,
                                                                   "step graphs mode")))

    def set_data_streaming(self, mode):
        """"auto" (copy datasets to the device when they fit) or "always" (stream batch by batch)."""
        check(lib.kx_strategy_set_data_streaming(self.handle, _lookup({"auto": 0, "always": 1}, mode,
                                                                      "data streaming mode")))

    def set_cudnn(self, enabled):
        check(lib.kx_strategy_set_cudnn(self.handle, 1 if enabled else 0))


class History:
    """Per-epoch metrics of a fit, as Keras's History.history: {"loss": [...], "accuracy": [...]}."""

    def __init__(self, handle):
        self.history = {}
        try:
            epochs = lib.kx_history_epochs(handle)
            for name in ("loss", "accuracy", "val_loss", "val_accuracy", "learning_rate"):
                v = ctypes.c_double()
                if epochs <= 0 or lib.kx_history_get(handle, name.encode(), 0, ctypes.byref(v)) != _capi.OK:
                    continue  # not recorded by this fit
                values = []
                for e in range(epochs):
                    check(lib.kx_history_get(handle, name.encode(), e, ctypes.byref(v)))
                    values.append(v.value)
                if not all(math.isnan(x) for x in values):
                    self.history[name] = values
        finally:
            lib.kx_history_destroy(handle)
        self.stopped = False


class Callbacks(_Handle):
    """A list of Keras-like callbacks for fit. Python functions get an event dict and may return
    True to stop training; an exception in one stops training and is raised again by fit."""
    _destroy = staticmethod(lib.kx_callbacks_destroy)

    def __init__(self):
        out = ctypes.c_void_p()
        check(lib.kx_callbacks_create(ctypes.byref(out)))
        super().__init__(out.value)
        self._functions = []  # keeps the ctypes trampolines alive
        self.pending_error = None

    def model_checkpoint(self, path_template, every_n_batches=0, keep_last=0):
        check(lib.kx_callbacks_add_model_checkpoint(self.handle, path_template.encode(), every_n_batches, keep_last))
        return self

    def early_stopping(self, monitor="val_loss", patience=0, min_delta=0.0, restore_best_weights=False):
        check(lib.kx_callbacks_add_early_stopping(self.handle, monitor.encode(), patience, min_delta,
                                                  1 if restore_best_weights else 0))
        return self

    def csv_logger(self, path, append=False):
        check(lib.kx_callbacks_add_csv_logger(self.handle, path.encode(), 1 if append else 0))
        return self

    def tensorboard(self, log_dir="logs", update_freq="epoch", histogram_freq=0):
        """Keras's TensorBoard: event files under log_dir/train and log_dir/validation, for
        `tensorboard --logdir log_dir`. update_freq: "epoch", or N to log "batch_*" scalars every N
        batches; histogram_freq N > 0: histograms of the weights every N epochs."""
        if update_freq == "epoch":
            update_freq = 0
        elif update_freq == "batch":
            update_freq = 1
        check(lib.kx_callbacks_add_tensorboard(self.handle, str(log_dir).encode(), int(update_freq),
                                               int(histogram_freq)))
        return self

    def terminate_on_nan(self):
        check(lib.kx_callbacks_add_terminate_on_nan(self.handle))
        return self

    _MODES = {"auto": 0, "min": 1, "max": 2}

    def reduce_lr_on_plateau(self, monitor="val_loss", factor=0.1, patience=10, mode="auto", min_delta=1e-4,
                             cooldown=0, min_lr=0.0):
        """Keras's ReduceLROnPlateau, with its defaults; the history then has "learning_rate"."""
        o = _capi.ReduceLrOptions()
        lib.kx_reduce_lr_options_init(ctypes.byref(o), ctypes.sizeof(o))
        o.monitor, o.factor, o.patience = monitor.encode(), factor, patience
        o.mode = _lookup(self._MODES, mode, "mode")
        o.min_delta, o.cooldown, o.min_lr = min_delta, cooldown, min_lr
        o.zero_is_value = ((_capi.REDUCE_LR_ZERO_PATIENCE if patience == 0 else 0) |
                           (_capi.REDUCE_LR_ZERO_MIN_DELTA if min_delta == 0 else 0))
        if factor == 0:
            raise Error(-1, "ReduceLROnPlateau: factor must be in (0, 1)")
        check(lib.kx_callbacks_add_reduce_lr_on_plateau_options(self.handle, ctypes.byref(o)))
        return self

    def learning_rate_scheduler(self, schedule):
        """Keras's LearningRateScheduler: schedule(epoch, lr) -> the epoch's rate, at each epoch's start.
        An exception in it stops fit, which raises it again."""
        def trampoline(epoch, lr, _user):
            if self.pending_error is not None:
                return math.nan
            try:
                return float(schedule(epoch, lr))
            except BaseException as e:  # never unwinds through C: kx_fit fails, and fit raises e
                self.pending_error = e
                return math.nan
        c_fn = _capi.LR_SCHEDULE(trampoline)
        self._functions.append(c_fn)
        check(lib.kx_callbacks_add_learning_rate_scheduler(self.handle, c_fn, None))
        return self

    def backup_and_restore(self, backup_dir, save_freq="epoch"):
        """Keras's BackupAndRestore: a backup in backup_dir every epoch (or every save_freq batches);
        a fit with this callback resumes from it; a fit that ends without an error deletes it."""
        every = 0 if save_freq == "epoch" else int(save_freq)
        check(lib.kx_callbacks_add_backup_and_restore_every(self.handle, str(backup_dir).encode(), every))
        return self

    _KINDS = ["train_begin", "epoch_begin", "batch_end", "epoch_end", "train_end", "checkpoint_saved"]

    def add(self, fn, reads_batch_metrics=True):
        """fn(event: dict) -> truthy to stop. Keys: kind, epoch, step, loss, accuracy, val_loss,
        val_accuracy, path, steps_per_epoch, global_step, batch_loss, batch_accuracy. reads_batch_metrics=False: fn does not read
        the loss or accuracy of batch_end events, so a GPU fit need not wait for each step's loss
        (those events then carry the latest values read)."""
        def trampoline(ev_ptr, _user):
            if self.pending_error is not None:
                return 1
            ev = ev_ptr.contents
            event = {"kind": self._KINDS[ev.kind] if 0 <= ev.kind < len(self._KINDS) else ev.kind,
                     "epoch": ev.epoch, "step": ev.step, "loss": ev.loss, "accuracy": ev.accuracy,
                     "val_loss": ev.val_loss, "val_accuracy": ev.val_accuracy,
                     "path": ev.path.decode() if ev.path else None, "steps_per_epoch": ev.steps_per_epoch,
                     "global_step": ev.global_step, "batch_loss": ev.batch_loss,
                     "batch_accuracy": ev.batch_accuracy, "learning_rate": ev.learning_rate}
            try:
                return 1 if fn(event) else 0
            except BaseException as e:  # never unwinds through C: fails kx_fit (as Keras), which raises it
                self.pending_error = e
                return -100  # KX_E_INTERNAL
        c_fn = _capi.CALLBACK(trampoline)
        self._functions.append(c_fn)
        flags = _capi.CALLBACK_MAY_FAIL | (0 if reads_batch_metrics else _capi.CALLBACK_NO_BATCH_METRICS)
        check(lib.kx_callbacks_add_function_flags(self.handle, c_fn, None, flags))
        return self


class Dataset(_Handle):
    """(x, y) samples held by kx. Methods that configure return self, so calls chain."""
    _destroy = staticmethod(lib.kx_dataset_destroy)

    @classmethod
    def from_arrays(cls, x, y, sample_weight=None):
        """Copies numpy arrays (shape[0] = samples): x float32/float64/int32/int64/uint8 (uint8 is
        scaled to [0, 1]), y the labels (class indices, one-hot rows or targets). Arrays of those dtypes
        in C order are read where they are (kx makes its one float32 copy); others are converted first.
        sample_weight: one weight >= 0 per sample, Keras's sample_weight (loss sum(w * l) / samples,
        accuracy sum(w * hit) / sum(w)), in training, validation and evaluate."""
        x, y = cls._prepare(x), cls._prepare(y)
        if y.ndim == 1:
            y = y.reshape(-1, 1)
        xs = (ctypes.c_int64 * x.ndim)(*x.shape)
        ys = (ctypes.c_int64 * y.ndim)(*y.shape)
        out = ctypes.c_void_p()
        if sample_weight is None:
            check(lib.kx_dataset_from_arrays(x.ctypes.data, _DTYPES[x.dtype], xs, x.ndim, y.ctypes.data,
                                             _DTYPES[y.dtype], ys, y.ndim, ctypes.byref(out)))
            return cls(out.value)
        w = np.ascontiguousarray(sample_weight, np.float32).ravel()
        if w.size != x.shape[0]:
            raise Error(-1, f"sample_weight has {w.size} values but x has {x.shape[0]} samples")
        check(lib.kx_dataset_from_arrays_weighted(x.ctypes.data, _DTYPES[x.dtype], xs, x.ndim, y.ctypes.data,
                                                  _DTYPES[y.dtype], ys, y.ndim, w.ctypes.data_as(P_FLOAT),
                                                  ctypes.byref(out)))
        return cls(out.value)

    @staticmethod
    def _prepare(a):
        a = np.asarray(a)
        if a.dtype not in _DTYPES:
            a = a.astype(np.float32)
        return np.ascontiguousarray(a)

    @classmethod
    def from_idx(cls, images_path, labels_path):
        """MNIST-format IDX files (.gz or not); images scaled to [0, 1]."""
        out = ctypes.c_void_p()
        check(lib.kx_dataset_from_idx(str(images_path).encode(), str(labels_path).encode(), ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def from_npy(cls, x_path, y_path):
        """numpy .npy files (as np.save writes them): float32/float64/uint8/int32/int64, C order."""
        out = ctypes.c_void_p()
        check(lib.kx_dataset_from_npy(str(x_path).encode(), str(y_path).encode(), ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def from_csv(cls, path, label_column):
        """A CSV file with a header row: the column named label_column is y, the others x."""
        out = ctypes.c_void_p()
        check(lib.kx_dataset_from_csv(str(path).encode(), str(label_column).encode(), ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def from_image_directory(cls, directory, image_size=(256, 256), channels=3):
        """One subfolder per class (labels in sorted order), JPEG and PNG files decoded batch by batch,
        resized bilinearly to image_size and scaled to [0, 1]. See image_dataset_from_directory."""
        out = ctypes.c_void_p()
        height, width = image_size
        check(lib.kx_dataset_from_image_directory(str(directory).encode(), height, width, channels,
                                                  ctypes.byref(out)))
        return cls(out.value)

    @property
    def class_names(self):
        """An image folder's class names, label i = class_names[i] ([] for other datasets)."""
        names = []
        for i in range(lib.kx_dataset_num_classes(self.handle)):
            name = ctypes.c_char_p()
            check(lib.kx_dataset_class_name(self.handle, i, ctypes.byref(name)))
            names.append(name.value.decode())
        return names

    @property
    def num_skipped(self):
        """Files of an image folder left out because they did not decode."""
        return lib.kx_dataset_num_skipped(self.handle)

    def cache(self, filename=None):
        """tf.data's cache: decoded samples kept in memory (None) or in a file reused by later runs."""
        check(lib.kx_dataset_cache(self.handle, None if filename is None else str(filename).encode()))
        return self

    def prefetch(self, buffer_size):
        """Batches decoded ahead of the step on a background thread."""
        check(lib.kx_dataset_prefetch(self.handle, buffer_size))
        return self

    def random_flip(self, seed=0):
        """Keras's RandomFlip("horizontal", seed=seed) on every image sample as it is read."""
        check(lib.kx_dataset_random_flip(self.handle, seed))
        return self

    def random_crop(self, height, width, seed=0):
        """Keras's RandomCrop(height, width, seed=seed) on every image sample as it is read."""
        check(lib.kx_dataset_random_crop(self.handle, height, width, seed))
        return self

    def take(self, n):
        out = ctypes.c_void_p()
        check(lib.kx_dataset_take(self.handle, n, ctypes.byref(out)))
        return Dataset(out.value)

    def skip(self, n):
        out = ctypes.c_void_p()
        check(lib.kx_dataset_skip(self.handle, n, ctypes.byref(out)))
        return Dataset(out.value)

    def shuffle(self, buffer_size, seed=0):
        check(lib.kx_dataset_shuffle(self.handle, buffer_size, seed))
        return self

    def batch(self, global_batch_size, drop_remainder=False):
        """Global batch: kx splits it across a strategy's replicas (Keras's batch_size *= replicas)."""
        check(lib.kx_dataset_batch(self.handle, global_batch_size, 1 if drop_remainder else 0))
        return self

    def feature_moments(self, channels=1):
        """Keras's Normalization.adapt: (mean, variance) lists of x per channel (channels = x's last
        axis) or over all values (channels = 1)."""
        mean, variance = (ctypes.c_float * channels)(), (ctypes.c_float * channels)()
        check(lib.kx_dataset_feature_moments(self.handle, mean, variance, channels))
        return list(mean), list(variance)

    def __len__(self):
        return lib.kx_dataset_num_samples(self.handle)


def image_dataset_from_directory(directory, labels="inferred", label_mode="int", color_mode="rgb",
                                 batch_size=32, image_size=(256, 256), shuffle=True, seed=None):
    """Keras's keras.utils.image_dataset_from_directory for what kx supports (inferred integer labels,
    color_mode "grayscale"/"rgb"/"rgba"). Unlike Keras, pixels are scaled to [0, 1]; batch_size None
    leaves kx's default (32)."""
    if labels != "inferred" or label_mode != "int":
        raise Error(-7, "kx infers integer labels from the folders (labels='inferred', label_mode='int')")
    channels = _lookup({"grayscale": 1, "rgb": 3, "rgba": 4}, color_mode, "color_mode")
    d = Dataset.from_image_directory(directory, image_size, channels)
    if shuffle:
        d.shuffle(len(d), 0 if seed is None else seed)
    if batch_size is not None:
        d.batch(batch_size)
    return d


class Model(_Handle):
    """A kx model. Build one as Keras does, Model(inputs=x, outputs=y) from kx.Input and kx.layers calls,
    or with Sequential(...), Model.from_json(...) or load_model(...)."""
    _destroy = staticmethod(lib.kx_model_destroy)

    def __init__(self, handle=None, *, inputs=None, outputs=None, strategy=None):
        if inputs is None and outputs is None:
            super().__init__(handle)
            return
        if handle is not None or inputs is None or outputs is None:
            raise TypeError("Model(inputs=..., outputs=..., strategy=None) builds a functional model")
        if not isinstance(outputs, layers.SymbolicTensor) or not isinstance(inputs, layers.SymbolicTensor):
            raise TypeError("a kx functional model has one input and one output tensor")
        if outputs.input() is not inputs:
            raise ValueError("outputs are not computed from inputs")
        strategy = strategy or Strategy.default()
        shape = (ctypes.c_int64 * len(inputs.shape))(*inputs.shape)
        out = ctypes.c_void_p()
        name = inputs.name.encode() if inputs.name else None
        check(lib.kx_model_create_functional(strategy.handle, shape, len(inputs.shape), name, ctypes.byref(out)))
        super().__init__(out.value)
        names = {id(inputs): inputs.name or "input_layer"}
        walk = outputs._walk()
        called = [id(t.layer) for t in walk if t.layer is not None]
        if len(called) != len(set(called)):
            raise Error(-7, "a layer called on several inputs shares its weights in Keras; kx has no shared layers")
        for t in walk:
            if t.layer is not None:
                names[id(t)] = self._add(t.layer, [names[id(p)] for p in t.parents])

    def _add(self, layer, inputs=()):
        """Adds a kx.layers layer reading the named tensors (none: the last layer); returns its name."""
        if not isinstance(layer, layers.Layer):
            raise TypeError(f"expected a kx.layers layer, got {type(layer).__name__}")
        names = (ctypes.c_char_p * max(len(inputs), 1))(*[n.encode() for n in inputs])
        out = ctypes.c_void_p()
        check(lib.kx_model_add_layer(self.handle, layer.to_json().encode(), names, len(inputs), ctypes.byref(out)))
        return _capi.take_string(out)

    @classmethod
    def from_json(cls, strategy, text):
        out = ctypes.c_void_p()
        check(lib.kx_model_from_json(strategy.handle, text.encode(), ctypes.byref(out)))
        return cls(out.value)

    def to_json(self):
        out = ctypes.c_void_p()
        check(lib.kx_model_to_json(self.handle, ctypes.byref(out)))
        return _capi.take_string(out)

    def compile(self, optimizer="adam", learning_rate=None, loss="sparse_categorical_crossentropy", metrics=(),
                from_logits=False, momentum=0.0, beta1=None, beta2=None, epsilon=None, seed=0, use_ema=False,
                ema_momentum=None, dtype_policy="float32", weight_decay=None, rho=None, centered=False):
        """As Keras's compile; None means kx's (Keras's) default, and every number given is used as it is
        (beta1=0 is β1 = 0). use_ema: Keras's moving average of the trained weights (ema_momentum 0.99 by
        default), which replaces them when fit ends. dtype_policy: Keras's mixed-precision policy,
        "float32", "mixed_bfloat16" or "mixed_float16" (with dynamic loss scaling, see loss_scale()).
        weight_decay: AdamW's (default 0.004); rho and centered: RMSprop's (default 0.9, False)."""
        o = _capi.CompileOptions()
        lib.kx_compile_options_init(ctypes.byref(o), ctypes.sizeof(o))
        o.optimizer = _lookup(_OPTIMIZERS, optimizer, "optimizer")
        o.loss = _lookup(_LOSSES, loss, "loss")
        o.momentum = momentum
        for bit, (field, value) in enumerate((("learning_rate", learning_rate), ("beta1", beta1), ("beta2", beta2),
                                              ("epsilon", epsilon), ("ema_momentum", ema_momentum),
                                              ("weight_decay", weight_decay), ("rho", rho))):
            if value is not None:
                setattr(o, field, value)
                if value == 0:
                    o.zero_is_value |= 1 << bit  # KX_COMPILE_ZERO_*: this zero is meant
        o.from_logits = 1 if from_logits else 0
        for m in metrics:
            if m != "accuracy":
                raise Error(-1, f"unknown metric {m!r} (kx has \"accuracy\")")
            o.metrics |= 1
        o.seed = seed
        o.use_ema = 1 if use_ema else 0
        o.centered = 1 if centered else 0
        o.precision = _lookup(_PRECISIONS, dtype_policy, "dtype_policy")
        check(lib.kx_model_compile(self.handle, ctypes.byref(o)))
        return self

    def loss_scale(self):
        """The dynamic loss scale of a "mixed_float16" model (1.0 for other policies)."""
        out = ctypes.c_double()
        check(lib.kx_model_loss_scale(self.handle, ctypes.byref(out)))
        return out.value

    def training_memory(self, batch):
        """What one replica's training holds in its device's memory for global batches of `batch`
        samples, in bytes, as a dict: weights, weight_gradients, optimizer_slots, step_arena (activations,
        gradients between layers and workspace, sharing memory where their lifetimes allow), scratch,
        batch_buffers and their total; with step_arena_without_reuse and its parts for comparison."""
        out = _capi.TrainingMemory()
        out.struct_size = ctypes.sizeof(out)
        check(lib.kx_model_training_memory(self.handle, batch, ctypes.byref(out)))
        return {name: getattr(out, name) for name, _ in _capi.TrainingMemory._fields_ if name != "struct_size"}

    @classmethod
    def resnet50(cls, strategy, input_shape=(224, 224, 3), include_top=True, classes=1000):
        """keras.applications.ResNet50's architecture, uncompiled."""
        shape = (ctypes.c_int64 * 3)(*input_shape)
        out = ctypes.c_void_p()
        check(lib.kx_model_create_resnet50(strategy.handle, shape, 1 if include_top else 0, classes, ctypes.byref(out)))
        return cls(out.value)

    @property
    def num_params(self):
        """Every weight, moving statistics included (Keras's "Total params")."""
        return lib.kx_model_num_params(self.handle)

    @property
    def num_trainable_params(self):
        return lib.kx_model_num_trainable_params(self.handle)

    @property
    def layer_names(self):
        names = []
        for i in range(lib.kx_model_num_layers(self.handle)):
            out = ctypes.c_void_p()
            check(lib.kx_model_layer_name(self.handle, i, ctypes.byref(out)))
            names.append(_capi.take_string(out))
        return names

    def set_trainable(self, layer, trainable):
        """Freezes (False) or unfreezes a layer by name; takes effect at the next training step."""
        check(lib.kx_model_set_trainable(self.handle, layer.encode(), 1 if trainable else 0))

    def trainable(self, layer):
        out = ctypes.c_int32()
        check(lib.kx_model_get_trainable(self.handle, layer.encode(), ctypes.byref(out)))
        return bool(out.value)

    def load_weights(self, path, skip_mismatch=False):
        """Weights by name from a safetensors file; returns (loaded, skipped) counts."""
        loaded, skipped = ctypes.c_int64(), ctypes.c_int64()
        check(lib.kx_model_load_weights(self.handle, str(path).encode(), 1 if skip_mismatch else 0,
                                        ctypes.byref(loaded), ctypes.byref(skipped)))
        return loaded.value, skipped.value

    @property
    def weights(self):
        """[(name, shape, offset)] of every weight tensor in Keras's model.weights order ("dense/kernel", ...);
        offset is where the tensor starts in get_weights_flat()."""
        out = []
        for i in range(lib.kx_model_num_weights(self.handle)):
            name, shape, rank = ctypes.c_void_p(), (c_int64 * 8)(), ctypes.c_size_t()
            check(lib.kx_model_weight_info(self.handle, i, ctypes.byref(name), shape, ctypes.byref(rank)))
            offset = c_int64()
            check(lib.kx_model_weight_offset(self.handle, i, ctypes.byref(offset)))
            out.append((_capi.take_string(name), tuple(shape[:rank.value]), offset.value))
        return out

    def get_weights(self):
        """The weights as Keras's get_weights(): a list of float32 arrays, in model.weights order."""
        flat = self.get_weights_flat()
        return [flat[o:o + int(np.prod(shape, dtype=np.int64))].reshape(shape).copy() for _, shape, o in self.weights]

    def set_weights(self, weights):
        """As Keras's set_weights: a list of arrays in model.weights order, each of its tensor's shape.
        A single flat array of num_params values (get_weights_flat()) is accepted too."""
        if isinstance(weights, np.ndarray):
            return self.set_weights_flat(weights)
        tensors = self.weights
        weights = list(weights)
        if len(weights) != len(tensors):
            raise Error(-1, f"set_weights: the model has {len(tensors)} weight tensors, got {len(weights)} arrays")
        flat = self.get_weights_flat()
        for (name, shape, o), w in zip(tensors, weights):
            w = np.asarray(w, np.float32)
            if w.shape != shape:
                raise Error(-1, f"set_weights: {name} has shape {shape}, got {w.shape}")
            flat[o:o + w.size] = w.ravel()
        self.set_weights_flat(flat)

    def get_weight(self, name):
        """One weight tensor by name ("dense/kernel"), as an array of its shape."""
        for n, shape, _ in self.weights:
            if n == name:
                out = np.empty(shape, np.float32)
                check(lib.kx_model_get_weight(self.handle, name.encode(), out.ctypes.data_as(P_FLOAT), out.size))
                return out
        raise Error(-1, f"get_weight: the model has no weight {name!r}")

    def set_weight(self, name, value):
        """Replaces one weight tensor by name; value must have the tensor's number of elements."""
        value = np.ascontiguousarray(value, np.float32)
        check(lib.kx_model_set_weight(self.handle, name.encode(), value.ctypes.data_as(P_FLOAT), value.size))

    def _on_batch(self, fn, x, y):
        x = np.ascontiguousarray(x, np.float32)
        y = np.ascontiguousarray(y, np.float32)
        loss, acc = ctypes.c_double(), ctypes.c_double()
        check(fn(self.handle, x.ctypes.data_as(P_FLOAT), y.ctypes.data_as(P_FLOAT), len(x), ctypes.byref(loss),
                 ctypes.byref(acc)))
        return (loss.value, acc.value) if not math.isnan(acc.value) else loss.value

    def train_on_batch(self, x, y):
        """Keras's train_on_batch: one step on (x, y) as one batch; returns its loss (and accuracy when
        compiled with it), computed before the update."""
        return self._on_batch(lib.kx_model_train_on_batch, x, y)

    def test_on_batch(self, x, y):
        """Keras's test_on_batch: the loss (and accuracy) of (x, y), without training."""
        return self._on_batch(lib.kx_model_test_on_batch, x, y)

    def get_weights_flat(self):
        """Every parameter as one float32 array, layer by layer in the order the layers were added."""
        w = np.empty(self.num_params, np.float32)
        check(lib.kx_model_get_weights(self.handle, w.ctypes.data_as(P_FLOAT), w.size))
        return w

    def set_weights_flat(self, w):
        w = np.ascontiguousarray(w, np.float32).ravel()
        check(lib.kx_model_set_weights(self.handle, w.ctypes.data_as(P_FLOAT), w.size))

    def fit(self, train, epochs=1, initial_epoch=0, steps_per_epoch=0, validation=None, validation_steps=0,
            verbose=0, callbacks=None, resume_from=None, validation_split=0.0, class_weight=None):
        """Trains; returns a History (history.stopped is True when a callback stopped training).
        validation_split: Keras's, the last fraction of train (before shuffling) validates.
        class_weight: {class: weight}, as Keras's: the training loss and accuracy of a sample of class c
        weigh class_weight.get(c, 1.0) (not with a train dataset that has sample weights)."""
        o = _capi.FitOptions()
        lib.kx_fit_options_init(ctypes.byref(o), ctypes.sizeof(o))
        o.epochs, o.initial_epoch, o.steps_per_epoch = epochs, initial_epoch, steps_per_epoch
        o.validation = validation.handle if validation is not None else None
        o.validation_steps, o.verbose = validation_steps, verbose
        o.resume_from = str(resume_from).encode() if resume_from else None
        o.validation_split = validation_split
        if class_weight:
            classes = [int(c) for c in class_weight]
            if min(classes) < 0:
                raise Error(-1, f"class_weight has a negative class {min(classes)}")
            weights = np.ones(max(classes) + 1, np.float32)  # classes not given weigh 1, as Keras
            for c, w in class_weight.items():
                weights[int(c)] = w
            o.class_weight, o.n_class_weight = weights.ctypes.data_as(P_FLOAT), weights.size
        out = ctypes.c_void_p()
        cb = callbacks.handle if callbacks is not None else None
        if callbacks is not None:
            callbacks.pending_error = None
        status = lib.kx_fit(self.handle, train.handle, ctypes.byref(o), cb, ctypes.byref(out))
        if callbacks is not None and callbacks.pending_error is not None:
            if out.value:
                lib.kx_history_destroy(out.value)
            error, callbacks.pending_error = callbacks.pending_error, None
            raise error
        check(status)
        history = History(out.value)
        history.stopped = status == _capi.STOPPED
        return history

    def evaluate(self, data, verbose=0):
        """(loss, accuracy) over the dataset; accuracy is NaN without the metric. verbose 1 or 2:
        Keras's progress bar."""
        loss, acc = ctypes.c_double(), ctypes.c_double()
        check(lib.kx_evaluate_verbose(self.handle, data.handle, verbose, ctypes.byref(loss), ctypes.byref(acc)))
        return loss.value, acc.value

    def summary(self, line_length=None, print_fn=None):
        """Prints Keras 3's model.summary() table (print_fn(text) instead of print when given). The
        width is Keras's: line_length, else its default (88, or 108 with a "Connected to" column) capped
        at the terminal's width minus 4."""
        if line_length is None:
            default = 108 if '"class_name": "Functional"' in self.to_json().replace('":"', '": "') else 88
            line_length = min(default, shutil.get_terminal_size().columns - 4)
        out = ctypes.c_void_p()
        check(lib.kx_model_summary_width(self.handle, int(line_length), ctypes.byref(out)))
        text = _capi.take_string(out)
        if print_fn is not None:
            print_fn(text)
        else:
            print(text, end="")

    def predict(self, x):
        """The model's outputs (probabilities for softmax/sigmoid outputs), one row per sample."""
        x = np.ascontiguousarray(x, np.float32)
        per_sample = lib.kx_model_input_size(self.handle)
        if x.ndim == 0 or x.size != x.shape[0] * per_sample:
            raise Error(-1, f"predict: samples of shape {x.shape[1:]} do not have the model's {per_sample} values")
        out = np.empty((x.shape[0], lib.kx_model_output_size(self.handle)), np.float32)
        fp = ctypes.POINTER(ctypes.c_float)
        check(lib.kx_predict(self.handle, x.ctypes.data_as(fp), x.shape[0], out.ctypes.data_as(fp), out.size))
        return out

    def save(self, path):
        """kx's own file (safetensors), or with a .keras name a Keras 3 file (save_keras)."""
        if str(path).endswith(".keras"):
            self.save_keras(path)
        else:
            check(lib.kx_model_save(self.handle, str(path).encode()))

    def save_keras(self, path):
        """A .keras file that keras.models.load_model opens (config, weights, optimizer state)."""
        check(lib.kx_model_save_keras(self.handle, str(path).encode()))

    def export_onnx(self, path):
        """Writes an ONNX file (opset 13) for inference runtimes: input [N, *input_shape] channels last,
        output "output" equal to predict's."""
        check(lib.kx_model_export_onnx(self.handle, str(path).encode()))


class Sequential(Model):
    """A stack of layers, as Keras: Sequential([kx.Input(shape=(28, 28)), kx.layers.Flatten(),
    kx.layers.Dense(units=10)], strategy=None) and add(layer); or Sequential(strategy, input_shape=(28, 28))
    then add(...) / add_* in order."""

    def __init__(self, layers_or_strategy=None, input_shape=None, strategy=None):
        stack = []
        if isinstance(layers_or_strategy, Strategy):
            strategy = layers_or_strategy
        elif layers_or_strategy is not None:
            stack = list(layers_or_strategy)
        if stack and isinstance(stack[0], layers.SymbolicTensor):
            if input_shape is not None:
                raise TypeError("give the input shape once: kx.Input(shape=...) or input_shape=")
            input_shape = stack.pop(0).shape
        if input_shape is None:
            raise TypeError("Sequential needs its input's shape: kx.Input(shape=...) first, or input_shape=")
        strategy = strategy or Strategy.default()
        shape = (ctypes.c_int64 * len(input_shape))(*input_shape)
        out = ctypes.c_void_p()
        check(lib.kx_model_create_sequential(strategy.handle, shape, len(input_shape), ctypes.byref(out)))
        super().__init__(out.value)
        for layer in stack:
            self.add(layer)

    def add(self, layer):
        """Appends a kx.layers layer (any Keras class kx has); returns the model."""
        self._add(layer)
        return self

    def add_dense(self, units, activation=None, use_bias=True):
        """Dense, as Keras: y = activation(x W + b); use_bias=False leaves b out."""
        check(lib.kx_model_add_dense_flags(self.handle, units, _lookup(_ACTIVATIONS, activation, "activation"),
                                           _layer_flags(use_bias)))
        return self

    def add_conv2d(self, filters, kernel_size, strides=1, padding="valid", activation=None, use_bias=True):
        """Conv2D over (height, width, channels) samples, as Keras; use_bias=False leaves the bias out."""
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        pad = _lookup({"valid": 0, "same": 1}, padding, "padding")
        check(lib.kx_model_add_conv2d_flags(self.handle, filters, kh, kw, strides, pad,
                                            _lookup(_ACTIVATIONS, activation, "activation"), _layer_flags(use_bias)))
        return self

    def add_max_pool2d(self, pool_size=2):
        ph, pw = (pool_size, pool_size) if isinstance(pool_size, int) else pool_size
        check(lib.kx_model_add_max_pool2d(self.handle, ph, pw))
        return self

    def add_flatten(self):
        check(lib.kx_model_add_flatten(self.handle))
        return self

    def add_dropout(self, rate):
        check(lib.kx_model_add_dropout(self.handle, rate))
        return self

    def add_average_pool2d(self, pool_size=2, strides=None):
        ph, pw = (pool_size, pool_size) if isinstance(pool_size, int) else pool_size
        sh, sw = (0, 0) if strides is None else (strides, strides) if isinstance(strides, int) else strides
        check(lib.kx_model_add_average_pool2d(self.handle, ph, pw, sh, sw))
        return self

    def add_global_average_pool2d(self):
        check(lib.kx_model_add_global_average_pool2d(self.handle))
        return self

    def add_zero_padding2d(self, padding=1):
        """padding: an int, (rows, columns) or ((top, bottom), (left, right)), as Keras."""
        if isinstance(padding, int):
            t = b = l = r = padding
        elif isinstance(padding[0], int):
            (t, b), (l, r) = (padding[0], padding[0]), (padding[1], padding[1])
        else:
            (t, b), (l, r) = padding
        check(lib.kx_model_add_zero_padding2d(self.handle, t, b, l, r))
        return self

    def add_batch_norm(self, momentum=0.99, epsilon=1e-3):
        check(lib.kx_model_add_batch_normalization(self.handle, momentum, epsilon))
        return self

    def add_normalization(self, mean, variance):
        """keras.layers.Normalization(mean=..., variance=...) over the last axis: one value per
        channel, or one for every channel (Dataset.feature_moments finds them)."""
        mean, variance = list(mean), list(variance)
        if len(mean) != len(variance):
            raise Error(-1, f"add_normalization: {len(mean)} means and {len(variance)} variances")
        n = len(mean)
        check(lib.kx_model_add_normalization(self.handle, (ctypes.c_float * n)(*mean), (ctypes.c_float * n)(*variance), n))
        return self

    def add_activation(self, activation):
        check(lib.kx_model_add_activation(self.handle, _lookup(_ACTIVATIONS, activation, "activation")))
        return self


def load_model(strategy, path):
    """A model saved with Model.save (or a checkpoint), compiled as it was, with its weights; a Keras
    file (.keras, or a legacy .h5 model) through load_keras."""
    if str(path).endswith((".keras", ".h5")):
        return load_keras(path, strategy)
    out = ctypes.c_void_p()
    check(lib.kx_model_load(strategy.handle, str(path).encode(), ctypes.byref(out)))
    return Model(out.value)


def load_keras(path, strategy=None):
    """A Keras model file (.keras, or a legacy .h5 from model.save) as a kx model: compiled as Keras
    compiled it, optimizer state included, or uncompiled when Keras never compiled it."""
    out = ctypes.c_void_p()
    strategy = strategy or Strategy.default()
    check(lib.kx_model_load_keras(strategy.handle, str(path).encode(), ctypes.byref(out)))
    return Model(out.value)


class models:  # noqa: N801 (keras.models' spelling)
    """kx.models.load_model(path), as keras.models.load_model."""

    @staticmethod
    def load_model(path, strategy=None):
        return load_keras(path, strategy)


def _application(name, strategy, **kwargs):
    import json

    out = ctypes.c_void_p()
    strategy = strategy or Strategy.default()
    options = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
    check(lib.kx_model_create_application(strategy.handle, name.encode(), json.dumps(options).encode(),
                                          ctypes.byref(out)))
    return Model(out.value)


class applications:  # noqa: N801 (keras.applications' spelling)
    """keras.applications' architectures with Keras's layer names, uncompiled (weights=None only: load
    Keras's weight files with Model.load_weights)."""

    @staticmethod
    def MobileNetV2(input_shape=(224, 224, 3), alpha=1.0, include_top=True, weights=None, pooling=None,  # noqa: N802
                    classes=1000, classifier_activation="softmax", strategy=None):
        return _application("MobileNetV2", strategy, input_shape=input_shape, alpha=alpha, include_top=include_top,
                            weights=weights, pooling=pooling, classes=classes,
                            classifier_activation=classifier_activation)

    @staticmethod
    def MobileNetV3Small(input_shape=(224, 224, 3), alpha=1.0, minimalistic=False, include_top=True,  # noqa: N802
                         weights=None, classes=1000, pooling=None, dropout_rate=0.2,
                         classifier_activation="softmax", include_preprocessing=True, strategy=None):
        return _application("MobileNetV3Small", strategy, input_shape=input_shape, alpha=alpha,
                            minimalistic=minimalistic, include_top=include_top, weights=weights, classes=classes,
                            pooling=pooling, dropout_rate=dropout_rate, classifier_activation=classifier_activation,
                            include_preprocessing=include_preprocessing)

    @staticmethod
    def MobileNetV3Large(input_shape=(224, 224, 3), alpha=1.0, minimalistic=False, include_top=True,  # noqa: N802
                         weights=None, classes=1000, pooling=None, dropout_rate=0.2,
                         classifier_activation="softmax", include_preprocessing=True, strategy=None):
        return _application("MobileNetV3Large", strategy, input_shape=input_shape, alpha=alpha,
                            minimalistic=minimalistic, include_top=include_top, weights=weights, classes=classes,
                            pooling=pooling, dropout_rate=dropout_rate, classifier_activation=classifier_activation,
                            include_preprocessing=include_preprocessing)

    @staticmethod
    def EfficientNetB0(include_top=True, weights=None, input_shape=(224, 224, 3), pooling=None,  # noqa: N802
                       classes=1000, classifier_activation="softmax", strategy=None):
        return _application("EfficientNetB0", strategy, include_top=include_top, weights=weights,
                            input_shape=input_shape, pooling=pooling, classes=classes,
                            classifier_activation=classifier_activation)

    @staticmethod
    def ResNet50(include_top=True, weights=None, input_shape=(224, 224, 3), classes=1000, strategy=None):  # noqa: N802
        return _application("ResNet50", strategy, include_top=include_top, weights=weights, input_shape=input_shape,
                            classes=classes)
