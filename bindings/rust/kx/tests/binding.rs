//! The safe API: training, arrays in and out, files, callbacks, and errors with kx's code and message.
use kx::{Activation, Callbacks, CompileOptions, Dataset, Error, EventKind, FitOptions, Model, Padding, Strategy};

fn blobs(n: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    // A small xorshift generator: the tests need no crates.
    let mut state = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let centres: Vec<f32> = (0..24).map(|_| (next() * 12.0 - 6.0) as f32).collect();
    let (mut x, mut y) = (Vec::with_capacity(n * 8), Vec::with_capacity(n));
    for _ in 0..n {
        let c = (next() * 3.0) as usize % 3;
        y.push(c as f32);
        for j in 0..8 {
            x.push(centres[c * 8 + j] + (next() - 0.5) as f32);
        }
    }
    (x, y)
}

fn dataset(n: usize, batch: i64) -> Dataset {
    let (x, y) = blobs(n, 1);
    let mut d = Dataset::from_arrays(&x, &[n as i64, 8], &y, &[n as i64, 1]).unwrap();
    d.batch(batch, false).unwrap();
    d
}

fn small_model(seed: u64) -> Model {
    let s = Strategy::mirrored(&["cpu"]).unwrap();
    let mut m = Model::sequential(&s, &[8]).unwrap();
    m.add_dense(16, Activation::Relu).unwrap();
    m.add_dense(3, Activation::Softmax).unwrap();
    m.compile(&CompileOptions { learning_rate: 0.01, accuracy: true, seed, ..Default::default() }).unwrap();
    m
}

#[test]
fn training_learns_and_predicts_probabilities() {
    let mut m = small_model(1);
    let mut d = dataset(600, 32);
    d.shuffle(600, 3).unwrap();
    let h = m.fit(&mut d, &FitOptions { epochs: 5, ..Default::default() }, None).unwrap();
    let loss = &h.metrics["loss"];
    assert_eq!(loss.len(), 5);
    assert!(loss[4] < loss[0], "{:?}", loss);
    let (_, acc) = m.evaluate(&mut d).unwrap();
    assert!(acc > 0.95, "accuracy {}", acc);
    let (x, _) = blobs(10, 1);
    let p = m.predict(&x).unwrap();
    assert_eq!(p.len(), 30);
    for row in p.chunks(3) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
}

#[test]
fn weights_files_and_json_round_trip() {
    let mut m = small_model(1);
    m.fit(&mut dataset(200, 32), &FitOptions::default(), None).unwrap();
    let w = m.weights().unwrap();
    assert_eq!(w.len() as i64, m.num_params());
    assert_eq!(m.num_params(), 8 * 16 + 16 + 16 * 3 + 3);
    let mut other = small_model(99);
    other.set_weights(&w).unwrap();
    assert_eq!(other.weights().unwrap(), w);
    let dir = std::env::temp_dir().join(format!("kx-rust-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.kx");
    m.save(path.to_str().unwrap()).unwrap();
    let s = Strategy::default().unwrap();
    let loaded = Model::load(&s, path.to_str().unwrap()).unwrap();
    assert_eq!(loaded.weights().unwrap(), w);
    let again = Model::from_json(&s, &m.to_json().unwrap()).unwrap();
    assert_eq!(again.num_params(), m.num_params());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn callbacks_see_events_and_stop() {
    let mut cb = Callbacks::new().unwrap();
    let seen = std::rc::Rc::new(std::cell::Cell::new(0));
    let counter = seen.clone();
    // It counts batches and reads no metrics: it still sees every event.
    cb.add_without_batch_metrics(move |e| {
        if e.kind == EventKind::BatchEnd {
            counter.set(counter.get() + 1);
        }
        e.kind == EventKind::EpochEnd && e.epoch == 1
    })
    .unwrap();
    let h = small_model(1).fit(&mut dataset(320, 32), &FitOptions { epochs: 5, ..Default::default() }, Some(&mut cb)).unwrap();
    assert!(h.stopped);
    assert_eq!(h.metrics["loss"].len(), 2);
    assert_eq!(seen.get(), 20);
}

#[test]
fn a_panic_in_a_callback_is_resumed_after_fit() {
    let mut cb = Callbacks::new().unwrap();
    cb.add(|e| {
        if e.kind == EventKind::BatchEnd {
            panic!("from the callback");
        }
        false
    })
    .unwrap();
    let mut m = small_model(1);
    let mut d = dataset(64, 8);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = m.fit(&mut d, &FitOptions { epochs: 2, ..Default::default() }, Some(&mut cb));
    }));
    let payload = result.expect_err("fit returned after a panic");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"from the callback"));
    // The model and the callbacks are still usable.
    m.fit(&mut d, &FitOptions::default(), None).unwrap();
}

