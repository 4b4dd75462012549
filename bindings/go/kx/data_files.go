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

// DatasetFromNPY reads x and y from numpy .npy files (float32, float64, uint8, int32, int64; C order).
func DatasetFromNPY(xPath, yPath string) (*Dataset, error) {
	x, y := C.CString(xPath), C.CString(yPath)
	defer C.free(unsafe.Pointer(x))
	defer C.free(unsafe.Pointer(y))
	var p *C.kx_dataset
	if err := callErr(func() C.kx_status { return C.kx_dataset_from_npy(x, y, &p) }); err != nil {
		return nil, err
	}
	return newDataset(p), nil
}

// DatasetFromCSV reads a CSV file with a header row: the column named labelColumn is y, the others x.
func DatasetFromCSV(path, labelColumn string) (*Dataset, error) {
	cp, cl := C.CString(path), C.CString(labelColumn)
	defer C.free(unsafe.Pointer(cp))
	defer C.free(unsafe.Pointer(cl))
	var p *C.kx_dataset
	if err := callErr(func() C.kx_status { return C.kx_dataset_from_csv(cp, cl, &p) }); err != nil {
		return nil, err
	}
	return newDataset(p), nil
}

// DatasetFromImageDirectory is Keras's image_dataset_from_directory: one subfolder per class (labels in
// sorted order), JPEG and PNG files decoded batch by batch, resized bilinearly to height x width with
// `channels` channels and scaled to [0, 1].
func DatasetFromImageDirectory(dir string, height, width, channels int64) (*Dataset, error) {
	cd := C.CString(dir)
	defer C.free(unsafe.Pointer(cd))
	var p *C.kx_dataset
	err := callErr(func() C.kx_status {
		return C.kx_dataset_from_image_directory(cd, C.int64_t(height), C.int64_t(width), C.int64_t(channels), &p)
	})
	if err != nil {
		return nil, err
	}
	return newDataset(p), nil
}

// ClassNames are an image folder's classes (label i is ClassNames()[i]); empty for other datasets.
func (d *Dataset) ClassNames() ([]string, error) {
	defer runtime.KeepAlive(d)
	n := int64(C.kx_dataset_num_classes(d.p))
	names := make([]string, 0, n)
	for i := int64(0); i < n; i++ {
		var name *C.char
		if err := callErr(func() C.kx_status { return C.kx_dataset_class_name(d.p, C.int64_t(i), &name) }); err != nil {
			return nil, err
		}
		names = append(names, C.GoString(name))
	}
	return names, nil
}

// NumSkipped is the number of an image folder's files left out because they did not decode.
func (d *Dataset) NumSkipped() int64 { return int64(C.kx_dataset_num_skipped(d.p)) }

// Cache keeps decoded samples after their first decode: in memory for "", else in the file at path
// (reused by a later run made from the same files).
func (d *Dataset) Cache(path string) error {
	defer runtime.KeepAlive(d)
	if path == "" {
		return callErr(func() C.kx_status { return C.kx_dataset_cache(d.p, nil) })
	}
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	return callErr(func() C.kx_status { return C.kx_dataset_cache(d.p, cp) })
}

// Prefetch decodes that many batches ahead of the step on a background thread.
func (d *Dataset) Prefetch(batches int32) error {
	defer runtime.KeepAlive(d)
	return callErr(func() C.kx_status { return C.kx_dataset_prefetch(d.p, C.int32_t(batches)) })
}

// RandomFlip is Keras's RandomFlip("horizontal", seed) on every image sample as it is read.
func (d *Dataset) RandomFlip(seed uint64) error {
	defer runtime.KeepAlive(d)
	return callErr(func() C.kx_status { return C.kx_dataset_random_flip(d.p, C.uint64_t(seed)) })
}

// RandomCrop is Keras's RandomCrop(height, width, seed) on every image sample as it is read.
func (d *Dataset) RandomCrop(height, width int64, seed uint64) error {
	defer runtime.KeepAlive(d)
	return callErr(func() C.kx_status {
		return C.kx_dataset_random_crop(d.p, C.int64_t(height), C.int64_t(width), C.uint64_t(seed))
	})
}
