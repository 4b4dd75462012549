"""The C ABI of libkx through ctypes: the library, every declaration of kx.h used here, and errors.

The library is found as $KX_LIBRARY (a path), else libkx.so.<MAJOR> on the loader's search path
(installed packages, LD_LIBRARY_PATH).
"""
import ctypes
import os

MAJOR = 0


def _load():
    path = os.environ.get("KX_LIBRARY") or f"libkx.so.{MAJOR}"
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"kx: cannot load the kx library ({path}): {e}. Install the libkx{MAJOR} package "
                          f"or set KX_LIBRARY to the path of libkx.so.{MAJOR}") from e


lib = _load()

c_int32, c_int64, c_uint32, c_uint64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32, ctypes.c_uint64
c_double, c_float, c_size_t, c_char_p, c_void_p = (ctypes.c_double, ctypes.c_float, ctypes.c_size_t,
                                                   ctypes.c_char_p, ctypes.c_void_p)
P = ctypes.POINTER

# Status codes of kx.h.
OK, STOPPED = 0, 1


class CompileOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("optimizer", c_int32), ("learning_rate", c_double),
                ("beta1", c_double), ("beta2", c_double), ("epsilon", c_double), ("momentum", c_double),
                ("loss", c_int32), ("from_logits", c_int32), ("metrics", c_uint32), ("seed", c_uint64),
                ("use_ema", c_int32), ("ema_momentum", c_double), ("zero_is_value", c_uint32),
                ("precision", c_int32), ("weight_decay", c_double), ("rho", c_double), ("centered", c_int32)]


class FitOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("epochs", c_int32), ("initial_epoch", c_int32),
                ("steps_per_epoch", c_int64), ("validation", c_void_p), ("validation_steps", c_int64),
                ("verbose", c_int32), ("resume_from", c_char_p), ("validation_split", c_double),
                ("class_weight", P(c_float)), ("n_class_weight", c_size_t)]


class Event(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("kind", c_int32), ("epoch", c_int32), ("step", c_int64),
                ("loss", c_double), ("accuracy", c_double), ("val_loss", c_double), ("val_accuracy", c_double),
                ("path", c_char_p), ("steps_per_epoch", c_int64), ("global_step", c_int64),
                ("batch_loss", c_double), ("batch_accuracy", c_double), ("learning_rate", c_double)]


class ReduceLrOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("monitor", c_char_p), ("factor", c_double), ("patience", c_int32),
                ("mode", c_int32), ("min_delta", c_double), ("cooldown", c_int32), ("min_lr", c_double),
                ("zero_is_value", c_uint32)]


class TrainingMemory(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32)] + [(name, c_int64) for name in (
        "batch", "rows", "weights", "weight_gradients", "optimizer_slots", "step_arena", "step_arena_without_reuse",
        "activations", "layer_gradients", "workspace", "scratch", "batch_buffers", "total")]


REDUCE_LR_ZERO_PATIENCE, REDUCE_LR_ZERO_MIN_DELTA = 1, 2
LR_SCHEDULE = ctypes.CFUNCTYPE(c_double, c_int32, c_double, c_void_p)


CALLBACK = ctypes.CFUNCTYPE(c_int32, P(Event), c_void_p)
CALLBACK_NO_BATCH_METRICS = 1  # KX_CALLBACK_NO_BATCH_METRICS
CALLBACK_MAY_FAIL = 2  # KX_CALLBACK_MAY_FAIL
LAYER_NO_BIAS = 1  # KX_LAYER_NO_BIAS