fn expect(err: Error, code: i32, fragment: &str) {
    assert_eq!(err.code, code, "{}", err);
    assert!(err.message.contains(fragment), "{:?} lacks {:?}", err.message, fragment);
}

#[test]
fn errors_carry_the_code_and_message() {
    let s = Strategy::default().unwrap();
    expect(Model::sequential(&s, &[0, 3]).err().unwrap(), -1, "positive");
    expect(Strategy::mirrored(&["tpu:0"]).err().unwrap(), -1, "unknown device");
    let mut m = Model::sequential(&s, &[8]).unwrap();
    expect(m.add_dense(0, Activation::Relu).unwrap_err(), -1, "units");
    m.add_dense(3, Activation::Softmax).unwrap();
    expect(m.fit(&mut dataset(32, 8), &FitOptions::default(), None).unwrap_err(), -2, "compile");
    m.compile(&CompileOptions::default()).unwrap();
    let (x, _) = blobs(32, 1);
    let mut bad = Dataset::from_arrays(&x, &[32, 8], &[7.0; 32], &[32, 1]).unwrap();
    expect(m.fit(&mut bad, &FitOptions::default(), None).unwrap_err(), -1, "label");
    expect(m.set_weights(&[0.0; 3]).unwrap_err(), -1, "set_weights needs");
    expect(Dataset::from_idx("/nonexistent/a.gz", "/nonexistent/b.gz").err().unwrap(), -5, "nonexistent");
    expect(m.predict(&x[..5]).unwrap_err(), -1, "predict");
    expect(Model::load(&s, "/nonexistent/m.kx").err().unwrap(), -5, "/nonexistent/m.kx");
    assert_eq!(Model::load(&s, "/nonexistent/m.kx").err().unwrap().name(), "KX_E_IO");
    let names: Vec<&str> = [0, 1, -6, -9, -100, -50].iter().map(|&c| kx::status_name(c)).collect();
    assert_eq!(names, ["KX_OK", "KX_STOPPED", "KX_E_CORRUPT", "KX_E_COMM", "KX_E_INTERNAL", "KX_UNKNOWN_STATUS"]);
    m.fit(&mut dataset(32, 8), &FitOptions::default(), None).unwrap();
}

