//! Raw declarations of kx's C ABI, one for one with `capi/include/kx/kx.h` (checked by
//! `tests/header_matches.rs`). Every function is `unsafe`; the `kx` crate is the safe API.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

pub type kx_status = i32;
pub const KX_CALLBACK_NO_BATCH_METRICS: u32 = 1;
pub const KX_CALLBACK_MAY_FAIL: u32 = 2;
pub const KX_LAYER_NO_BIAS: u32 = 1;
pub const KX_OK: kx_status = 0;
pub const KX_STOPPED: kx_status = 1;
pub const KX_E_INVALID_ARGUMENT: kx_status = -1;
pub const KX_E_MISUSE: kx_status = -2;
pub const KX_E_OUT_OF_MEMORY: kx_status = -3;
pub const KX_E_DEVICE: kx_status = -4;
pub const KX_E_IO: kx_status = -5;
pub const KX_E_CORRUPT: kx_status = -6;
pub const KX_E_UNSUPPORTED: kx_status = -7;
pub const KX_E_DIVERGED: kx_status = -8;
pub const KX_E_COMM: kx_status = -9;
pub const KX_E_INTERNAL: kx_status = -100;

// C enums are int-sized on every platform kx supports.
pub type kx_step_graphs = i32;
pub const KX_STEP_GRAPHS_AUTO: kx_step_graphs = 0;
pub const KX_STEP_GRAPHS_OFF: kx_step_graphs = 1;
pub const KX_STEP_GRAPHS_EMULATE: kx_step_graphs = 2;
pub type kx_data_streaming = i32;
pub const KX_DATA_STREAMING_AUTO: kx_data_streaming = 0;
pub const KX_DATA_STREAMING_ALWAYS: kx_data_streaming = 1;
/// The most dimensions a weight tensor has (kx_model_weight_info's shape buffer).
pub const KX_MAX_RANK: usize = 8;
pub type kx_device_kind = i32;
pub const KX_DEVICE_CPU: kx_device_kind = 0;
pub const KX_DEVICE_CUDA: kx_device_kind = 1;

pub type kx_activation = i32;
pub const KX_ACT_NONE: kx_activation = 0;
pub const KX_ACT_RELU: kx_activation = 1;
pub const KX_ACT_SIGMOID: kx_activation = 2;
pub const KX_ACT_TANH: kx_activation = 3;
pub const KX_ACT_SOFTMAX: kx_activation = 4;

pub type kx_padding = i32;
pub const KX_PADDING_VALID: kx_padding = 0;
pub const KX_PADDING_SAME: kx_padding = 1;

pub type kx_optimizer = i32;
pub const KX_OPTIMIZER_ADAM: kx_optimizer = 0;
pub const KX_OPTIMIZER_SGD: kx_optimizer = 1;
pub const KX_OPTIMIZER_ADAMW: kx_optimizer = 2;
pub const KX_OPTIMIZER_RMSPROP: kx_optimizer = 3;

pub type kx_loss = i32;
pub const KX_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY: kx_loss = 0;
pub const KX_LOSS_CATEGORICAL_CROSSENTROPY: kx_loss = 1;
pub const KX_LOSS_BINARY_CROSSENTROPY: kx_loss = 2;
pub const KX_LOSS_MEAN_SQUARED_ERROR: kx_loss = 3;
pub const KX_LOSS_MEAN_ABSOLUTE_ERROR: kx_loss = 4;
pub const KX_LOSS_HUBER: kx_loss = 5;

pub const KX_METRIC_ACCURACY: u32 = 1;

pub type kx_dtype = i32;
pub const KX_DTYPE_F32: kx_dtype = 0;
pub const KX_DTYPE_I32: kx_dtype = 1;
pub const KX_DTYPE_I64: kx_dtype = 2;
pub const KX_DTYPE_U8: kx_dtype = 3;
pub const KX_DTYPE_F64: kx_dtype = 4;

