use std::collections::BTreeMap;
use std::ffi::CStr;
use std::ptr;

use crate::callbacks::Callbacks;
use crate::dataset::Dataset;
use crate::error::{c_string, check, Error, Result};
use crate::strategy::Strategy;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    Linear = 0,
    Relu = 1,
    Sigmoid = 2,
    Tanh = 3,
    Softmax = 4,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    Valid = 0,
    Same = 1,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Optimizer {
    #[default]
    Adam = 0,
    Sgd = 1,
    AdamW = 2,
    RmsProp = 3,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Loss {
    #[default]
    SparseCategoricalCrossentropy = 0,
    CategoricalCrossentropy = 1,
    BinaryCrossentropy = 2,
    MeanSquaredError = 3,
    MeanAbsoluteError = 4,
    Huber = 5,
}

/// Keras's compile arguments; zero values mean kx's (Keras's) defaults.
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    pub optimizer: Optimizer,
    pub learning_rate: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    pub momentum: f64,
    pub loss: Loss,
    pub from_logits: bool,
    pub accuracy: bool,
    pub seed: u64,
    /// Keras's use_ema: a moving average of the trained weights replaces them when fit ends.
    pub use_ema: bool,
    /// 0: 0.99.
    pub ema_momentum: f64,
    /// Fields whose zero is meant rather than "the default" (kx_sys::KX_COMPILE_ZERO_* bits), e.g.
    /// `beta1: 0.0, zero_is_value: kx_sys::KX_COMPILE_ZERO_BETA1` for β1 = 0 as Keras accepts.
    pub zero_is_value: u32,
    /// Keras's mixed-precision policy: kx_sys::KX_PRECISION_FLOAT32 (0), _MIXED_BFLOAT16, _MIXED_FLOAT16.
    pub precision: i32,
    /// AdamW's weight decay; 0: 0.004 (KX_COMPILE_ZERO_WEIGHT_DECAY for none).
    pub weight_decay: f64,
    /// RMSprop's rho; 0: 0.9 (KX_COMPILE_ZERO_RHO for 0).
    pub rho: f64,
    /// RMSprop's centered.
    pub centered: bool,
}

/// Keras's fit arguments; zero values mean defaults (one epoch, one pass, silent).
#[derive(Default)]
pub struct FitOptions<'a> {
    pub epochs: i32,
    pub initial_epoch: i32,
    pub steps_per_epoch: i64,
    pub validation: Option<&'a Dataset>,
    pub validation_steps: i64,
    /// 0 silent, 1 progress bar, 2 one line per epoch.
    pub verbose: i32,
    /// A checkpoint file or directory to continue from.
    pub resume_from: Option<&'a str>,
}

/// Per-epoch metrics ("loss", "accuracy", "val_loss", "val_accuracy").
#[derive(Clone, Debug, Default)]
pub struct History {
    pub metrics: BTreeMap<String, Vec<f64>>,
    /// A callback stopped training.
    pub stopped: bool,
}

/// A kx model: [`Model::sequential`], [`Model::from_json`] or [`Model::load`].
pub struct Model {
    p: *mut kx_sys::kx_model,
}

unsafe impl Send for Model {}

impl Model {
    pub(crate) fn from_raw(p: *mut kx_sys::kx_model) -> Model {
        Model { p }
    }
    pub(crate) fn raw(&mut self) -> *mut kx_sys::kx_model {
        self.p
    }

