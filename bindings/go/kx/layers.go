package kx

/*
#include <stdlib.h>
#include <kx/kx.h>
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"unsafe"
)

// Layer is a Keras layer as its config, the way keras.layers.serialize writes it: any class kx has
// (LayerClasses lists them), settings by their Keras names, those left out at Keras's defaults:
//
//	kx.NewLayer("Dense", kx.Config{"units": 10, "activation": "softmax"})
//
// kx checks the settings when the layer is added. A layer kx adds later needs nothing new here.
type Layer struct {
	Class  string
	Config Config
}

// Config holds a layer's Keras settings; values are what encoding/json writes as JSON (numbers,
// strings, bools, nil, slices such as []int{3, 3}).
type Config map[string]any

// NewLayer is Layer{class, config}.
func NewLayer(class string, config Config) Layer { return Layer{Class: class, Config: config} }

// JSON is the layer as kx_model_add_layer reads it.
func (l Layer) JSON() (string, error) {
	config := l.Config
	if config == nil {
		config = Config{}
	}
	b, err := json.Marshal(struct {
		Class  string `json:"class_name"`
		Config Config `json:"config"`
	}{l.Class, config})
	if err != nil {
		return "", invalid("layer %s: %v", l.Class, err)
	}
	return string(b), nil
}

// LayerClasses are the Keras class names of the layers kx has.
func LayerClasses() []string {
	var names []string
	for i := 0; ; i++ {
		name := C.kx_layer_class_name(C.size_t(i))
		if name == nil {
			return names
		}
		names = append(names, C.GoString(name))
	}
}

// NewFunctional makes an empty Functional model whose input, named inputName ("" is Keras's
// "input_layer"), has samples of inputShape. Layers are added with Call, each reading the input or
// earlier layers by name; the last layer added is the output.
func NewFunctional(s *Strategy, inputName string, inputShape ...int64) (*Model, error) {
	defer runtime.KeepAlive(s)
	if len(inputShape) == 0 {
		return nil, invalid("NewFunctional: the input shape needs at least one dimension")
	}
	var name *C.char
	if inputName != "" {
		name = C.CString(inputName)
		defer C.free(unsafe.Pointer(name))
	}
	var p *C.kx_model
	err := callErr(func() C.kx_status {
		return C.kx_model_create_functional(s.p, (*C.int64_t)(&inputShape[0]), C.size_t(len(inputShape)), name, &p)
	})
	if err != nil {
		return nil, err
	}
	return newModel(p), nil
}

// Sequential makes a Sequential model for samples of inputShape with these layers, as
// keras.Sequential([keras.Input(shape), layers...]).
func Sequential(s *Strategy, inputShape []int64, layers ...Layer) (*Model, error) {
	m, err := NewSequential(s, inputShape...)
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		if _, err := m.Add(l); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

// Add appends l reading the last layer (or the input), as Sequential.add; returns its name.
func (m *Model) Add(l Layer) (string, error) { return m.Call(l) }

// Call adds l reading the named layers (or the input's name), as a Keras functional call
// y = layer(x); returns the layer's name, which later calls read. With no inputs it reads the last
// layer added.
func (m *Model) Call(l Layer, inputs ...string) (string, error) {
	defer runtime.KeepAlive(m)
	text, err := l.JSON()
	if err != nil {
		return "", err
	}
	config := C.CString(text)
	defer C.free(unsafe.Pointer(config))
	names := make([]*C.char, len(inputs)+1) // C memory for each name; one more so &names[0] exists
	for i, in := range inputs {
		names[i] = C.CString(in)
		defer C.free(unsafe.Pointer(names[i]))
	}
	cnames := (**C.char)(C.malloc(C.size_t(len(names)) * C.size_t(unsafe.Sizeof(names[0]))))
	defer C.free(unsafe.Pointer(cnames))
	copy(unsafe.Slice(cnames, len(names)), names)
	var out *C.char
	err = callErr(func() C.kx_status {
		return C.kx_model_add_layer(m.p, config, cnames, C.size_t(len(inputs)), &out)
	})
	if err != nil {
		return "", err
	}
	defer C.kx_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}