#[test]
fn cnn_layers_frozen_layers_and_weights_by_name() {
    let s = Strategy::default().unwrap();
    let cnn = |classes: i64| {
        let mut m = Model::sequential(&s, &[8, 8, 2]).unwrap();
        m.add_zero_padding2d(1, 1, 1, 1).unwrap();
        m.add_conv2d(4, (3, 3), 1, Padding::Valid, Activation::Linear).unwrap();
        m.add_batch_norm(0.99, 1e-3).unwrap();
        m.add_activation(Activation::Relu).unwrap();
        m.add_average_pool2d((2, 2), (0, 0)).unwrap();
        m.add_global_average_pool2d().unwrap();
        m.add_dense(classes, Activation::Softmax).unwrap();
        m.compile(&CompileOptions::default()).unwrap();
        m
    };
    let mut m = cnn(3);
    assert_eq!(m.layer_names().unwrap()[2], "batch_normalization");
    m.set_trainable("conv2d", false).unwrap();
    assert_eq!(m.num_trainable_params(), 4 * 2 + 4 * 3 + 3);
    let x: Vec<f32> = (0..32 * 128).map(|i| (i % 11) as f32 / 11.0).collect();
    let y: Vec<f32> = (0..32).map(|i| (i % 3) as f32).collect();
    let mut d = Dataset::from_arrays(&x, &[32, 8, 8, 2], &y, &[32]).unwrap();
    m.fit(&mut d, &FitOptions::default(), None).unwrap();
    let dir = std::env::temp_dir().join(format!("kx-rust-cnn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("base.kx");
    m.save(path.to_str().unwrap()).unwrap();
    let mut other = cnn(5);
    assert!(other.load_weights(path.to_str().unwrap(), false).is_err());
    assert_eq!(other.load_weights(path.to_str().unwrap(), true).unwrap(), (6, 2));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(Model::resnet50(&s, [224, 224, 3], true, 1000).unwrap().num_params(), 25636712);
    // Keras's count_params() is 4,054,695 for this EfficientNetB0: it also counts Normalization's sample count.
    let e = Model::application(&s, "EfficientNetB0", r#"{"input_shape": [32, 32, 3], "classes": 4}"#).unwrap();
    assert_eq!(e.num_params(), 4054694);
    assert_eq!(e.layer_names().unwrap()[..2], ["rescaling".to_string(), "normalization".to_string()]);
    assert!(Model::application(&s, "NoSuchNet", "").is_err());
}

#[test]
fn normalization_from_the_data_and_a_moving_average_of_the_weights() {
    let s = Strategy::default().unwrap();
    let mut d = dataset(240, 24);
    let (mean, variance) = d.feature_moments(8).unwrap();
    assert_eq!((mean.len(), variance.len()), (8, 8));
    assert!(variance.iter().all(|v| *v > 0.0));
    expect(d.feature_moments(3).unwrap_err(), -1, "per channel");
    let mut m = Model::sequential(&s, &[8]).unwrap();
    expect(m.add_normalization(&mean, &variance[..2]).unwrap_err(), -1, "variances");
    m.add_normalization(&mean, &variance).unwrap();
    m.add_dense(3, Activation::Softmax).unwrap();
    assert_eq!(m.num_params(), 16 + 8 * 3 + 3);
    m.compile(&CompileOptions { learning_rate: 0.01, accuracy: true, use_ema: true, ema_momentum: 0.5, ..Default::default() }).unwrap();
    m.fit(&mut d, &FitOptions { epochs: 3, ..Default::default() }, None).unwrap();
    let (_, acc) = m.evaluate(&mut d).unwrap();
    assert!(acc > 0.9, "accuracy {}", acc);
}

#[test]
fn layers_without_bias_count_like_keras_and_train() {
    let s = Strategy::default().unwrap();
    let mut m = Model::sequential(&s, &[784]).unwrap();
    m.add_dense_no_bias(10, Activation::Softmax).unwrap();
    assert_eq!(m.num_params(), 7840); // Keras: Dense(10, use_bias=False) on 784 inputs
    assert!(m.to_json().unwrap().contains("\"use_bias\": false"));
    let mut cnn = Model::sequential(&s, &[8, 8, 2]).unwrap();
    cnn.add_conv2d_no_bias(4, (3, 3), 1, Padding::Same, Activation::Linear).unwrap();
    cnn.add_batch_norm(0.99, 1e-3).unwrap();
    cnn.add_activation(Activation::Relu).unwrap();
    cnn.add_global_average_pool2d().unwrap();
    cnn.add_dense(3, Activation::Softmax).unwrap();
    assert_eq!(cnn.num_params(), 3 * 3 * 2 * 4 + 4 * 4 + 4 * 3 + 3);
    cnn.compile(&CompileOptions::default()).unwrap();
    let x: Vec<f32> = (0..16 * 128).map(|i| (i % 7) as f32 / 7.0).collect();
    let y: Vec<f32> = (0..16).map(|i| (i % 3) as f32).collect();
    let mut d = Dataset::from_arrays(&x, &[16, 8, 8, 2], &y, &[16]).unwrap();
    cnn.fit(&mut d, &FitOptions::default(), None).unwrap();
}