pub type kx_event_kind = i32;
pub const KX_EVENT_TRAIN_BEGIN: kx_event_kind = 0;
pub const KX_EVENT_EPOCH_BEGIN: kx_event_kind = 1;
pub const KX_EVENT_BATCH_END: kx_event_kind = 2;
pub const KX_EVENT_EPOCH_END: kx_event_kind = 3;
pub const KX_EVENT_TRAIN_END: kx_event_kind = 4;
pub const KX_EVENT_CHECKPOINT_SAVED: kx_event_kind = 5;

/// Opaque handles.
#[repr(C)]
pub struct kx_strategy {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kx_model {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kx_dataset {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kx_callbacks {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kx_history {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kx_compile_options {
    pub struct_size: u32,
    pub optimizer: kx_optimizer,
    pub learning_rate: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    pub momentum: f64,
    pub loss: kx_loss,
    pub from_logits: i32,
    pub metrics: u32,
    pub seed: u64,
    pub use_ema: i32,
    pub ema_momentum: f64,
    pub zero_is_value: u32,
    pub precision: i32,
    pub weight_decay: f64,
    pub rho: f64,
    pub centered: i32,
}
pub const KX_PRECISION_FLOAT32: i32 = 0;
pub const KX_PRECISION_MIXED_BFLOAT16: i32 = 1;
pub const KX_PRECISION_MIXED_FLOAT16: i32 = 2;
pub const KX_COMPILE_ZERO_LEARNING_RATE: u32 = 1;
pub const KX_COMPILE_ZERO_BETA1: u32 = 2;
pub const KX_COMPILE_ZERO_BETA2: u32 = 4;
pub const KX_COMPILE_ZERO_EPSILON: u32 = 8;
pub const KX_COMPILE_ZERO_EMA_MOMENTUM: u32 = 16;
pub const KX_COMPILE_ZERO_WEIGHT_DECAY: u32 = 32;
pub const KX_COMPILE_ZERO_RHO: u32 = 64;

/// What one replica's training holds in its device's memory, in bytes (kx_model_training_memory).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kx_training_memory {
    pub struct_size: u32,
    pub batch: i64,
    pub rows: i64,
    pub weights: i64,
    pub weight_gradients: i64,
    pub optimizer_slots: i64,
    pub step_arena: i64,
    pub step_arena_without_reuse: i64,
    pub activations: i64,
    pub layer_gradients: i64,
    pub workspace: i64,
    pub scratch: i64,
    pub batch_buffers: i64,
    pub total: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kx_fit_options {
    pub struct_size: u32,
    pub epochs: i32,
    pub initial_epoch: i32,
    pub steps_per_epoch: i64,
    pub validation: *mut kx_dataset,
    pub validation_steps: i64,
    pub verbose: i32,
    pub resume_from: *const c_char,
    pub validation_split: f64,
    pub class_weight: *const f32,
    pub n_class_weight: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kx_event {
    pub struct_size: u32,
    pub kind: kx_event_kind,
    pub epoch: i32,
    pub step: i64,
    pub loss: f64,
    pub accuracy: f64,
    pub val_loss: f64,
    pub val_accuracy: f64,
    pub path: *const c_char,
    pub steps_per_epoch: i64,
    pub global_step: i64,
    pub batch_loss: f64,
    pub batch_accuracy: f64,
    pub learning_rate: f64,
}

pub type kx_callback_fn = Option<unsafe extern "C" fn(ev: *const kx_event, user_data: *mut c_void) -> i32>;

extern "C" {
    pub fn kx_last_error_message() -> *const c_char;
    pub fn kx_status_name(st: kx_status) -> *const c_char;
    pub fn kx_version_number() -> u32;
    pub fn kx_version_string() -> *const c_char;
    pub fn kx_free(p: *mut c_void);

    pub fn kx_device_count(kind: kx_device_kind) -> i32;
    pub fn kx_device_name(kind: kx_device_kind, index: i32, buf: *mut c_char, buf_len: usize) -> kx_status;
    pub fn kx_device_status(kind: kx_device_kind, out_text: *mut *mut c_char) -> kx_status;

    pub fn kx_strategy_create_default(out: *mut *mut kx_strategy) -> kx_status;
    pub fn kx_strategy_create_mirrored(devices: *const *const c_char, n_devices: usize, out: *mut *mut kx_strategy) -> kx_status;
    pub fn kx_strategy_num_replicas(s: *const kx_strategy) -> i32;
    pub fn kx_strategy_set_num_threads(s: *mut kx_strategy, n: i32) -> kx_status;
    pub fn kx_strategy_set_tf32(s: *mut kx_strategy, enabled: i32) -> kx_status;
    pub fn kx_strategy_set_step_graphs(s: *mut kx_strategy, mode: kx_step_graphs) -> kx_status;
    pub fn kx_strategy_set_data_streaming(s: *mut kx_strategy, mode: kx_data_streaming) -> kx_status;
    pub fn kx_strategy_set_cudnn(s: *mut kx_strategy, enabled: i32) -> kx_status;
    pub fn kx_strategy_create_multi_worker(local_devices: *const *const c_char, n_local: usize, out: *mut *mut kx_strategy) -> kx_status;
    pub fn kx_strategy_num_workers(s: *const kx_strategy) -> i32;
    pub fn kx_strategy_worker_index(s: *const kx_strategy) -> i32;
    pub fn kx_strategy_set_timeout(s: *mut kx_strategy, milliseconds: i32) -> kx_status;
    pub fn kx_strategy_create_parameter_server(local_devices: *const *const c_char, n_local: usize, out: *mut *mut kx_strategy) -> kx_status;
    pub fn kx_strategy_serve(s: *mut kx_strategy) -> kx_status;
    pub fn kx_strategy_set_staleness(s: *mut kx_strategy, max_steps_ahead: i32) -> kx_status;
    pub fn kx_strategy_destroy(s: *mut kx_strategy);

    pub fn kx_model_create_sequential(s: *mut kx_strategy, input_shape: *const i64, rank: usize, out: *mut *mut kx_model) -> kx_status;
    pub fn kx_model_add_dense(m: *mut kx_model, units: i64, act: kx_activation) -> kx_status;
    pub fn kx_model_add_conv2d(m: *mut kx_model, filters: i64, kernel_h: i32, kernel_w: i32, stride: i32, padding: kx_padding, act: kx_activation) -> kx_status;
    pub fn kx_model_add_max_pool2d(m: *mut kx_model, pool_h: i32, pool_w: i32) -> kx_status;
    pub fn kx_model_add_flatten(m: *mut kx_model) -> kx_status;
    pub fn kx_model_add_dropout(m: *mut kx_model, rate: f32) -> kx_status;
    pub fn kx_model_add_dense_flags(m: *mut kx_model, units: i64, act: kx_activation, flags: u32) -> kx_status;
    pub fn kx_model_add_conv2d_flags(m: *mut kx_model, filters: i64, kernel_h: i32, kernel_w: i32, stride: i32, padding: kx_padding, act: kx_activation, flags: u32) -> kx_status;
    pub fn kx_model_from_json(s: *mut kx_strategy, json: *const c_char, out: *mut *mut kx_model) -> kx_status;
    pub fn kx_model_create_functional(s: *mut kx_strategy, input_shape: *const i64, rank: usize, input_name: *const c_char, out: *mut *mut kx_model) -> kx_status;
    pub fn kx_model_add_layer(m: *mut kx_model, layer_json: *const c_char, inputs: *const *const c_char, num_inputs: usize, name: *mut *mut c_char) -> kx_status;
    pub fn kx_layer_class_name(index: usize) -> *const c_char;
    pub fn kx_model_to_json(m: *const kx_model, out_json: *mut *mut c_char) -> kx_status;
    pub fn kx_compile_options_init(o: *mut kx_compile_options, struct_size: usize);
    pub fn kx_model_compile(m: *mut kx_model, o: *const kx_compile_options) -> kx_status;
    pub fn kx_model_num_params(m: *const kx_model) -> i64;
    pub fn kx_model_loss_scale(m: *const kx_model, out_scale: *mut f64) -> kx_status;
    pub fn kx_model_training_memory(m: *const kx_model, batch: i64, out: *mut kx_training_memory) -> kx_status;
    pub fn kx_model_input_size(m: *const kx_model) -> i64;
    pub fn kx_model_output_size(m: *const kx_model) -> i64;
    pub fn kx_model_get_weights(m: *const kx_model, out: *mut f32, out_len: usize) -> kx_status;
    pub fn kx_model_set_weights(m: *mut kx_model, w: *const f32, w_len: usize) -> kx_status;
    pub fn kx_model_save(m: *mut kx_model, path: *const c_char) -> kx_status;
    pub fn kx_model_load(s: *mut kx_strategy, path: *const c_char, out: *mut *mut kx_model) -> kx_status;
    pub fn kx_model_load_keras(s: *mut kx_strategy, path: *const c_char, out: *mut *mut kx_model) -> kx_status;
    pub fn kx_model_save_keras(m: *mut kx_model, path: *const c_char) -> kx_status;
    pub fn kx_model_destroy(m: *mut kx_model);

    pub fn kx_dataset_from_arrays(x: *const c_void, x_dtype: kx_dtype, x_shape: *const i64, x_rank: usize, y: *const c_void, y_dtype: kx_dtype, y_shape: *const i64, y_rank: usize, out: *mut *mut kx_dataset) -> kx_status;
    pub fn kx_dataset_from_arrays_weighted(x: *const c_void, x_dtype: kx_dtype, x_shape: *const i64, x_rank: usize, y: *const c_void, y_dtype: kx_dtype, y_shape: *const i64, y_rank: usize, sample_weight: *const f32, out: *mut *mut kx_dataset) -> kx_status;
    pub fn kx_dataset_from_idx(images_path: *const c_char, labels_path: *const c_char, out: *mut *mut kx_dataset) -> kx_status;
    pub fn kx_dataset_take(d: *const kx_dataset, n: i64, out: *mut *mut kx_dataset) -> kx_status;
    pub fn kx_dataset_skip(d: *const kx_dataset, n: i64, out: *mut *mut kx_dataset) -> kx_status;
    pub fn kx_dataset_shuffle(d: *mut kx_dataset, buffer_size: i64, seed: u64) -> kx_status;
    pub fn kx_dataset_batch(d: *mut kx_dataset, global_batch_size: i64, drop_remainder: i32) -> kx_status;
    pub fn kx_dataset_cache(d: *mut kx_dataset, path_or_null: *const c_char) -> kx_status;
    pub fn kx_dataset_prefetch(d: *mut kx_dataset, batches: i32) -> kx_status;
    pub fn kx_dataset_feature_moments(d: *const kx_dataset, mean: *mut f32, variance: *mut f32, n: usize) -> kx_status;
    pub fn kx_dataset_num_samples(d: *const kx_dataset) -> i64;
    pub fn kx_dataset_destroy(d: *mut kx_dataset);
    pub fn kx_dataset_from_npy(x_path: *const c_char, y_path: *const c_char, out: *mut *mut kx_dataset) -> kx_status;
    pub fn kx_dataset_from_csv(path: *const c_char, label_column: *const c_char, out: *mut *mut kx_dataset) -> kx_status;
    pub fn kx_dataset_from_image_directory(dir: *const c_char, height: i64, width: i64, channels: i64, out: *mut *mut kx_dataset) -> kx_status;
    pub fn kx_dataset_num_classes(d: *const kx_dataset) -> i64;
    pub fn kx_dataset_class_name(d: *const kx_dataset, i: i64, name: *mut *const c_char) -> kx_status;
    pub fn kx_dataset_num_skipped(d: *const kx_dataset) -> i64;
    pub fn kx_dataset_random_flip(d: *mut kx_dataset, seed: u64) -> kx_status;
    pub fn kx_dataset_random_crop(d: *mut kx_dataset, height: i64, width: i64, seed: u64) -> kx_status;

    pub fn kx_callbacks_create(out: *mut *mut kx_callbacks) -> kx_status;
    pub fn kx_callbacks_add_model_checkpoint(c: *mut kx_callbacks, path_template: *const c_char, every_n_batches: i64, keep_last: i32) -> kx_status;
    pub fn kx_callbacks_add_early_stopping(c: *mut kx_callbacks, monitor: *const c_char, patience: i32, min_delta: f64, restore_best_weights: i32) -> kx_status;
    pub fn kx_callbacks_add_csv_logger(c: *mut kx_callbacks, path: *const c_char, append: i32) -> kx_status;
    pub fn kx_callbacks_add_terminate_on_nan(c: *mut kx_callbacks) -> kx_status;
    pub fn kx_callbacks_add_step_decay(c: *mut kx_callbacks, factor: f64, every_epochs: i32) -> kx_status;
    pub fn kx_callbacks_add_cosine_decay(c: *mut kx_callbacks, decay_steps: i64, alpha: f64) -> kx_status;
    pub fn kx_callbacks_add_function(c: *mut kx_callbacks, fn_: kx_callback_fn, user_data: *mut c_void) -> kx_status;
    pub fn kx_callbacks_add_function_flags(
        c: *mut kx_callbacks,
        fn_: kx_callback_fn,
        user_data: *mut c_void,
        flags: u32,
    ) -> kx_status;
    pub fn kx_callbacks_destroy(c: *mut kx_callbacks);

    pub fn kx_fit_options_init(o: *mut kx_fit_options, struct_size: usize);
    pub fn kx_fit(m: *mut kx_model, train: *mut kx_dataset, o: *const kx_fit_options, cb: *mut kx_callbacks, out: *mut *mut kx_history) -> kx_status;
    pub fn kx_history_epochs(h: *const kx_history) -> i32;
    pub fn kx_history_get(h: *const kx_history, name: *const c_char, epoch: i32, out: *mut f64) -> kx_status;
    pub fn kx_history_destroy(h: *mut kx_history);
    pub fn kx_evaluate(m: *mut kx_model, d: *mut kx_dataset, loss: *mut f64, accuracy: *mut f64) -> kx_status;
    pub fn kx_predict(m: *mut kx_model, x: *const f32, n_samples: i64, out: *mut f32, out_len: usize) -> kx_status;

    pub fn kx_model_add_average_pool2d(m: *mut kx_model, pool_h: i32, pool_w: i32, stride_h: i32, stride_w: i32) -> kx_status;
    pub fn kx_model_add_global_average_pool2d(m: *mut kx_model) -> kx_status;
    pub fn kx_model_add_zero_padding2d(m: *mut kx_model, top: i32, bottom: i32, left: i32, right: i32) -> kx_status;
    pub fn kx_model_add_batch_norm(m: *mut kx_model, momentum: f32, epsilon: f32) -> kx_status;
    pub fn kx_model_add_normalization(m: *mut kx_model, mean: *const f32, variance: *const f32, n: usize) -> kx_status;
    pub fn kx_model_add_activation(m: *mut kx_model, act: kx_activation) -> kx_status;
    pub fn kx_model_create_resnet50(s: *mut kx_strategy, input_shape: *const i64, include_top: i32, classes: i64, out: *mut *mut kx_model) -> kx_status;
    pub fn kx_model_create_application(s: *mut kx_strategy, name: *const c_char, options_json: *const c_char, out: *mut *mut kx_model) -> kx_status;
    pub fn kx_model_num_layers(m: *const kx_model) -> i64;
    pub fn kx_model_layer_name(m: *const kx_model, index: i64, out_name: *mut *mut c_char) -> kx_status;
    pub fn kx_model_set_trainable(m: *mut kx_model, layer: *const c_char, trainable: i32) -> kx_status;
    pub fn kx_model_get_trainable(m: *const kx_model, layer: *const c_char, out_trainable: *mut i32) -> kx_status;
    pub fn kx_model_num_trainable_params(m: *const kx_model) -> i64;
    pub fn kx_model_load_weights(m: *mut kx_model, path: *const c_char, flags: u32, loaded: *mut i64, skipped: *mut i64) -> kx_status;
    pub fn kx_model_train_on_batch(m: *mut kx_model, x: *const f32, y: *const f32, n_samples: i64, loss: *mut f64, accuracy: *mut f64) -> kx_status;
    pub fn kx_model_test_on_batch(m: *mut kx_model, x: *const f32, y: *const f32, n_samples: i64, loss: *mut f64, accuracy: *mut f64) -> kx_status;
    pub fn kx_model_add_batch_normalization(m: *mut kx_model, momentum: f64, epsilon: f64) -> kx_status;
    pub fn kx_model_num_weights(m: *const kx_model) -> i64;
    pub fn kx_model_weight_info(m: *const kx_model, index: i64, out_name: *mut *mut c_char, shape: *mut i64, rank: *mut usize) -> kx_status;
    pub fn kx_model_weight_offset(m: *const kx_model, index: i64, out_offset: *mut i64) -> kx_status;
    pub fn kx_model_get_weight(m: *const kx_model, name: *const c_char, out: *mut f32, out_len: usize) -> kx_status;
    pub fn kx_model_set_weight(m: *mut kx_model, name: *const c_char, values: *const f32, n: usize) -> kx_status;

    pub fn kx_callbacks_add_tensorboard(c: *mut kx_callbacks, log_dir: *const c_char, update_freq: i64, histogram_freq: i32) -> kx_status;
    pub fn kx_model_export_onnx(m: *const kx_model, path: *const c_char) -> kx_status;
    pub fn kx_model_summary(m: *const kx_model, out_text: *mut *mut c_char) -> kx_status;
    pub fn kx_model_summary_width(m: *const kx_model, line_length: i32, out_text: *mut *mut c_char) -> kx_status;
    pub fn kx_callbacks_add_reduce_lr_on_plateau(c: *mut kx_callbacks, monitor: *const c_char, factor: f64, patience: i32, min_lr: f64) -> kx_status;
    pub fn kx_reduce_lr_options_init(o: *mut kx_reduce_lr_options, struct_size: usize);
    pub fn kx_callbacks_add_reduce_lr_on_plateau_options(c: *mut kx_callbacks, o: *const kx_reduce_lr_options) -> kx_status;
    pub fn kx_callbacks_add_learning_rate_scheduler(c: *mut kx_callbacks, fn_: kx_lr_schedule_fn, user_data: *mut c_void) -> kx_status;
    pub fn kx_callbacks_add_backup_and_restore(c: *mut kx_callbacks, backup_dir: *const c_char) -> kx_status;
    pub fn kx_callbacks_add_backup_and_restore_every(c: *mut kx_callbacks, backup_dir: *const c_char, every_n_batches: i64) -> kx_status;
    pub fn kx_evaluate_verbose(m: *mut kx_model, d: *mut kx_dataset, verbose: i32, loss: *mut f64, accuracy: *mut f64) -> kx_status;
}

pub type kx_monitor_mode = i32;
pub const KX_MODE_AUTO: kx_monitor_mode = 0;
pub const KX_MODE_MIN: kx_monitor_mode = 1;
pub const KX_MODE_MAX: kx_monitor_mode = 2;
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kx_reduce_lr_options {
    pub struct_size: u32,
    pub monitor: *const c_char,
    pub factor: f64,
    pub patience: i32,
    pub mode: kx_monitor_mode,
    pub min_delta: f64,
    pub cooldown: i32,
    pub min_lr: f64,
    pub zero_is_value: u32,
}
pub const KX_REDUCE_LR_ZERO_PATIENCE: u32 = 1;
pub const KX_REDUCE_LR_ZERO_MIN_DELTA: u32 = 2;
pub type kx_lr_schedule_fn = Option<unsafe extern "C" fn(epoch: i32, lr: f64, user_data: *mut c_void) -> f64>;

/// kx_model_load_weights: leave weights that are absent or shaped differently as they are.
pub const KX_LOAD_WEIGHTS_SKIP_MISMATCH: u32 = 1;