_SIGNATURES = {
    "kx_last_error_message": (c_char_p, []),
    "kx_status_name": (c_char_p, [c_int32]),
    "kx_version_number": (c_uint32, []),
    "kx_version_string": (c_char_p, []),
    "kx_free": (None, [c_void_p]),
    "kx_device_count": (c_int32, [c_int32]),
    "kx_device_name": (c_int32, [c_int32, c_int32, c_char_p, c_size_t]),
    "kx_device_status": (c_int32, [c_int32, P(c_void_p)]),
    "kx_strategy_create_default": (c_int32, [P(c_void_p)]),
    "kx_strategy_create_mirrored": (c_int32, [P(c_char_p), c_size_t, P(c_void_p)]),
    "kx_strategy_create_multi_worker": (c_int32, [P(c_char_p), c_size_t, P(c_void_p)]),
    "kx_strategy_num_workers": (c_int32, [c_void_p]),
    "kx_strategy_worker_index": (c_int32, [c_void_p]),
    "kx_strategy_set_timeout": (c_int32, [c_void_p, c_int32]),
    "kx_strategy_create_parameter_server": (c_int32, [P(c_char_p), c_size_t, P(c_void_p)]),
    "kx_strategy_serve": (c_int32, [c_void_p]),
    "kx_strategy_set_staleness": (c_int32, [c_void_p, c_int32]),
    "kx_strategy_num_replicas": (c_int32, [c_void_p]),
    "kx_strategy_set_num_threads": (c_int32, [c_void_p, c_int32]),
    "kx_strategy_set_tf32": (c_int32, [c_void_p, c_int32]),
    "kx_strategy_set_step_graphs": (c_int32, [c_void_p, c_int32]),
    "kx_strategy_set_data_streaming": (c_int32, [c_void_p, c_int32]),
    "kx_strategy_set_cudnn": (c_int32, [c_void_p, c_int32]),
    "kx_strategy_destroy": (None, [c_void_p]),
    "kx_model_create_sequential": (c_int32, [c_void_p, P(c_int64), c_size_t, P(c_void_p)]),
    "kx_model_add_dense": (c_int32, [c_void_p, c_int64, c_int32]),
    "kx_model_add_conv2d": (c_int32, [c_void_p, c_int64, c_int32, c_int32, c_int32, c_int32, c_int32]),
    "kx_model_add_dense_flags": (c_int32, [c_void_p, c_int64, c_int32, c_uint32]),
    "kx_model_add_conv2d_flags": (c_int32, [c_void_p, c_int64, c_int32, c_int32, c_int32, c_int32, c_int32,
                                            c_uint32]),
    "kx_model_add_max_pool2d": (c_int32, [c_void_p, c_int32, c_int32]),
    "kx_model_add_flatten": (c_int32, [c_void_p]),
    "kx_model_add_dropout": (c_int32, [c_void_p, c_float]),
    "kx_model_from_json": (c_int32, [c_void_p, c_char_p, P(c_void_p)]),
    "kx_model_create_functional": (c_int32, [c_void_p, P(c_int64), c_size_t, c_char_p, P(c_void_p)]),
    "kx_model_add_layer": (c_int32, [c_void_p, c_char_p, P(c_char_p), c_size_t, P(c_void_p)]),
    "kx_layer_class_name": (c_char_p, [c_size_t]),
    "kx_model_to_json": (c_int32, [c_void_p, P(c_void_p)]),
    "kx_compile_options_init": (None, [P(CompileOptions), c_size_t]),
    "kx_model_compile": (c_int32, [c_void_p, P(CompileOptions)]),
    "kx_model_num_params": (c_int64, [c_void_p]),
    "kx_model_loss_scale": (c_int32, [c_void_p, P(c_double)]),
    "kx_model_training_memory": (c_int32, [c_void_p, c_int64, P(TrainingMemory)]),
    "kx_model_output_size": (c_int64, [c_void_p]),
    "kx_model_input_size": (c_int64, [c_void_p]),
    "kx_model_get_weights": (c_int32, [c_void_p, P(c_float), c_size_t]),
    "kx_model_set_weights": (c_int32, [c_void_p, P(c_float), c_size_t]),
    "kx_model_num_weights": (c_int64, [c_void_p]),
    "kx_model_train_on_batch": (c_int32, [c_void_p, P(c_float), P(c_float), c_int64, P(c_double), P(c_double)]),
    "kx_model_test_on_batch": (c_int32, [c_void_p, P(c_float), P(c_float), c_int64, P(c_double), P(c_double)]),
    "kx_model_weight_info": (c_int32, [c_void_p, c_int64, P(c_void_p), P(c_int64), P(c_size_t)]),
    "kx_model_weight_offset": (c_int32, [c_void_p, c_int64, P(c_int64)]),
    "kx_model_get_weight": (c_int32, [c_void_p, c_char_p, P(c_float), c_size_t]),
    "kx_model_set_weight": (c_int32, [c_void_p, c_char_p, P(c_float), c_size_t]),
    "kx_model_save": (c_int32, [c_void_p, c_char_p]),
    "kx_model_export_onnx": (c_int32, [c_void_p, c_char_p]),
    "kx_model_load": (c_int32, [c_void_p, c_char_p, P(c_void_p)]),
    "kx_model_load_keras": (c_int32, [c_void_p, c_char_p, P(c_void_p)]),
    "kx_model_save_keras": (c_int32, [c_void_p, c_char_p]),
    "kx_model_destroy": (None, [c_void_p]),
    "kx_dataset_from_arrays": (c_int32, [c_void_p, c_int32, P(c_int64), c_size_t, c_void_p, c_int32, P(c_int64),
                                         c_size_t, P(c_void_p)]),
    "kx_dataset_from_arrays_weighted": (c_int32, [c_void_p, c_int32, P(c_int64), c_size_t, c_void_p, c_int32,
                                                  P(c_int64), c_size_t, P(c_float), P(c_void_p)]),
    "kx_dataset_from_idx": (c_int32, [c_char_p, c_char_p, P(c_void_p)]),
    "kx_dataset_take": (c_int32, [c_void_p, c_int64, P(c_void_p)]),
    "kx_dataset_skip": (c_int32, [c_void_p, c_int64, P(c_void_p)]),
    "kx_dataset_shuffle": (c_int32, [c_void_p, c_int64, c_uint64]),
    "kx_dataset_batch": (c_int32, [c_void_p, c_int64, c_int32]),
    "kx_dataset_feature_moments": (c_int32, [c_void_p, P(c_float), P(c_float), c_size_t]),
    "kx_dataset_num_samples": (c_int64, [c_void_p]),
    "kx_dataset_destroy": (None, [c_void_p]),
    "kx_dataset_cache": (c_int32, [c_void_p, c_char_p]),
    "kx_dataset_prefetch": (c_int32, [c_void_p, c_int32]),
    "kx_dataset_from_npy": (c_int32, [c_char_p, c_char_p, P(c_void_p)]),
    "kx_dataset_from_csv": (c_int32, [c_char_p, c_char_p, P(c_void_p)]),
    "kx_dataset_from_image_directory": (c_int32, [c_char_p, c_int64, c_int64, c_int64, P(c_void_p)]),
    "kx_dataset_num_classes": (c_int64, [c_void_p]),
    "kx_dataset_class_name": (c_int32, [c_void_p, c_int64, P(c_char_p)]),
    "kx_dataset_num_skipped": (c_int64, [c_void_p]),
    "kx_dataset_random_flip": (c_int32, [c_void_p, c_uint64]),
    "kx_dataset_random_crop": (c_int32, [c_void_p, c_int64, c_int64, c_uint64]),
    "kx_callbacks_create": (c_int32, [P(c_void_p)]),
    "kx_callbacks_add_model_checkpoint": (c_int32, [c_void_p, c_char_p, c_int64, c_int32]),
    "kx_callbacks_add_early_stopping": (c_int32, [c_void_p, c_char_p, c_int32, c_double, c_int32]),
    "kx_callbacks_add_csv_logger": (c_int32, [c_void_p, c_char_p, c_int32]),
    "kx_callbacks_add_tensorboard": (c_int32, [c_void_p, c_char_p, c_int64, c_int32]),
    "kx_callbacks_add_terminate_on_nan": (c_int32, [c_void_p]),
    "kx_callbacks_add_function": (c_int32, [c_void_p, CALLBACK, c_void_p]),
    "kx_callbacks_add_function_flags": (c_int32, [c_void_p, CALLBACK, c_void_p, c_uint32]),
    "kx_callbacks_destroy": (None, [c_void_p]),
    "kx_fit_options_init": (None, [P(FitOptions), c_size_t]),
    "kx_fit": (c_int32, [c_void_p, c_void_p, P(FitOptions), c_void_p, P(c_void_p)]),
    "kx_history_epochs": (c_int32, [c_void_p]),
    "kx_history_get": (c_int32, [c_void_p, c_char_p, c_int32, P(c_double)]),
    "kx_history_destroy": (None, [c_void_p]),
    "kx_evaluate": (c_int32, [c_void_p, c_void_p, P(c_double), P(c_double)]),
    "kx_predict": (c_int32, [c_void_p, P(c_float), c_int64, P(c_float), c_size_t]),
    "kx_model_add_average_pool2d": (c_int32, [c_void_p, c_int32, c_int32, c_int32, c_int32]),
    "kx_model_add_global_average_pool2d": (c_int32, [c_void_p]),
    "kx_model_add_zero_padding2d": (c_int32, [c_void_p, c_int32, c_int32, c_int32, c_int32]),
    "kx_model_add_batch_norm": (c_int32, [c_void_p, c_float, c_float]),
    "kx_model_add_batch_normalization": (c_int32, [c_void_p, c_double, c_double]),
    "kx_model_add_normalization": (c_int32, [c_void_p, P(c_float), P(c_float), c_size_t]),
    "kx_model_add_activation": (c_int32, [c_void_p, c_int32]),
    "kx_model_create_resnet50": (c_int32, [c_void_p, P(c_int64), c_int32, c_int64, P(c_void_p)]),
    "kx_model_create_application": (c_int32, [c_void_p, c_char_p, c_char_p, P(c_void_p)]),
    "kx_model_num_layers": (c_int64, [c_void_p]),
    "kx_model_layer_name": (c_int32, [c_void_p, c_int64, P(c_void_p)]),
    "kx_model_set_trainable": (c_int32, [c_void_p, c_char_p, c_int32]),
    "kx_model_get_trainable": (c_int32, [c_void_p, c_char_p, P(c_int32)]),
    "kx_model_num_trainable_params": (c_int64, [c_void_p]),
    "kx_model_load_weights": (c_int32, [c_void_p, c_char_p, c_uint32, P(c_int64), P(c_int64)]),
    "kx_model_summary": (c_int32, [c_void_p, P(c_void_p)]),
    "kx_model_summary_width": (c_int32, [c_void_p, c_int32, P(c_void_p)]),
    "kx_reduce_lr_options_init": (None, [P(ReduceLrOptions), c_size_t]),
    "kx_callbacks_add_reduce_lr_on_plateau_options": (c_int32, [c_void_p, P(ReduceLrOptions)]),
    "kx_callbacks_add_learning_rate_scheduler": (c_int32, [c_void_p, LR_SCHEDULE, c_void_p]),
    "kx_callbacks_add_backup_and_restore": (c_int32, [c_void_p, c_char_p]),
    "kx_callbacks_add_backup_and_restore_every": (c_int32, [c_void_p, c_char_p, c_int64]),
    "kx_callbacks_add_reduce_lr_on_plateau": (c_int32, [c_void_p, c_char_p, c_double, c_int32, c_double]),
    "kx_callbacks_add_step_decay": (c_int32, [c_void_p, c_double, c_int32]),
    "kx_callbacks_add_cosine_decay": (c_int32, [c_void_p, c_int64, c_double]),
    "kx_evaluate_verbose": (c_int32, [c_void_p, c_void_p, c_int32, P(c_double), P(c_double)]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


def status_name(code):
    """The KX_* name of a status code, from the library ("KX_UNKNOWN_STATUS" for one it does not define)."""
    return lib.kx_status_name(code).decode("ascii")


class Error(Exception):
    """A failed kx call: .code is the kx_status (negative), .name its KX_E_* name, .message kx's text."""

    def __init__(self, code, message):
        self.code = code
        self.name = status_name(code)
        self.message = message
        super().__init__(f"{self.name}: {message}")


def check(status):
    """Raises Error for a negative status; returns the status otherwise (OK or STOPPED)."""
    if status < 0:
        msg = lib.kx_last_error_message()
        raise Error(status, msg.decode("utf-8", "replace") if msg else "")
    return status


def take_string(ptr):
    """A library-allocated string as str, freed with kx_free."""
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        lib.kx_free(ptr)
