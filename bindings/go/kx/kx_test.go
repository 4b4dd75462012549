package kx

import (
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// blobs: three separable clusters in 8 dimensions.
func blobs(n int, seed int64) ([]float32, []float32) {
	r := rand.New(rand.NewSource(seed))
	centres := make([]float32, 3*8)
	for i := range centres {
		centres[i] = float32(r.NormFloat64() * 3)
	}
	x, y := make([]float32, n*8), make([]float32, n)
	for i := 0; i < n; i++ {
		c := r.Intn(3)
		y[i] = float32(c)
		for j := 0; j < 8; j++ {
			x[i*8+j] = centres[c*8+j] + float32(r.NormFloat64()*0.5)
		}
	}
	return x, y
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func smallModel(t *testing.T, seed uint64) *Model {
	s, err := NewMirroredStrategy("cpu")
	must(t, err)
	defer s.Close()
	m, err := NewSequential(s, 8)
	must(t, err)
	must(t, m.AddDense(16, ReLU))
	must(t, m.AddDense(3, Softmax))
	must(t, m.Compile(CompileOptions{LearningRate: 0.01, Accuracy: true, Seed: seed}))
	return m
}

func dataset(t *testing.T, n int, batch int64) *Dataset {
	x, y := blobs(n, 1)
	d, err := DatasetFromArrays(x, []int64{int64(n), 8}, y, []int64{int64(n), 1})
	must(t, err)
	must(t, d.Batch(batch, false))
	return d
}

func TestTrainingLearnsAndPredicts(t *testing.T) {
	m := smallModel(t, 1)
	defer m.Close()
	d := dataset(t, 600, 32)
	defer d.Close()
	must(t, d.Shuffle(600, 3))
	h, err := m.Fit(d, FitOptions{Epochs: 5}, nil)
	must(t, err)
	loss := h.Metrics["loss"]
	if len(loss) != 5 || loss[4] >= loss[0] {
		t.Fatalf("loss did not fall over 5 epochs: %v", loss)
	}
	_, acc, err := m.Evaluate(d)
	must(t, err)
	if acc < 0.95 {
		t.Fatalf("accuracy %.3f", acc)
	}
	x, _ := blobs(10, 1)
	p, err := m.Predict(x, 10)
	must(t, err)
	for i := 0; i < 10; i++ {
		sum := p[i*3] + p[i*3+1] + p[i*3+2]
		if math.Abs(float64(sum)-1) > 1e-5 {
			t.Fatalf("row %d sums to %v", i, sum)
		}
	}
}

func TestWeightsSaveLoadAndJSON(t *testing.T) {
	m := smallModel(t, 1)
	defer m.Close()
	d := dataset(t, 200, 32)
	_, err := m.Fit(d, FitOptions{}, nil)
	must(t, err)
	w, err := m.Weights()
	must(t, err)
	if int64(len(w)) != m.NumParams() || m.NumParams() != 8*16+16+16*3+3 {
		t.Fatalf("%d weights, %d params", len(w), m.NumParams())
	}
	other := smallModel(t, 99)
	must(t, other.SetWeights(w))
	w2, _ := other.Weights()
	for i := range w {
		if w[i] != w2[i] {
			t.Fatal("SetWeights did not copy")
		}
	}
	path := filepath.Join(t.TempDir(), "m.kx")
	must(t, m.Save(path))
	s, _ := NewDefaultStrategy()
	loaded, err := LoadModel(s, path)
	must(t, err)
	w3, _ := loaded.Weights()
	for i := range w {
		if w[i] != w3[i] {
			t.Fatal("LoadModel changed the weights")
		}
	}
	js, err := m.ToJSON()
	must(t, err)
	again, err := ModelFromJSON(s, js)
	must(t, err)
	if again.NumParams() != m.NumParams() {
		t.Fatal("JSON round trip changed the model")
	}
}

func TestCallbacksStopAndCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cb, err := NewCallbacks()
	must(t, err)
	defer cb.Close()
	must(t, cb.AddModelCheckpoint(filepath.Join(dir, "epoch-{epoch:02d}.kx"), 0, 0))
	var batches int
	var saved []string
	// It counts batches and reads no metrics: it still sees every event.
	must(t, cb.AddFuncNoBatchMetrics(func(e Event) bool {
		switch e.Kind {
		case BatchEnd:
			batches++
		case CheckpointSaved:
			saved = append(saved, filepath.Base(e.Path))
		}
		return e.Kind == EpochEnd && e.Epoch == 1
	}))
	m := smallModel(t, 1)
	h, err := m.Fit(dataset(t, 320, 32), FitOptions{Epochs: 5}, cb)
	must(t, err)
	if !h.Stopped || len(h.Metrics["loss"]) != 2 || batches != 20 {
		t.Fatalf("stopped=%v epochs=%d batches=%d", h.Stopped, len(h.Metrics["loss"]), batches)
	}
	if strings.Join(saved, ",") != "epoch-01.kx,epoch-02.kx" {
		t.Fatalf("checkpoints %v", saved)
	}
	h2, err := smallModel(t, 1).Fit(dataset(t, 320, 32), FitOptions{Epochs: 3, ResumeFrom: dir}, nil)
	must(t, err)
	if len(h2.Metrics["loss"]) != 1 {
		t.Fatalf("resume ran %d epochs, want 1", len(h2.Metrics["loss"]))
	}
}

func TestAPanicInACallbackStopsFitAndIsRaisedAgain(t *testing.T) {
	cb, _ := NewCallbacks()
	defer cb.Close()
	must(t, cb.AddFunc(func(e Event) bool {
		if e.Kind == BatchEnd {
			panic("from the callback")
		}
		return false
	}))
	defer func() {
		if r := recover(); r != "from the callback" {
			t.Fatalf("recovered %v", r)
		}
	}()
	_, _ = smallModel(t, 1).Fit(dataset(t, 64, 8), FitOptions{Epochs: 2}, cb)
	t.Fatal("Fit returned after a panic")
}

// expectError checks that err is a *kx.Error with the code and a message containing want.
func expectError(t *testing.T, err error, code int, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *kx.Error with code %d, got %v", code, err)
	}
	if e.Code != code || !strings.Contains(e.Message, want) {
		t.Fatalf("want code %d and %q in the message, got %d: %q", code, want, e.Code, e.Message)
	}
}

