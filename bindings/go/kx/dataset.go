package kx

/*
#include <stdlib.h>
#include <kx/kx.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Dataset holds (x, y) samples in kx, copied from Go slices or read from IDX files.
type Dataset struct{ p *C.kx_dataset }

func newDataset(p *C.kx_dataset) *Dataset {
	d := &Dataset{p}
	runtime.SetFinalizer(d, (*Dataset).Close)
	return d
}

func product(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// DatasetFromArrays copies x (float32, row-major, xShape[0] samples) and y (labels: class indices,
// one-hot rows or targets, yShape[0] samples).
func DatasetFromArrays(x []float32, xShape []int64, y []float32, yShape []int64) (*Dataset, error) {
	if len(xShape) == 0 || len(yShape) == 0 {
		return nil, invalid("DatasetFromArrays: shapes need at least one dimension")
	}
	if int64(len(x)) != product(xShape) || int64(len(y)) != product(yShape) {
		return nil, invalid("DatasetFromArrays: %d x values for shape %v, %d y values for shape %v", len(x), xShape,
			len(y), yShape)
	}
	var p *C.kx_dataset
	err := callErr(func() C.kx_status {
		return C.kx_dataset_from_arrays(unsafe.Pointer(&x[0]), C.KX_DTYPE_F32, (*C.int64_t)(&xShape[0]),
			C.size_t(len(xShape)), unsafe.Pointer(&y[0]), C.KX_DTYPE_F32, (*C.int64_t)(&yShape[0]),
			C.size_t(len(yShape)), &p)
	})
	if err != nil {
		return nil, err
	}
	return newDataset(p), nil
}

// DatasetFromIDX reads MNIST-format image and label files (gzip-compressed or not).
func DatasetFromIDX(imagesPath, labelsPath string) (*Dataset, error) {
	img, lbl := C.CString(imagesPath), C.CString(labelsPath)
	defer C.free(unsafe.Pointer(img))
	defer C.free(unsafe.Pointer(lbl))
	var p *C.kx_dataset
	if err := callErr(func() C.kx_status { return C.kx_dataset_from_idx(img, lbl, &p) }); err != nil {
		return nil, err
	}
	return newDataset(p), nil
}

// Take is the first n samples (sharing storage); Skip all but the first n.
func (d *Dataset) Take(n int64) (*Dataset, error) {
	defer runtime.KeepAlive(d)
	var p *C.kx_dataset
	if err := callErr(func() C.kx_status { return C.kx_dataset_take(d.p, C.int64_t(n), &p) }); err != nil {
		return nil, err
	}
	return newDataset(p), nil
}

func (d *Dataset) Skip(n int64) (*Dataset, error) {
	defer runtime.KeepAlive(d)
	var p *C.kx_dataset
	if err := callErr(func() C.kx_status { return C.kx_dataset_skip(d.p, C.int64_t(n), &p) }); err != nil {
		return nil, err
	}
	return newDataset(p), nil
}

// Shuffle reshuffles every epoch from seed with a buffer of bufferSize samples.
func (d *Dataset) Shuffle(bufferSize int64, seed uint64) error {
	defer runtime.KeepAlive(d)
	return callErr(func() C.kx_status { return C.kx_dataset_shuffle(d.p, C.int64_t(bufferSize), C.uint64_t(seed)) })
}

// Batch sets the global batch size, which kx splits across a strategy's replicas.
func (d *Dataset) Batch(globalBatchSize int64, dropRemainder bool) error {
	defer runtime.KeepAlive(d)
	drop := C.int32_t(0)
	if dropRemainder {
		drop = 1
	}
	return callErr(func() C.kx_status { return C.kx_dataset_batch(d.p, C.int64_t(globalBatchSize), drop) })
}

// NumSamples is the number of samples.
func (d *Dataset) NumSamples() int64 { return int64(C.kx_dataset_num_samples(d.p)) }

// FeatureMoments is Keras's Normalization.adapt: the mean and variance of x per channel (channels =
// x's last axis) or over all values (channels = 1).
func (d *Dataset) FeatureMoments(channels int) (mean, variance []float32, err error) {
	defer runtime.KeepAlive(d)
	if channels <= 0 {
		return nil, nil, invalid("FeatureMoments: channels must be positive, got %d", channels)
	}
	mean, variance = make([]float32, channels), make([]float32, channels)
	err = callErr(func() C.kx_status {
		return C.kx_dataset_feature_moments(d.p, (*C.float)(&mean[0]), (*C.float)(&variance[0]), C.size_t(channels))
	})
	if err != nil {
		return nil, nil, err
	}
	return mean, variance, nil
}

// Close releases the dataset; safe to call twice.
func (d *Dataset) Close() {
	if d.p != nil {
		C.kx_dataset_destroy(d.p)
		d.p = nil
		runtime.SetFinalizer(d, nil)
	}
}
