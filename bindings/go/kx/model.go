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

// Activation of a layer.
type Activation int

const (
	Linear Activation = iota
	ReLU
	Sigmoid
	Tanh
	Softmax
)

// Padding of a convolution.
type Padding int

const (
	Valid Padding = iota
	Same
)

// LayerFlags change how AddDenseFlags and AddConv2DFlags build a layer; 0 builds it as AddDense and
// AddConv2D do.
type LayerFlags uint32

// LayerNoBias leaves the bias out (Keras's use_bias=False): y = act(x W), e.g. before a BatchNormalization.
const LayerNoBias LayerFlags = C.KX_LAYER_NO_BIAS

// Optimizer and Loss of CompileOptions.
type Optimizer int

const (
	Adam Optimizer = iota
	SGD
	AdamW
	RMSprop
)

type Loss int

const (
	SparseCategoricalCrossentropy Loss = iota
	CategoricalCrossentropy
	BinaryCrossentropy
	MeanSquaredError
	MeanAbsoluteError
	Huber
)

// CompileOptions are Keras's compile arguments; zero values mean kx's (Keras's) defaults.
type CompileOptions struct {
	Optimizer             Optimizer
	LearningRate          float64
	Beta1, Beta2, Epsilon float64
	Momentum              float64
	Loss                  Loss
	FromLogits            bool
	Accuracy              bool // the "accuracy" metric
	Seed                  uint64
	// UseEMA keeps Keras's moving average of the trained weights, which replaces them when Fit ends;
	// EMAMomentum 0 means 0.99.
	UseEMA      bool
	EMAMomentum float64
	// ZeroIsValue: fields whose zero is meant rather than "the default" (ZeroBeta1 | ...), e.g. Beta1: 0
	// with ZeroBeta1 for β1 = 0, as Keras accepts.
	ZeroIsValue uint32
	// Precision: Keras's mixed-precision policy, PrecisionFloat32 (the zero value), PrecisionMixedBfloat16
	// or PrecisionMixedFloat16 (kx.h's KX_PRECISION_*).
	Precision int32
	// WeightDecay: AdamW's (0 means 0.004; ZeroWeightDecay for none). Rho and Centered: RMSprop's (Rho 0
	// means 0.9; ZeroRho for 0).
	WeightDecay float64
	Rho         float64
	Centered    bool
}

// Values of CompileOptions.Precision (kx.h's KX_PRECISION_*).
const (
	PrecisionFloat32       int32 = 0
	PrecisionMixedBfloat16 int32 = 1
	PrecisionMixedFloat16  int32 = 2
)

// Bits of CompileOptions.ZeroIsValue (kx.h's KX_COMPILE_ZERO_*).
const (
	ZeroLearningRate = 1
	ZeroBeta1        = 2
	ZeroBeta2        = 4
	ZeroEpsilon      = 8
	ZeroEMAMomentum  = 16
	ZeroWeightDecay  = 32
	ZeroRho          = 64
)

// FitOptions are Keras's fit arguments; zero values mean defaults (one epoch, a whole pass, silent).
type FitOptions struct {
	Epochs, InitialEpoch int
	StepsPerEpoch        int64
	Validation           *Dataset
	ValidationSteps      int64
	Verbose              int    // 0 silent, 1 progress bar, 2 one line per epoch
	ResumeFrom           string // a checkpoint file or directory
}

// History holds per-epoch metrics ("loss", "accuracy", "val_loss", "val_accuracy").
type History struct {
	Metrics map[string][]float64
	Stopped bool // a callback stopped training
}

// Model is a kx model.
type Model struct{ p *C.kx_model }

func newModel(p *C.kx_model) *Model {
	m := &Model{p}
	runtime.SetFinalizer(m, (*Model).Close)
	return m
}

