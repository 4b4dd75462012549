//! Keras-shaped layers over `kx_model_add_layer`: any layer kx has, by its Keras class name and
//! settings, e.g. `Layer::new("Dense").set("units", 10).set("activation", "relu")`. A layer kx adds
//! later needs nothing new here; [`layer_classes`] lists them.
use std::ffi::CStr;
use std::ptr;

use crate::error::{c_string, check, Result};
use crate::model::Model;
use crate::strategy::Strategy;

/// A setting's value, as JSON has it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    Str(String),
    List(Vec<Value>),
    /// A JSON object: a wrapped layer's `{"class_name", "config"}` (Bidirectional's "layer").
    Object(Vec<(String, Value)>),
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Number(v as f64)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Number(f64::from(v))
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Number(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Str(v.to_string())
    }
}
/// A layer as a setting of another (Bidirectional's "layer").
impl From<Layer> for Value {
    fn from(l: Layer) -> Value {
        Value::Object(vec![
            ("class_name".to_string(), Value::Str(l.class_name)),
            ("config".to_string(), Value::Object(l.config)),
        ])
    }
}
impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Value {
        Value::List(v.into_iter().map(Into::into).collect())
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Value {
    fn write(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            // JSON has no NaN or infinity: kx refuses the null a non-finite number becomes.
            Value::Number(n) if n.is_finite() => out.push_str(&format!("{}", n)),
            Value::Number(_) => out.push_str("null"),
            Value::Str(s) => write_string(out, s),
            Value::List(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Value::Object(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(out, k);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// A Keras layer as its class name and config; kx checks the settings when the layer is added.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    pub class_name: String,
    pub config: Vec<(String, Value)>,
}

impl Layer {
    pub fn new(class_name: &str) -> Layer {
        Layer { class_name: class_name.to_string(), config: Vec::new() }
    }
    /// The layer with one more setting (Keras's name for it).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> Layer {
        self.config.push((key.to_string(), value.into()));
        self
    }
    /// `{"class_name": ..., "config": {...}}`, as kx_model_add_layer reads it.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"class_name\":");
        write_string(&mut out, &self.class_name);
        out.push_str(",\"config\":{");
        for (i, (k, v)) in self.config.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_string(&mut out, k);
            out.push(':');
            v.write(&mut out);
        }
        out.push_str("}}");
        out
    }
}

/// The Keras class names of the layers kx has.
pub fn layer_classes() -> Vec<String> {
    let mut names = Vec::new();
    loop {
        let p = unsafe { kx_sys::kx_layer_class_name(names.len()) };
        if p.is_null() {
            return names;
        }
        // Static storage in the library.
        names.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
    }
}

impl Model {
    /// An empty Functional model whose input (named `input_name`, or Keras's "input_layer") has
    /// samples of `input_shape`; layers are added with [`Model::call`], the last one the output.
    pub fn functional(s: &Strategy, input_name: Option<&str>, input_shape: &[i64]) -> Result<Model> {
        let name = input_name.map(|n| c_string(n, "the input name")).transpose()?;
        let mut p = ptr::null_mut();
        check(unsafe {
            kx_sys::kx_model_create_functional(
                s.p,
                input_shape.as_ptr(),
                input_shape.len(),
                name.as_ref().map_or(ptr::null(), |n| n.as_ptr()),
                &mut p,
            )
        })?;
        Ok(Model::from_raw(p))
    }

    /// keras.Sequential([Input(shape), layers...]).
    pub fn sequential_of(s: &Strategy, input_shape: &[i64], layers: &[Layer]) -> Result<Model> {
        let mut m = Model::sequential(s, input_shape)?;
        for l in layers {
            m.add(l)?;
        }
        Ok(m)
    }

    /// Appends `layer` reading the last layer (or the input); returns its name.
    pub fn add(&mut self, layer: &Layer) -> Result<String> {
        self.call(layer, &[])
    }

    /// Adds `layer` reading the named layers or the input (a Keras functional call); returns its
    /// name, which later calls read. With no inputs it reads the last layer added.
    pub fn call(&mut self, layer: &Layer, inputs: &[&str]) -> Result<String> {
        let json = c_string(&layer.to_json(), "the layer's config")?;
        let names = inputs.iter().map(|n| c_string(n, "an input name")).collect::<Result<Vec<_>>>()?;
        let pointers: Vec<*const std::os::raw::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut out = ptr::null_mut();
        check(unsafe {
            kx_sys::kx_model_add_layer(self.raw(), json.as_ptr(), pointers.as_ptr(), pointers.len(), &mut out)
        })?;
        let name = unsafe { CStr::from_ptr(out) }.to_string_lossy().into_owned();
        unsafe { kx_sys::kx_free(out as *mut std::os::raw::c_void) };
        Ok(name)
    }
}
