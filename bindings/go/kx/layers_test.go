package kx

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// layerCase: the input shape, the layer, and whether it reads the input twice (a merge).
type layerCase struct {
	shape []int64
	layer Layer
	merge bool
}

// One case per class kx lists: a layer kx adds is tested here by adding its case.
var layerCases = map[string]layerCase{
	"Dense":                  {[]int64{4}, NewLayer("Dense", Config{"units": 3, "activation": "relu"}), false},
	"Flatten":                {[]int64{2, 3}, NewLayer("Flatten", nil), false},
	"Dropout":                {[]int64{4}, NewLayer("Dropout", Config{"rate": 0.5}), false},
	"Conv2D":                 {[]int64{5, 5, 2}, NewLayer("Conv2D", Config{"filters": 3, "kernel_size": []int{3, 3}, "padding": "same"}), false},
	"MaxPooling2D":           {[]int64{4, 4, 2}, NewLayer("MaxPooling2D", Config{"pool_size": 2}), false},
	"AveragePooling2D":       {[]int64{4, 4, 2}, NewLayer("AveragePooling2D", Config{"pool_size": []int{2, 2}}), false},
	"GlobalAveragePooling2D": {[]int64{4, 4, 2}, NewLayer("GlobalAveragePooling2D", nil), false},
	"ZeroPadding2D":          {[]int64{3, 3, 1}, NewLayer("ZeroPadding2D", Config{"padding": [][]int{{1, 0}, {0, 2}}}), false},
	"Normalization":          {[]int64{3}, NewLayer("Normalization", Config{"mean": []float64{1, 2, 3}, "variance": []float64{1, 4, 9}}), false},
	"BatchNormalization":     {[]int64{3}, NewLayer("BatchNormalization", Config{"epsilon": 1e-3}), false},
	"Add":                    {[]int64{4}, NewLayer("Add", nil), true},
	"Concatenate":            {[]int64{4}, NewLayer("Concatenate", Config{"axis": -1}), true},
	"Activation":             {[]int64{4}, NewLayer("Activation", Config{"activation": "tanh"}), false},
	"ReLU":                   {[]int64{2, 3}, NewLayer("ReLU", Config{"max_value": 6.0}), false},
	"DepthwiseConv2D":        {[]int64{5, 5, 2}, NewLayer("DepthwiseConv2D", Config{"kernel_size": 3, "padding": "same", "depth_multiplier": 2}), false},
	"Rescaling":              {[]int64{4}, NewLayer("Rescaling", Config{"scale": 0.5, "offset": -1.0}), false},
	"Reshape":                {[]int64{6}, NewLayer("Reshape", Config{"target_shape": []int{2, -1}}), false},
	"LeakyReLU":              {[]int64{2, 3}, NewLayer("LeakyReLU", Config{"negative_slope": 0.1}), false},
	"GlobalMaxPooling2D":     {[]int64{4, 3, 2}, NewLayer("GlobalMaxPooling2D", nil), false},
	"LayerNormalization":     {[]int64{2, 3}, NewLayer("LayerNormalization", Config{"epsilon": 1e-6}), false},
	"MultiHeadAttention":     {[]int64{4, 3}, NewLayer("MultiHeadAttention", Config{"num_heads": 2, "key_dim": 2}), true},
	"Conv1D":                 {[]int64{6, 2}, NewLayer("Conv1D", Config{"filters": 3, "kernel_size": 3, "padding": "causal"}), false},
	"MaxPooling1D":           {[]int64{6, 2}, NewLayer("MaxPooling1D", Config{"pool_size": 2}), false},
	"AveragePooling1D":       {[]int64{6, 2}, NewLayer("AveragePooling1D", Config{"pool_size": 3}), false},
	"GlobalAveragePooling1D": {[]int64{6, 2}, NewLayer("GlobalAveragePooling1D", nil), false},
	"SeparableConv2D":        {[]int64{5, 5, 2}, NewLayer("SeparableConv2D", Config{"filters": 3, "kernel_size": 3, "padding": "same"}), false},
	"Conv2DTranspose":        {[]int64{3, 3, 2}, NewLayer("Conv2DTranspose", Config{"filters": 2, "kernel_size": 3, "strides": 2}), false},
	"UpSampling2D":           {[]int64{3, 3, 2}, NewLayer("UpSampling2D", Config{"interpolation": "bilinear"}), false},
	"Multiply":               {[]int64{4}, NewLayer("Multiply", nil), true},
	"TensorOperation":        {[]int64{4}, NewLayer("TensorOperation", Config{"operation": "Multiply", "arguments": []any{nil, 2.0}}), false},
	"Embedding":              {[]int64{5}, NewLayer("Embedding", Config{"input_dim": 6, "output_dim": 3, "mask_zero": true}), false},
	"LSTM":                   {[]int64{4, 3}, NewLayer("LSTM", Config{"units": 2, "return_sequences": true}), false},
	"GRU":                    {[]int64{4, 3}, NewLayer("GRU", Config{"units": 2}), false},
	"Bidirectional":          {[]int64{4, 3}, NewLayer("Bidirectional", Config{"layer": Config{"class_name": "LSTM", "config": Config{"units": 2}}}), false},
	"Masking":                {[]int64{4, 3}, NewLayer("Masking", Config{"mask_value": 0.5}), false},
}

