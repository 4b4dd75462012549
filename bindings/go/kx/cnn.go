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

// AddAveragePool2D appends AveragePooling2D; a stride of 0 means the pool size.
func (m *Model) AddAveragePool2D(poolH, poolW, strideH, strideW int) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status {
		return C.kx_model_add_average_pool2d(m.p, C.int32_t(poolH), C.int32_t(poolW), C.int32_t(strideH), C.int32_t(strideW))
	})
}

// AddGlobalAveragePool2D appends GlobalAveragePooling2D: (height, width, channels) -> (channels).
func (m *Model) AddGlobalAveragePool2D() error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status { return C.kx_model_add_global_average_pool2d(m.p) })
}

// AddZeroPadding2D appends ZeroPadding2D.
func (m *Model) AddZeroPadding2D(top, bottom, left, right int) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status {
		return C.kx_model_add_zero_padding2d(m.p, C.int32_t(top), C.int32_t(bottom), C.int32_t(left), C.int32_t(right))
	})
}

// AddBatchNorm appends BatchNormalization over the last axis (Keras: momentum 0.99, epsilon 1e-3).
func (m *Model) AddBatchNorm(momentum, epsilon float32) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status { return C.kx_model_add_batch_norm(m.p, C.float(momentum), C.float(epsilon)) })
}

// AddNormalization appends keras.layers.Normalization(mean, variance) over the last axis: one value per
// channel, or one for every channel (Dataset.FeatureMoments finds them).
func (m *Model) AddNormalization(mean, variance []float32) error {
	defer runtime.KeepAlive(m)
	if len(mean) != len(variance) || len(mean) == 0 {
		return invalid("AddNormalization: %d means and %d variances (at least one each, as many)", len(mean), len(variance))
	}
	return callErr(func() C.kx_status {
		return C.kx_model_add_normalization(m.p, (*C.float)(&mean[0]), (*C.float)(&variance[0]), C.size_t(len(mean)))
	})
}

// AddActivation appends an Activation layer.
func (m *Model) AddActivation(act Activation) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status { return C.kx_model_add_activation(m.p, C.kx_activation(act)) })
}

// NewResNet50 builds keras.applications.ResNet50's architecture (uncompiled) for inputs of
// (height, width, channels).
func NewResNet50(s *Strategy, height, width, channels int64, includeTop bool, classes int64) (*Model, error) {
	defer runtime.KeepAlive(s)
	shape := [3]int64{height, width, channels}
	top := C.int32_t(0)
	if includeTop {
		top = 1
	}
	var p *C.kx_model
	err := callErr(func() C.kx_status {
		return C.kx_model_create_resnet50(s.p, (*C.int64_t)(&shape[0]), top, C.int64_t(classes), &p)
	})
	if err != nil {
		return nil, err
	}
	return newModel(p), nil
}

// LayerNames lists the model's layers in order.
func (m *Model) LayerNames() ([]string, error) {
	defer runtime.KeepAlive(m)
	n := int64(C.kx_model_num_layers(m.p))
	names := make([]string, 0, n)
	for i := int64(0); i < n; i++ {
		var out *C.char
		if err := callErr(func() C.kx_status { return C.kx_model_layer_name(m.p, C.int64_t(i), &out) }); err != nil {
			return nil, err
		}
		names = append(names, C.GoString(out))
		C.kx_free(unsafe.Pointer(out))
	}
	return names, nil
}

// SetTrainable freezes (false) or unfreezes a layer by name.
func (m *Model) SetTrainable(layer string, trainable bool) error {
	defer runtime.KeepAlive(m)
	c := C.CString(layer)
	defer C.free(unsafe.Pointer(c))
	t := C.int32_t(0)
	if trainable {
		t = 1
	}
	return callErr(func() C.kx_status { return C.kx_model_set_trainable(m.p, c, t) })
}

// NumTrainableParams is the number of weights the optimizer trains now.
func (m *Model) NumTrainableParams() int64 { return int64(C.kx_model_num_trainable_params(m.p)) }

// LoadWeights copies weights by name from a safetensors file; with skipMismatch, weights the file
// lacks or holds with another shape keep their values. It returns how many were loaded and skipped.
func (m *Model) LoadWeights(path string, skipMismatch bool) (loaded, skipped int64, err error) {
	defer runtime.KeepAlive(m)
	c := C.CString(path)
	defer C.free(unsafe.Pointer(c))
	flags := C.uint32_t(0)
	if skipMismatch {
		flags = C.KX_LOAD_WEIGHTS_SKIP_MISMATCH
	}
	var l, s C.int64_t
	err = callErr(func() C.kx_status { return C.kx_model_load_weights(m.p, c, flags, &l, &s) })
	return int64(l), int64(s), err
}
