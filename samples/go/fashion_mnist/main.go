// The Fashion-MNIST MLP from Go, as samples/c/fashion_mnist.c: mirrored over every GPU (else two CPU
// replicas), a checkpoint each epoch, resumed when run again.
//
//	go run . [-data DIR] [-checkpoints DIR] [-epochs N] [-min-accuracy A]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"kx/kx"
)

func run() (float64, error) {
	data := flag.String("data", "/usr/share/datasets/fashion-mnist", "directory of the Fashion-MNIST .gz files")
	checkpoints := flag.String("checkpoints", "fashion-mnist-checkpoints-go", "checkpoint directory")
	epochs := flag.Int("epochs", 5, "epochs")
	flag.Parse()

	var devices []string
	if kx.CUDADeviceCount() == 0 {
		devices = []string{"cpu", "cpu"}
	}
	strategy, err := kx.NewMirroredStrategy(devices...)
	if err != nil {
		return 0, err
	}
	defer strategy.Close()
	train, err := kx.DatasetFromIDX(filepath.Join(*data, "train-images-idx3-ubyte.gz"),
		filepath.Join(*data, "train-labels-idx1-ubyte.gz"))
	if err != nil {
		return 0, err
	}
	defer train.Close()
	test, err := kx.DatasetFromIDX(filepath.Join(*data, "t10k-images-idx3-ubyte.gz"),
		filepath.Join(*data, "t10k-labels-idx1-ubyte.gz"))
	if err != nil {
		return 0, err
	}
	defer test.Close()
	if err := train.Shuffle(60000, 42); err != nil {
		return 0, err
	}
	// Keras's idiom: the global batch grows with the replicas (32 per replica).
	if err := train.Batch(32*int64(strategy.NumReplicas()), false); err != nil {
		return 0, err
	}

	model, err := kx.NewSequential(strategy, 28, 28)
	if err != nil {
		return 0, err
	}
	defer model.Close()
	for _, add := range []func() error{
		model.AddFlatten,
		func() error { return model.AddDense(128, kx.ReLU) },
		func() error { return model.AddDropout(0.2) },
		func() error { return model.AddDense(10, kx.Softmax) },
		func() error { return model.Compile(kx.CompileOptions{Accuracy: true}) },
	} {
		if err := add(); err != nil {
			return 0, err
		}
	}
	cb, err := kx.NewCallbacks()
	if err != nil {
		return 0, err
	}
	defer cb.Close()
	if err := cb.AddModelCheckpoint(filepath.Join(*checkpoints, "epoch-{epoch:02d}.kx"), 0, 0); err != nil {
		return 0, err
	}
	if _, err := model.Fit(train, kx.FitOptions{Epochs: *epochs, Verbose: 2, ResumeFrom: *checkpoints}, cb); err != nil {
		return 0, err
	}
	loss, accuracy, err := model.Evaluate(test)
	if err != nil {
		return 0, err
	}
	fmt.Printf("test loss: %.4f  test accuracy: %.4f\n", loss, accuracy)
	return accuracy, nil
}

func main() {
	minAccuracy := flag.Float64("min-accuracy", 0, "exit 1 below this test accuracy")
	accuracy, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if accuracy < *minAccuracy {
		os.Exit(1)
	}
}