    /// An empty Sequential model for samples of `input_shape` (no batch dimension).
    pub fn sequential(s: &Strategy, input_shape: &[i64]) -> Result<Model> {
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_model_create_sequential(s.p, input_shape.as_ptr(), input_shape.len(), &mut p) })?;
        Ok(Model { p })
    }

    pub fn from_json(s: &Strategy, config: &str) -> Result<Model> {
        let c = c_string(config, "the JSON")?;
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_model_from_json(s.p, c.as_ptr(), &mut p) })?;
        Ok(Model { p })
    }

    /// A model saved with [`Model::save`] (or a checkpoint), compiled as it was.
    pub fn load(s: &Strategy, path: &str) -> Result<Model> {
        let c = c_string(path, "the path")?;
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_model_load(s.p, c.as_ptr(), &mut p) })?;
        Ok(Model { p })
    }

    /// A Keras model file (.keras, or a legacy .h5 from model.save): compiled as Keras compiled it,
    /// optimizer state included, or uncompiled with its weights.
    pub fn load_keras(s: &Strategy, path: &str) -> Result<Model> {
        let c = c_string(path, "the path")?;
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_model_load_keras(s.p, c.as_ptr(), &mut p) })?;
        Ok(Model { p })
    }

    pub fn add_dense(&mut self, units: i64, act: Activation) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_dense(self.p, units, act as i32) }).map(|_| ())
    }

    pub fn add_conv2d(&mut self, filters: i64, kernel: (i32, i32), stride: i32, pad: Padding, act: Activation) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_conv2d(self.p, filters, kernel.0, kernel.1, stride, pad as i32, act as i32) })
            .map(|_| ())
    }

    /// Dense without a bias (Keras's `use_bias=False`): y = act(x W).
    pub fn add_dense_no_bias(&mut self, units: i64, act: Activation) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_dense_flags(self.p, units, act as i32, kx_sys::KX_LAYER_NO_BIAS) })
            .map(|_| ())
    }

    /// Conv2D without a bias (Keras's `use_bias=False`), e.g. before a batch normalisation.
    pub fn add_conv2d_no_bias(&mut self, filters: i64, kernel: (i32, i32), stride: i32, pad: Padding, act: Activation) -> Result<()> {
        check(unsafe {
            kx_sys::kx_model_add_conv2d_flags(self.p, filters, kernel.0, kernel.1, stride, pad as i32, act as i32,
                                              kx_sys::KX_LAYER_NO_BIAS)
        })
        .map(|_| ())
    }

    pub fn add_max_pool2d(&mut self, pool_h: i32, pool_w: i32) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_max_pool2d(self.p, pool_h, pool_w) }).map(|_| ())
    }

    /// AveragePooling2D; a stride of 0 means the pool size.
    pub fn add_average_pool2d(&mut self, pool: (i32, i32), strides: (i32, i32)) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_average_pool2d(self.p, pool.0, pool.1, strides.0, strides.1) }).map(|_| ())
    }

    pub fn add_global_average_pool2d(&mut self) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_global_average_pool2d(self.p) }).map(|_| ())
    }

    pub fn add_zero_padding2d(&mut self, top: i32, bottom: i32, left: i32, right: i32) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_zero_padding2d(self.p, top, bottom, left, right) }).map(|_| ())
    }

    /// BatchNormalization over the last axis (Keras: momentum 0.99, epsilon 1e-3).
    pub fn add_batch_norm(&mut self, momentum: f32, epsilon: f32) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_batch_norm(self.p, momentum, epsilon) }).map(|_| ())
    }

    /// keras.layers.Normalization(mean, variance) over the last axis: one value per channel, or one
    /// for every channel ([`Dataset::feature_moments`] finds them).
    pub fn add_normalization(&mut self, mean: &[f32], variance: &[f32]) -> Result<()> {
        if mean.len() != variance.len() {
            return Err(Error { code: kx_sys::KX_E_INVALID_ARGUMENT, message: format!("add_normalization: {} means and {} variances", mean.len(), variance.len()) });
        }
        check(unsafe { kx_sys::kx_model_add_normalization(self.p, mean.as_ptr(), variance.as_ptr(), mean.len()) }).map(|_| ())
    }

    pub fn add_activation(&mut self, act: Activation) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_activation(self.p, act as i32) }).map(|_| ())
    }

    /// keras.applications.ResNet50's architecture (uncompiled) for (height, width, channels) inputs.
    pub fn resnet50(s: &Strategy, input_shape: [i64; 3], include_top: bool, classes: i64) -> Result<Model> {
        let mut p = ptr::null_mut();
        check(unsafe {
            kx_sys::kx_model_create_resnet50(s.p, input_shape.as_ptr(), include_top as i32, classes, &mut p)
        })?;
        Ok(Model { p })
    }

    /// A keras.applications model by its Keras class name ("ResNet50", "MobileNetV2", "MobileNetV3Small",
    /// "MobileNetV3Large", "EfficientNetB0") with its keyword arguments as a JSON object ("" for Keras's
    /// defaults), e.g. `Model::application(&s, "EfficientNetB0", r#"{"input_shape": [32, 32, 3], "classes": 4}"#)`:
    /// Keras's layer names, so Keras's weight files load by name; uncompiled.
    pub fn application(s: &Strategy, name: &str, options_json: &str) -> Result<Model> {
        let n = c_string(name, "the application name")?;
        let o = c_string(options_json, "the options")?;
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_model_create_application(s.p, n.as_ptr(), o.as_ptr(), &mut p) })?;
        Ok(Model { p })
    }

    /// The layers' names, in order.
    pub fn layer_names(&self) -> Result<Vec<String>> {
        let n = unsafe { kx_sys::kx_model_num_layers(self.p) };
        let mut names = Vec::new();
        for i in 0..n {
            let mut out = ptr::null_mut();
            check(unsafe { kx_sys::kx_model_layer_name(self.p, i, &mut out) })?;
            names.push(unsafe { CStr::from_ptr(out) }.to_string_lossy().into_owned());
            unsafe { kx_sys::kx_free(out as *mut std::os::raw::c_void) };
        }
        Ok(names)
    }

    /// Freezes (false) or unfreezes a layer by name; it takes effect at the next training step.
    pub fn set_trainable(&mut self, layer: &str, trainable: bool) -> Result<()> {
        let c = c_string(layer, "the layer name")?;
        check(unsafe { kx_sys::kx_model_set_trainable(self.p, c.as_ptr(), trainable as i32) }).map(|_| ())
    }

    /// Weights the optimizer trains now.
    pub fn num_trainable_params(&self) -> i64 {
        unsafe { kx_sys::kx_model_num_trainable_params(self.p) }
    }

    /// Weights by name from a safetensors file: (loaded, skipped). With skip_mismatch, weights the file
    /// lacks or holds with another shape keep their values; without, they are an error and nothing changes.
    pub fn load_weights(&mut self, path: &str, skip_mismatch: bool) -> Result<(i64, i64)> {
        let c = c_string(path, "the path")?;
        let flags = if skip_mismatch { kx_sys::KX_LOAD_WEIGHTS_SKIP_MISMATCH } else { 0 };
        let (mut loaded, mut skipped) = (0i64, 0i64);
        check(unsafe { kx_sys::kx_model_load_weights(self.p, c.as_ptr(), flags, &mut loaded, &mut skipped) })?;
        Ok((loaded, skipped))
    }

    pub fn add_flatten(&mut self) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_flatten(self.p) }).map(|_| ())
    }

    pub fn add_dropout(&mut self, rate: f32) -> Result<()> {
        check(unsafe { kx_sys::kx_model_add_dropout(self.p, rate) }).map(|_| ())
    }

    /// Plans the training step and initialises the weights.
    pub fn compile(&mut self, o: &CompileOptions) -> Result<()> {
        let mut co = kx_sys::kx_compile_options::default();
        unsafe { kx_sys::kx_compile_options_init(&mut co, std::mem::size_of::<kx_sys::kx_compile_options>()) };
        co.optimizer = o.optimizer as i32;
        co.learning_rate = o.learning_rate;
        co.beta1 = o.beta1;
        co.beta2 = o.beta2;
        co.epsilon = o.epsilon;
        co.momentum = o.momentum;
        co.loss = o.loss as i32;
        co.from_logits = o.from_logits as i32;
        co.metrics = if o.accuracy { kx_sys::KX_METRIC_ACCURACY } else { 0 };
        co.seed = o.seed;
        co.use_ema = o.use_ema as i32;
        co.ema_momentum = o.ema_momentum;
        co.zero_is_value = o.zero_is_value;
        co.precision = o.precision;
        co.weight_decay = o.weight_decay;
        co.rho = o.rho;
        co.centered = o.centered as i32;
        check(unsafe { kx_sys::kx_model_compile(self.p, &co) }).map(|_| ())
    }

    pub fn num_params(&self) -> i64 {
        unsafe { kx_sys::kx_model_num_params(self.p) }
    }
    /// Values per sample that predict reads and writes.
    pub fn input_size(&self) -> i64 {
        unsafe { kx_sys::kx_model_input_size(self.p) }
    }
    pub fn output_size(&self) -> i64 {
        unsafe { kx_sys::kx_model_output_size(self.p) }
    }

    /// All parameters, layer by layer (kernel then bias).
    pub fn weights(&self) -> Result<Vec<f32>> {
        let mut w = vec![0.0f32; self.num_params().max(0) as usize];
        check(unsafe { kx_sys::kx_model_get_weights(self.p, w.as_mut_ptr(), w.len()) })?;
        Ok(w)
    }

    pub fn set_weights(&mut self, w: &[f32]) -> Result<()> {
        check(unsafe { kx_sys::kx_model_set_weights(self.p, w.as_ptr(), w.len()) }).map(|_| ())
    }

    pub fn to_json(&self) -> Result<String> {
        let mut out = ptr::null_mut();
        check(unsafe { kx_sys::kx_model_to_json(self.p, &mut out) })?;
        let s = unsafe { CStr::from_ptr(out) }.to_string_lossy().into_owned();
        unsafe { kx_sys::kx_free(out as *mut std::os::raw::c_void) };
        Ok(s)
    }

    /// Writes config, weights and optimizer state to one safetensors file.
    pub fn save(&mut self, path: &str) -> Result<()> {
        let c = c_string(path, "the path")?;
        check(unsafe { kx_sys::kx_model_save(self.p, c.as_ptr()) }).map(|_| ())
    }

    /// A .keras file that keras.models.load_model opens (config, weights, optimizer state).
    pub fn save_keras(&mut self, path: &str) -> Result<()> {
        let c = c_string(path, "the path")?;
        check(unsafe { kx_sys::kx_model_save_keras(self.p, c.as_ptr()) }).map(|_| ())
    }

    /// Trains the model. A panic in a callback closure is resumed here once kx has returned.
    pub fn fit(&mut self, train: &mut Dataset, o: &FitOptions, cb: Option<&mut Callbacks>) -> Result<History> {
        let mut fo: kx_sys::kx_fit_options = unsafe { std::mem::zeroed() };
        unsafe { kx_sys::kx_fit_options_init(&mut fo, std::mem::size_of::<kx_sys::kx_fit_options>()) };
        fo.epochs = o.epochs;
        fo.initial_epoch = o.initial_epoch;
        fo.steps_per_epoch = o.steps_per_epoch;
        fo.validation = o.validation.map_or(ptr::null_mut(), |d| d.p);
        fo.validation_steps = o.validation_steps;
        fo.verbose = o.verbose;
        let resume = o.resume_from.map(|r| c_string(r, "resume_from")).transpose()?;
        fo.resume_from = resume.as_ref().map_or(ptr::null(), |r| r.as_ptr());
        let (cp, panic) = match cb {
            Some(c) => (c.p, Some(c.panic.clone())),
            None => (ptr::null_mut(), None),
        };
        let mut h = ptr::null_mut();
        let status = unsafe { kx_sys::kx_fit(self.p, train.p, &fo, cp, &mut h) };
        if let Some(payload) = panic.and_then(|p| p.borrow_mut().take()) {
            unsafe { kx_sys::kx_history_destroy(h) };
            std::panic::resume_unwind(payload);
        }
        let status = check(status)?;
        let mut history = History { metrics: BTreeMap::new(), stopped: status == kx_sys::KX_STOPPED };
        let epochs = unsafe { kx_sys::kx_history_epochs(h) };
        for name in ["loss", "accuracy", "val_loss", "val_accuracy"] {
            let cname = c_string(name, "a metric")?;
            let mut values = Vec::new();
            for e in 0..epochs {
                let mut v = 0.0;
                if unsafe { kx_sys::kx_history_get(h, cname.as_ptr(), e, &mut v) } != kx_sys::KX_OK {
                    values.clear();
                    break;
                }
                values.push(v);
            }
            if !values.is_empty() {
                history.metrics.insert(name.to_string(), values);
            }
        }
        unsafe { kx_sys::kx_history_destroy(h) };
        Ok(history)
    }

    /// (loss, accuracy) over d; accuracy is NaN without the metric.
    pub fn evaluate(&mut self, d: &mut Dataset) -> Result<(f64, f64)> {
        let (mut loss, mut acc) = (0.0, 0.0);
        check(unsafe { kx_sys::kx_evaluate(self.p, d.p, &mut loss, &mut acc) })?;
        Ok((loss, acc))
    }

    /// output_size() values per sample for the samples of x (input_size() values each).
    pub fn predict(&mut self, x: &[f32]) -> Result<Vec<f32>> {
        let per = self.input_size();
        if per <= 0 || x.len() as i64 % per != 0 {
            return Err(Error::invalid(format!("predict: {} values are not whole samples of {}", x.len(), per)));
        }
        let n = x.len() as i64 / per;
        let mut out = vec![0.0f32; (n * self.output_size()) as usize];
        check(unsafe { kx_sys::kx_predict(self.p, x.as_ptr(), n, out.as_mut_ptr(), out.len()) })?;
        Ok(out)
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { kx_sys::kx_model_destroy(self.p) }
    }
}