// NewSequential makes an empty Sequential model for samples of inputShape (no batch dimension).
func NewSequential(s *Strategy, inputShape ...int64) (*Model, error) {
	defer runtime.KeepAlive(s)
	if len(inputShape) == 0 {
		return nil, invalid("NewSequential: the input shape needs at least one dimension")
	}
	var p *C.kx_model
	err := callErr(func() C.kx_status {
		return C.kx_model_create_sequential(s.p, (*C.int64_t)(&inputShape[0]), C.size_t(len(inputShape)), &p)
	})
	if err != nil {
		return nil, err
	}
	return newModel(p), nil
}

// ModelFromJSON builds a model from kx_model_to_json's JSON.
func ModelFromJSON(s *Strategy, config string) (*Model, error) {
	defer runtime.KeepAlive(s)
	c := C.CString(config)
	defer C.free(unsafe.Pointer(c))
	var p *C.kx_model
	if err := callErr(func() C.kx_status { return C.kx_model_from_json(s.p, c, &p) }); err != nil {
		return nil, err
	}
	return newModel(p), nil
}

// LoadModel reads a model saved with Save (or a checkpoint), compiled as it was.
func LoadModel(s *Strategy, path string) (*Model, error) {
	defer runtime.KeepAlive(s)
	c := C.CString(path)
	defer C.free(unsafe.Pointer(c))
	var p *C.kx_model
	if err := callErr(func() C.kx_status { return C.kx_model_load(s.p, c, &p) }); err != nil {
		return nil, err
	}
	return newModel(p), nil
}

// LoadKeras opens a Keras model file (.keras, or a legacy .h5 from model.save): compiled as Keras
// compiled it, optimizer state included, or uncompiled with its weights.
func LoadKeras(s *Strategy, path string) (*Model, error) {
	defer runtime.KeepAlive(s)
	c := C.CString(path)
	defer C.free(unsafe.Pointer(c))
	var p *C.kx_model
	if err := callErr(func() C.kx_status { return C.kx_model_load_keras(s.p, c, &p) }); err != nil {
		return nil, err
	}
	return newModel(p), nil
}

// NewApplication builds a keras.applications model by its Keras class name ("ResNet50",
// "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large", "EfficientNetB0") with its keyword arguments as a JSON object ("" for Keras's defaults), e.g.
// NewApplication(s, "MobileNetV2", `{"alpha": 0.35, "input_shape": [96, 96, 3], "classes": 10}`).
// Keras's layer names, so Keras's weight files load by name; uncompiled.
func NewApplication(s *Strategy, name, optionsJSON string) (*Model, error) {
	defer runtime.KeepAlive(s)
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var co *C.char
	if optionsJSON != "" {
		co = C.CString(optionsJSON)
		defer C.free(unsafe.Pointer(co))
	}
	var p *C.kx_model
	if err := callErr(func() C.kx_status { return C.kx_model_create_application(s.p, cn, co, &p) }); err != nil {
		return nil, err
	}
	return newModel(p), nil
}

func (m *Model) AddDense(units int64, act Activation) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status { return C.kx_model_add_dense(m.p, C.int64_t(units), C.kx_activation(act)) })
}

func (m *Model) AddConv2D(filters int64, kernelH, kernelW, stride int, pad Padding, act Activation) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status {
		return C.kx_model_add_conv2d(m.p, C.int64_t(filters), C.int32_t(kernelH), C.int32_t(kernelW), C.int32_t(stride),
			C.kx_padding(pad), C.kx_activation(act))
	})
}

// AddDenseFlags adds a Dense layer with LayerFlags (LayerNoBias).
func (m *Model) AddDenseFlags(units int64, act Activation, flags LayerFlags) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status {
		return C.kx_model_add_dense_flags(m.p, C.int64_t(units), C.kx_activation(act), C.uint32_t(flags))
	})
}

// AddConv2DFlags adds a Conv2D layer with LayerFlags (LayerNoBias).
func (m *Model) AddConv2DFlags(filters int64, kernelH, kernelW, stride int, pad Padding, act Activation, flags LayerFlags) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status {
		return C.kx_model_add_conv2d_flags(m.p, C.int64_t(filters), C.int32_t(kernelH), C.int32_t(kernelW),
			C.int32_t(stride), C.kx_padding(pad), C.kx_activation(act), C.uint32_t(flags))
	})
}