func TestErrorsCarryTheCodeAndMessage(t *testing.T) {
	for code, want := range map[int]string{OK: "KX_OK", Stopped: "KX_STOPPED", ErrCorrupt: "KX_E_CORRUPT",
		ErrComm: "KX_E_COMM", ErrInternal: "KX_E_INTERNAL", -50: "KX_UNKNOWN_STATUS"} {
		if got := StatusName(code); got != want {
			t.Errorf("StatusName(%d) = %q, want %q", code, got, want)
		}
	}
	s, _ := NewDefaultStrategy()
	_, err := NewSequential(s, 0, 3)
	expectError(t, err, ErrInvalidArgument, "positive")
	_, err = NewMirroredStrategy("tpu:0")
	expectError(t, err, ErrInvalidArgument, "unknown device")
	m, _ := NewSequential(s, 8)
	expectError(t, m.AddDense(0, ReLU), ErrInvalidArgument, "units")
	must(t, m.AddDense(3, Softmax))
	_, err = m.Fit(dataset(t, 32, 8), FitOptions{}, nil)
	expectError(t, err, ErrMisuse, "compile")
	must(t, m.Compile(CompileOptions{}))
	x, _ := blobs(32, 1)
	bad := make([]float32, 32)
	for i := range bad {
		bad[i] = 7
	}
	d, _ := DatasetFromArrays(x, []int64{32, 8}, bad, []int64{32, 1})
	_, err = m.Fit(d, FitOptions{}, nil)
	expectError(t, err, ErrInvalidArgument, "label")
	expectError(t, m.SetWeights(make([]float32, 3)), ErrInvalidArgument, "set_weights needs")
	_, err = DatasetFromIDX("/nonexistent/a.gz", "/nonexistent/b.gz")
	expectError(t, err, ErrIO, "nonexistent")
	_, err = m.Predict(x[:5], 1)
	expectError(t, err, ErrInvalidArgument, "Predict")
	corrupt := filepath.Join(t.TempDir(), "bad.kx")
	must(t, os.WriteFile(corrupt, []byte("\x10\x00\x00\x00\x00\x00\x00\x00{}"), 0o644))
	_, err = LoadModel(s, corrupt)
	expectError(t, err, ErrCorrupt, "bad.kx")
	// Still usable after all of that.
	_, err = m.Fit(dataset(t, 32, 8), FitOptions{}, nil)
	must(t, err)
}

