//! The Fashion-MNIST MLP from Rust, as samples/c/fashion_mnist.c: mirrored over every GPU (else two
//! CPU replicas), a checkpoint each epoch, resumed when run again.
//!
//!     fashion_mnist [--data DIR] [--checkpoints DIR] [--epochs N] [--min-accuracy A]
use kx::{Activation, Callbacks, CompileOptions, Dataset, FitOptions, Model, Strategy};

struct Args {
    data: String,
    checkpoints: String,
    epochs: i32,
    min_accuracy: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        data: "/usr/share/datasets/fashion-mnist".into(),
        checkpoints: "fashion-mnist-checkpoints-rust".into(),
        epochs: 5,
        min_accuracy: 0.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{} needs a value", flag))?;
        match flag.as_str() {
            "--data" => a.data = value,
            "--checkpoints" => a.checkpoints = value,
            "--epochs" => a.epochs = value.parse().map_err(|_| format!("bad --epochs {}", value))?,
            "--min-accuracy" => a.min_accuracy = value.parse().map_err(|_| format!("bad --min-accuracy {}", value))?,
            _ => return Err(format!("unknown option {}", flag)),
        }
    }
    Ok(a)
}

fn run(a: &Args) -> Result<f64, Box<dyn std::error::Error>> {
    let devices: &[&str] = if kx::cuda_device_count() > 0 { &[] } else { &["cpu", "cpu"] };
    let strategy = Strategy::mirrored(devices)?;
    let file = |name: &str| format!("{}/{}", a.data, name);
    let mut train = Dataset::from_idx(&file("train-images-idx3-ubyte.gz"), &file("train-labels-idx1-ubyte.gz"))?;
    let mut test = Dataset::from_idx(&file("t10k-images-idx3-ubyte.gz"), &file("t10k-labels-idx1-ubyte.gz"))?;
    train.shuffle(60000, 42)?;
    // Keras's idiom: the global batch grows with the replicas (32 per replica).
    train.batch(32 * strategy.num_replicas() as i64, false)?;

    let mut model = Model::sequential(&strategy, &[28, 28])?;
    model.add_flatten()?;
    model.add_dense(128, Activation::Relu)?;
    model.add_dropout(0.2)?;
    model.add_dense(10, Activation::Softmax)?;
    model.compile(&CompileOptions { accuracy: true, ..Default::default() })?;

    let mut callbacks = Callbacks::new()?;
    callbacks.model_checkpoint(&format!("{}/epoch-{{epoch:02d}}.kx", a.checkpoints), 0, 0)?;
    let options = FitOptions { epochs: a.epochs, verbose: 2, resume_from: Some(&a.checkpoints), ..Default::default() };
    model.fit(&mut train, &options, Some(&mut callbacks))?;
    let (loss, accuracy) = model.evaluate(&mut test)?;
    println!("test loss: {:.4}  test accuracy: {:.4}", loss, accuracy);
    Ok(accuracy)
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("{}", e);
        std::process::exit(2)
    });
    match run(&args) {
        Ok(accuracy) if accuracy >= args.min_accuracy => {}
        Ok(_) => std::process::exit(1),
        Err(e) => {
            eprintln!("{}", e);
            std::process::exit(1)
        }
    }
}