func (m *Model) AddMaxPool2D(poolH, poolW int) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status { return C.kx_model_add_max_pool2d(m.p, C.int32_t(poolH), C.int32_t(poolW)) })
}

func (m *Model) AddFlatten() error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status { return C.kx_model_add_flatten(m.p) })
}

func (m *Model) AddDropout(rate float32) error {
	defer runtime.KeepAlive(m)
	return callErr(func() C.kx_status { return C.kx_model_add_dropout(m.p, C.float(rate)) })
}

// Compile plans the training step and initialises the weights.
func (m *Model) Compile(o CompileOptions) error {
	defer runtime.KeepAlive(m)
	var co C.kx_compile_options
	C.kx_compile_options_init(&co, C.size_t(unsafe.Sizeof(co)))
	co.optimizer = C.kx_optimizer(o.Optimizer)
	co.learning_rate, co.beta1, co.beta2 = C.double(o.LearningRate), C.double(o.Beta1), C.double(o.Beta2)
	co.epsilon, co.momentum = C.double(o.Epsilon), C.double(o.Momentum)
	co.loss = C.kx_loss(o.Loss)
	if o.FromLogits {
		co.from_logits = 1
	}
	if o.Accuracy {
		co.metrics = C.KX_METRIC_ACCURACY
	}
	co.seed = C.uint64_t(o.Seed)
	if o.UseEMA {
		co.use_ema = 1
	}
	co.ema_momentum = C.double(o.EMAMomentum)
	co.zero_is_value = C.uint32_t(o.ZeroIsValue)
	co.precision = C.int32_t(o.Precision)
	co.weight_decay, co.rho = C.double(o.WeightDecay), C.double(o.Rho)
	if o.Centered {
		co.centered = 1
	}
	return callErr(func() C.kx_status { return C.kx_model_compile(m.p, &co) })
}

// NumParams is the number of trainable parameters.
func (m *Model) NumParams() int64 { return int64(C.kx_model_num_params(m.p)) }

// InputSize is the number of values Predict reads per sample.
func (m *Model) InputSize() int64 { return int64(C.kx_model_input_size(m.p)) }

// OutputSize is the number of values Predict gives per sample.
func (m *Model) OutputSize() int64 { return int64(C.kx_model_output_size(m.p)) }

// Weights are all parameters, layer by layer (kernel then bias).
func (m *Model) Weights() ([]float32, error) {
	defer runtime.KeepAlive(m)
	w := make([]float32, m.NumParams())
	if len(w) == 0 {
		return w, nil
	}
	err := callErr(func() C.kx_status {
		return C.kx_model_get_weights(m.p, (*C.float)(&w[0]), C.size_t(len(w)))
	})
	return w, err
}

// SetWeights replaces all parameters (len(w) == NumParams()).
func (m *Model) SetWeights(w []float32) error {
	defer runtime.KeepAlive(m)
	var ptr *C.float
	if len(w) > 0 {
		ptr = (*C.float)(&w[0])
	}
	return callErr(func() C.kx_status { return C.kx_model_set_weights(m.p, ptr, C.size_t(len(w))) })
}