func TestCNNLayersFrozenLayersAndWeightsByName(t *testing.T) {
	s, _ := NewDefaultStrategy()
	cnn := func(classes int64) *Model {
		m, err := NewSequential(s, 8, 8, 2)
		must(t, err)
		must(t, m.AddZeroPadding2D(1, 1, 1, 1))
		must(t, m.AddConv2D(4, 3, 3, 1, Valid, Linear))
		must(t, m.AddBatchNorm(0.99, 1e-3))
		must(t, m.AddActivation(ReLU))
		must(t, m.AddAveragePool2D(2, 2, 0, 0))
		must(t, m.AddGlobalAveragePool2D())
		must(t, m.AddDense(classes, Softmax))
		must(t, m.Compile(CompileOptions{}))
		return m
	}
	m := cnn(3)
	defer m.Close()
	names, err := m.LayerNames()
	must(t, err)
	if len(names) != 7 || names[2] != "batch_normalization" {
		t.Fatalf("layer names %v", names)
	}
	must(t, m.SetTrainable("conv2d", false))
	if m.NumTrainableParams() != 4*2+4*3+3 {
		t.Fatalf("%d trainable parameters", m.NumTrainableParams())
	}
	x, y := make([]float32, 32*128), make([]float32, 32)
	for i := range x {
		x[i] = float32(i%11) / 11
	}
	for i := range y {
		y[i] = float32(i % 3)
	}
	d, err := DatasetFromArrays(x, []int64{32, 8, 8, 2}, y, []int64{32})
	must(t, err)
	_, err = m.Fit(d, FitOptions{}, nil)
	must(t, err)
	path := filepath.Join(t.TempDir(), "base.kx")
	must(t, m.Save(path))
	other := cnn(5)
	defer other.Close()
	if _, _, err := other.LoadWeights(path, false); err == nil {
		t.Fatal("a mismatched head loaded without skipping")
	}
	loaded, skipped, err := other.LoadWeights(path, true)
	must(t, err)
	if loaded != 6 || skipped != 2 {
		t.Fatalf("loaded %d, skipped %d", loaded, skipped)
	}
	r, err := NewResNet50(s, 224, 224, 3, true, 1000)
	must(t, err)
	defer r.Close()
	if r.NumParams() != 25636712 {
		t.Fatalf("ResNet50 has %d parameters", r.NumParams())
	}
}

func TestLayersWithoutBiasCountLikeKerasAndTrain(t *testing.T) {
	s, _ := NewDefaultStrategy()
	m, err := NewSequential(s, 784)
	must(t, err)
	defer m.Close()
	expectError(t, m.AddDenseFlags(10, Softmax, 2), ErrInvalidArgument, "flags")
	must(t, m.AddDenseFlags(10, Softmax, LayerNoBias))
	if m.NumParams() != 7840 { // Keras: Dense(10, use_bias=False) on 784 inputs
		t.Fatalf("NumParams %d", m.NumParams())
	}
	js, err := m.ToJSON()
	must(t, err)
	if !strings.Contains(js, `"use_bias": false`) {
		t.Fatalf("no use_bias false in %s", js)
	}
	cnn, err := NewSequential(s, 8, 8, 2)
	must(t, err)
	defer cnn.Close()
	must(t, cnn.AddConv2DFlags(4, 3, 3, 1, Same, Linear, LayerNoBias))
	must(t, cnn.AddBatchNorm(0.99, 1e-3))
	must(t, cnn.AddActivation(ReLU))
	must(t, cnn.AddGlobalAveragePool2D())
	must(t, cnn.AddDenseFlags(3, Softmax, 0))
	if cnn.NumParams() != 3*3*2*4+4*4+4*3+3 {
		t.Fatalf("NumParams %d", cnn.NumParams())
	}
	must(t, cnn.Compile(CompileOptions{}))
	x, y := make([]float32, 16*128), make([]float32, 16)
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	for i := range y {
		y[i] = float32(i % 3)
	}
	d, err := DatasetFromArrays(x, []int64{16, 8, 8, 2}, y, []int64{16})
	must(t, err)
	defer d.Close()
	_, err = cnn.Fit(d, FitOptions{}, nil)
	must(t, err)
}

