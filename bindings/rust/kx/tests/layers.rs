//! The Keras-shaped front: any layer kx lists, by class name and settings, in Sequential and
//! functional models. Each listed class has a case here.
use kx::{layer_classes, CompileOptions, Layer, Loss, Model, Strategy, Value};

/// (input shape, the layer, whether it reads the input twice) for a class.
fn case(class: &str) -> Option<(Vec<i64>, Layer, bool)> {
    let l = Layer::new(class);
    Some(match class {
        "Dense" => (vec![4], l.set("units", 3).set("activation", "relu"), false),
        "Flatten" => (vec![2, 3], l, false),
        "Dropout" => (vec![4], l.set("rate", 0.5), false),
        "Conv2D" => (vec![5, 5, 2], l.set("filters", 3).set("kernel_size", vec![3, 3]).set("padding", "same"), false),
        "MaxPooling2D" => (vec![4, 4, 2], l.set("pool_size", 2), false),
        "AveragePooling2D" => (vec![4, 4, 2], l.set("pool_size", vec![2, 2]), false),
        "GlobalAveragePooling2D" => (vec![4, 4, 2], l, false),
        "ZeroPadding2D" => (vec![3, 3, 1], l.set("padding", vec![vec![1, 0], vec![0, 2]]), false),
        "Normalization" => (vec![3], l.set("mean", vec![1.0, 2.0, 3.0]).set("variance", vec![1.0, 4.0, 9.0]), false),
        "BatchNormalization" => (vec![3], l.set("epsilon", 1e-3), false),
        "Add" => (vec![4], l, true),
        "Concatenate" => (vec![4], l.set("axis", -1), true),
        "Activation" => (vec![4], l.set("activation", "tanh"), false),
        "ReLU" => (vec![2, 3], l.set("max_value", 6.0), false),
        "DepthwiseConv2D" => (vec![5, 5, 2], l.set("kernel_size", 3).set("padding", "same").set("depth_multiplier", 2), false),
        "Rescaling" => (vec![4], l.set("scale", 0.5).set("offset", -1.0), false),
        "Reshape" => (vec![6], l.set("target_shape", vec![2, -1]), false),
        "LeakyReLU" => (vec![2, 3], l.set("negative_slope", 0.1), false),
        "GlobalMaxPooling2D" => (vec![4, 3, 2], l, false),
        "LayerNormalization" => (vec![2, 3], l.set("epsilon", 1e-6), false),
        "MultiHeadAttention" => (vec![4, 3], l.set("num_heads", 2).set("key_dim", 2), true),
        "Conv1D" => (vec![6, 2], l.set("filters", 3).set("kernel_size", 3).set("padding", "causal"), false),
        "MaxPooling1D" => (vec![6, 2], l.set("pool_size", 2), false),
        "AveragePooling1D" => (vec![6, 2], l.set("pool_size", 3), false),
        "GlobalAveragePooling1D" => (vec![6, 2], l, false),
        "SeparableConv2D" => (vec![5, 5, 2], l.set("filters", 3).set("kernel_size", 3).set("padding", "same"), false),
        "Conv2DTranspose" => (vec![3, 3, 2], l.set("filters", 2).set("kernel_size", 3).set("strides", 2), false),
        "UpSampling2D" => (vec![3, 3, 2], l.set("interpolation", "bilinear"), false),
        "Multiply" => (vec![4], l, true),
        "TensorOperation" => (
            vec![4],
            l.set("operation", "Multiply").set("arguments", Value::List(vec![Value::Null, Value::Number(2.0)])),
            false,
        ),
        "Embedding" => (vec![5], l.set("input_dim", 6).set("output_dim", 3).set("mask_zero", true), false),
        "LSTM" => (vec![4, 3], l.set("units", 2).set("return_sequences", true), false),
        "GRU" => (vec![4, 3], l.set("units", 2), false),
        "Bidirectional" => (vec![4, 3], l.set("layer", Layer::new("LSTM").set("units", 2)), false),
        "Masking" => (vec![4, 3], l.set("mask_value", 0.5), false),
        _ => return None,
    })
}

#[test]
fn every_listed_layer_builds_and_predicts() {
    let s = Strategy::mirrored(&["cpu"]).unwrap();
    let classes = layer_classes();
    assert_eq!(classes.first().map(String::as_str), Some("Dense"));
    for class in &classes {
        let (shape, layer, merge) = case(class).unwrap_or_else(|| panic!("layer class {} has no case", class));
        let mut m = Model::functional(&s, None, &shape).unwrap();
        let inputs: &[&str] = if merge { &["input_layer", "input_layer"] } else { &["input_layer"] };
        m.call(&layer, inputs).unwrap_or_else(|e| panic!("{}: {}", class, e));
        m.compile(&CompileOptions { loss: Loss::MeanSquaredError, ..Default::default() }).unwrap();
        // Token ids for an Embedding (0.5 is none), any values elsewhere.
        let x = vec![if class == "Embedding" { 1.0f32 } else { 0.5f32 }; 2 * m.input_size() as usize];
        let y = m.predict(&x).unwrap();
        assert_eq!(y.len() as i64, 2 * m.output_size(), "{}", class);
        assert!(m.to_json().unwrap().contains(class.as_str()));
    }
}

#[test]
fn sequential_and_functional_from_layers() {
    let s = Strategy::mirrored(&["cpu"]).unwrap();
    let seq = Model::sequential_of(
        &s,
        &[28, 28],
        &[Layer::new("Flatten"), Layer::new("Dense").set("units", 16).set("activation", "relu"), Layer::new("Dense").set("units", 10)],
    )
    .unwrap();
    assert_eq!(seq.num_params(), 784 * 16 + 16 + 16 * 10 + 10);

    let mut f = Model::functional(&s, Some("features"), &[6]).unwrap();
    let h = f.call(&Layer::new("Dense").set("units", 6), &["features"]).unwrap();
    let sum = f.call(&Layer::new("Add"), &["features", &h]).unwrap();
    assert_eq!((h.as_str(), sum.as_str()), ("dense", "add"));
    let e = f.call(&Layer::new("NoSuchLayer"), &[]).unwrap_err();
    assert_eq!(e.code, kx_sys::KX_E_INVALID_ARGUMENT);
    assert!(e.message.contains("NoSuchLayer"), "{}", e.message);
    assert!(f.call(&Layer::new("Dense").set("units", 2), &["nowhere"]).is_err());
    assert!(f.call(&Layer::new("Dense").set("units", "two"), &[]).is_err());
}
