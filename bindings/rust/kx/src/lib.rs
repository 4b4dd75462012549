//! Train deep-learning models with kx from Rust, as Keras does from Python: a [`Strategy`] (which
//! devices train), a [`Model`], a [`Dataset`] and [`Model::fit`].
//!
//! Every failure is an [`Error`] with kx's status code and message. Handles are released on drop.
//! A handle is used from one thread at a time (they are `Send`, not `Sync`).
mod callbacks;
mod data_files;
mod dataset;
mod error;
mod layers;
mod model;
mod strategy;

pub use callbacks::{Callbacks, Event, EventKind};
pub use dataset::Dataset;
pub use error::{status_name, Error, Result};
pub use layers::{layer_classes, Layer, Value};
pub use model::{Activation, CompileOptions, FitOptions, History, Loss, Model, Optimizer, Padding};
pub use strategy::Strategy;

/// kx's version string, e.g. "0.1.0".
pub fn version() -> String {
    unsafe { std::ffi::CStr::from_ptr(kx_sys::kx_version_string()) }.to_string_lossy().into_owned()
}

/// CUDA devices kx can use (0 without a GPU, a driver or the CUDA module).
pub fn cuda_device_count() -> i32 {
    unsafe { kx_sys::kx_device_count(kx_sys::KX_DEVICE_CUDA) }
}