// Layers without an ONNX form (none today): their export fails with ErrUnsupported.
var notExportable = map[string]bool{}

func TestEveryListedLayerBuildsPredictsAndExports(t *testing.T) {
	s, err := NewDefaultStrategy()
	must(t, err)
	defer s.Close()
	classes := LayerClasses()
	var want []string
	for c := range layerCases {
		want = append(want, c)
	}
	sort.Strings(want)
	got := append([]string(nil), classes...)
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("kx lists %v, the cases cover %v", got, want)
	}
	dir := t.TempDir()
	for _, cls := range classes {
		c := layerCases[cls]
		m, err := NewFunctional(s, "", c.shape...)
		must(t, err)
		inputs := []string{"input_layer"}
		if c.merge {
			inputs = append(inputs, "input_layer")
		}
		if _, err := m.Call(c.layer, inputs...); err != nil {
			t.Fatalf("%s: %v", cls, err)
		}
		must(t, m.Compile(CompileOptions{Loss: MeanSquaredError}))
		x := make([]float32, 2*m.InputSize())
		out, err := m.Predict(x, 2)
		must(t, err)
		if int64(len(out)) != 2*m.OutputSize() {
			t.Errorf("%s: %d outputs", cls, len(out))
		}
		path := filepath.Join(dir, cls+".onnx")
		if notExportable[cls] {
			var e *Error
			if err := m.ExportONNX(path); !errors.As(err, &e) || e.Code != ErrUnsupported {
				t.Errorf("%s: ONNX export gave %v, want ErrUnsupported", cls, err)
			}
			m.Close()
			continue
		}
		must(t, m.ExportONNX(path))
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("%s: no ONNX file", cls)
		}
		m.Close()
	}
}

func TestSequentialAndFunctionalFromLayers(t *testing.T) {
	s, err := NewDefaultStrategy()
	must(t, err)
	defer s.Close()
	seq, err := Sequential(s, []int64{28, 28}, NewLayer("Flatten", nil),
		NewLayer("Dense", Config{"units": 16, "activation": "relu"}), NewLayer("Dense", Config{"units": 10}))
	must(t, err)
	defer seq.Close()
	if seq.NumParams() != 784*16+16+16*10+10 {
		t.Errorf("params %d", seq.NumParams())
	}
	f, err := NewFunctional(s, "features", 6)
	must(t, err)
	defer f.Close()
	h, err := f.Call(NewLayer("Dense", Config{"units": 6}), "features")
	must(t, err)
	sum, err := f.Call(NewLayer("Add", nil), "features", h)
	must(t, err)
	if h != "dense" || sum != "add" {
		t.Errorf("names %q %q", h, sum)
	}
	_, err = f.Call(NewLayer("NoSuchLayer", nil))
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrInvalidArgument || !strings.Contains(e.Message, "NoSuchLayer") {
		t.Errorf("unknown class: %v", err)
	}
	if _, err := f.Call(NewLayer("Dense", Config{"units": 2}), "nowhere"); err == nil {
		t.Error("an unknown input was accepted")
	}
}