// ToJSON is the model's architecture as Keras-like JSON.
func (m *Model) ToJSON() (string, error) {
	defer runtime.KeepAlive(m)
	var out *C.char
	if err := callErr(func() C.kx_status { return C.kx_model_to_json(m.p, &out) }); err != nil {
		return "", err
	}
	defer C.kx_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// Save writes the model (config, weights, optimizer state) to one safetensors file.
func (m *Model) Save(path string) error {
	defer runtime.KeepAlive(m)
	c := C.CString(path)
	defer C.free(unsafe.Pointer(c))
	return callErr(func() C.kx_status { return C.kx_model_save(m.p, c) })
}

// SaveKeras writes a .keras file that keras.models.load_model opens (config, weights, optimizer state).
func (m *Model) SaveKeras(path string) error {
	defer runtime.KeepAlive(m)
	c := C.CString(path)
	defer C.free(unsafe.Pointer(c))
	return callErr(func() C.kx_status { return C.kx_model_save_keras(m.p, c) })
}

// Fit trains the model. cb may be nil. A panic in a callback function is raised again here.
func (m *Model) Fit(train *Dataset, o FitOptions, cb *Callbacks) (*History, error) {
	defer keepAlive(m, train, o.Validation, cb)
	var fo C.kx_fit_options
	C.kx_fit_options_init(&fo, C.size_t(unsafe.Sizeof(fo)))
	fo.epochs, fo.initial_epoch = C.int32_t(o.Epochs), C.int32_t(o.InitialEpoch)
	fo.steps_per_epoch, fo.validation_steps = C.int64_t(o.StepsPerEpoch), C.int64_t(o.ValidationSteps)
	fo.verbose = C.int32_t(o.Verbose)
	if o.Validation != nil {
		fo.validation = o.Validation.p
	}
	if o.ResumeFrom != "" {
		fo.resume_from = C.CString(o.ResumeFrom)
		defer C.free(unsafe.Pointer(fo.resume_from))
	}
	var cp *C.kx_callbacks
	if cb != nil {
		cp = cb.p
	}
	var h *C.kx_history
	st, err := call(func() C.kx_status { return C.kx_fit(m.p, train.p, &fo, cp, &h) })
	if cb != nil {
		if p := cb.takePanic(); p != nil {
			if h != nil {
				C.kx_history_destroy(h)
			}
			panic(p)
		}
	}
	if err != nil {
		return nil, err
	}
	defer C.kx_history_destroy(h)
	hist := &History{Metrics: map[string][]float64{}, Stopped: st == Stopped}
	epochs := int(C.kx_history_epochs(h))
	for _, name := range []string{"loss", "accuracy", "val_loss", "val_accuracy"} {
		cname := C.CString(name)
		var values []float64
		for e := 0; e < epochs; e++ {
			var v C.double
			if C.kx_history_get(h, cname, C.int32_t(e), &v) != C.KX_OK {
				values = nil
				break
			}
			values = append(values, float64(v))
		}
		C.free(unsafe.Pointer(cname))
		if values != nil {
			hist.Metrics[name] = values
		}
	}
	return hist, nil
}

// Evaluate returns the loss and accuracy (NaN without the metric) over d.
func (m *Model) Evaluate(d *Dataset) (loss, accuracy float64, err error) {
	defer keepAlive(m, d)
	var l, a C.double
	err = callErr(func() C.kx_status { return C.kx_evaluate(m.p, d.p, &l, &a) })
	return float64(l), float64(a), err
}

// Predict returns OutputSize() values per sample for n samples of x.
func (m *Model) Predict(x []float32, n int64) ([]float32, error) {
	defer runtime.KeepAlive(m)
	out := make([]float32, n*m.OutputSize())
	if n == 0 {
		return out, nil
	}
	if n < 0 || int64(len(x)) != n*m.InputSize() {
		return nil, invalid("Predict: %d input values for %d samples of %d values", len(x), n, m.InputSize())
	}
	err := callErr(func() C.kx_status {
		return C.kx_predict(m.p, (*C.float)(&x[0]), C.int64_t(n), (*C.float)(&out[0]), C.size_t(len(out)))
	})
	return out, err
}

// Close releases the model; safe to call twice.
func (m *Model) Close() {
	if m.p != nil {
		C.kx_model_destroy(m.p)
		m.p = nil
		runtime.SetFinalizer(m, nil)
	}
}

// ExportONNX writes the model as an ONNX file (opset 13) for inference runtimes; its output equals
// Predict's.
func (m *Model) ExportONNX(path string) error {
	defer runtime.KeepAlive(m)
	c := C.CString(path)
	defer C.free(unsafe.Pointer(c))
	return callErr(func() C.kx_status { return C.kx_model_export_onnx(m.p, c) })
}