func TestNormalizationFromTheDataAndAMovingAverageOfTheWeights(t *testing.T) {
	d := dataset(t, 600, 32)
	defer d.Close()
	mean, variance, err := d.FeatureMoments(8)
	must(t, err)
	x, _ := blobs(600, 1)
	for c := 0; c < 8; c++ { // against float64 sums in Go
		var m, v float64
		for i := c; i < len(x); i += 8 {
			m += float64(x[i]) / 600
		}
		for i := c; i < len(x); i += 8 {
			v += (float64(x[i]) - m) * (float64(x[i]) - m) / 600
		}
		if math.Abs(float64(mean[c])-m) > 1e-4*math.Max(1, math.Abs(m)) || math.Abs(float64(variance[c])-v) > 1e-4*v {
			t.Fatalf("channel %d: got %v, %v; want %v, %v", c, mean[c], variance[c], m, v)
		}
	}
	_, _, err = d.FeatureMoments(3)
	expectError(t, err, ErrInvalidArgument, "per channel")
	s, err := NewDefaultStrategy()
	must(t, err)
	defer s.Close()
	m, err := NewSequential(s, 8)
	must(t, err)
	defer m.Close()
	expectError(t, m.AddNormalization(mean, variance[:2]), ErrInvalidArgument, "variances")
	must(t, m.AddNormalization(mean, variance))
	must(t, m.AddDense(3, Softmax))
	if m.NumParams() != 16+8*3+3 {
		t.Fatalf("NumParams %d", m.NumParams())
	}
	must(t, m.Compile(CompileOptions{LearningRate: 0.01, Accuracy: true, UseEMA: true, EMAMomentum: 0.5}))
	_, err = m.Fit(d, FitOptions{Epochs: 3}, nil)
	must(t, err)
	_, acc, err := m.Evaluate(d)
	must(t, err)
	if acc < 0.95 {
		t.Fatalf("accuracy %.3f", acc)
	}
}

func TestTensorBoardAndONNXExport(t *testing.T) {
	m := smallModel(t, 4)
	defer m.Close()
	d := dataset(t, 64, 16)
	defer d.Close()
	dir := t.TempDir()
	cb, err := NewCallbacks()
	must(t, err)
	defer cb.Close()
	if err := cb.AddTensorBoard(dir, -1, 0); err == nil {
		t.Fatal("a negative update frequency was accepted")
	}
	must(t, cb.AddTensorBoard(dir, 0, 0))
	_, err = m.Fit(d, FitOptions{Epochs: 2}, cb)
	must(t, err)
	if files, _ := filepath.Glob(filepath.Join(dir, "train", "events.out.tfevents.*")); len(files) != 1 {
		t.Fatalf("TensorBoard files: %v", files)
	}
	path := filepath.Join(dir, "model.onnx")
	must(t, m.ExportONNX(path))
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("no ONNX file: %v", err)
	}
}

// A dataset passed as a temporary stays alive through Fit even when callbacks run the collector (its
// finalizer would free the C dataset while kx_fit reads it).
func TestFitKeepsItsArgumentsAliveWhileCallbacksCollect(t *testing.T) {
	cb, err := NewCallbacks()
	must(t, err)
	defer cb.Close()
	must(t, cb.AddFuncNoBatchMetrics(func(e Event) bool {
		runtime.GC()
		return false
	}))
	m := smallModel(t, 1)
	h, err := m.Fit(dataset(t, 320, 32), FitOptions{Epochs: 3}, cb)
	must(t, err)
	if len(h.Metrics["loss"]) != 3 {
		t.Fatalf("%d epochs", len(h.Metrics["loss"]))
	}
}

// A keras.applications model by name: MobileNetV2 at alpha 0.35 on 96x96 images with 10 classes and
// EfficientNetB0 on 32x32 images with 4 classes have Keras's weights; an unknown application is an error.
func TestApplicationsByKerasName(t *testing.T) {
	s, err := NewMirroredStrategy("cpu")
	must(t, err)
	defer s.Close()
	m, err := NewApplication(s, "MobileNetV2", `{"alpha": 0.35, "input_shape": [96, 96, 3], "classes": 10}`)
	must(t, err)
	defer m.Close()
	if n := m.NumParams(); n != 423018 {
		t.Fatalf("MobileNetV2(alpha=0.35, 96x96, 10 classes) has %d weights, Keras has 423018", n)
	}
	e, err := NewApplication(s, "EfficientNetB0", `{"input_shape": [32, 32, 3], "classes": 4}`)
	must(t, err)
	defer e.Close()
	// Keras's count_params() is 4,054,695: it also counts Normalization's adapt() sample count.
	if n := e.NumParams(); n != 4054694 {
		t.Fatalf("EfficientNetB0(32x32, 4 classes) has %d weights, Keras has 4054694 and a count", n)
	}
	if _, err := NewApplication(s, "NoSuchNet", ""); err == nil {
		t.Fatal("an unknown application was accepted")
	}
}
