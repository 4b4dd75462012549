"""The Fashion-MNIST MLP from Python, as samples/c/fashion_mnist.c: mirrored over every GPU (else two
CPU replicas), a checkpoint each epoch, resumed when run again.

    python3 fashion_mnist.py [DATA_DIR] [CHECKPOINT_DIR] [--epochs N] [--min-accuracy A]
"""
import argparse
import os
import sys

import kx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data", nargs="?", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("checkpoints", nargs="?", default="fashion-mnist-checkpoints-python")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--min-accuracy", type=float, default=0.0, help="exit 1 below this test accuracy")
    a = p.parse_args()

    devices = None if kx.device_count("cuda") > 0 else ["cpu", "cpu"]
    strategy = kx.Strategy.mirrored(devices)
    train = kx.Dataset.from_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"),
                                os.path.join(a.data, "train-labels-idx1-ubyte.gz"))
    test = kx.Dataset.from_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz"),
                               os.path.join(a.data, "t10k-labels-idx1-ubyte.gz"))
    # Keras's idiom: the global batch grows with the replicas (32 per replica).
    train.shuffle(60000, seed=42).batch(32 * strategy.num_replicas_in_sync)

    model = kx.Sequential(strategy, input_shape=(28, 28))
    model.add_flatten().add_dense(128, "relu").add_dropout(0.2).add_dense(10, "softmax")
    model.compile(optimizer="adam", metrics=["accuracy"])

    callbacks = kx.Callbacks().model_checkpoint(os.path.join(a.checkpoints, "epoch-{epoch:02d}.kx"))
    model.fit(train, epochs=a.epochs, verbose=2, callbacks=callbacks, resume_from=a.checkpoints)
    loss, accuracy = model.evaluate(test)
    print(f"test loss: {loss:.4f}  test accuracy: {accuracy:.4f}")
    return 0 if accuracy >= a.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
