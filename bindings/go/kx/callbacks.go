package kx

/*
#include <stdint.h>
#include <stdlib.h>
#include <kx/kx.h>
kx_status kx_go_add_function(kx_callbacks* c, uintptr_t handle, uint32_t flags);
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// EventKind says when a callback is called.
type EventKind int

const (
	TrainBegin EventKind = iota
	EpochBegin
	BatchEnd
	EpochEnd
	TrainEnd
	CheckpointSaved
)

// Event is what a callback sees; metrics not known at that event are NaN, counters -1.
type Event struct {
	Kind                 EventKind
	Epoch                int
	Step, StepsPerEpoch  int64
	GlobalStep           int64
	Loss, Accuracy       float64
	ValLoss, ValAccuracy float64
	// BatchEnd: this batch's own loss and accuracy (NaN unless the callback reads batch metrics).
	BatchLoss, BatchAccuracy float64
	Path                     string // CheckpointSaved: the file written
}

// CallbackFunc returns true to stop training (Fit then reports History.Stopped).
type CallbackFunc func(Event) bool

// Callbacks is a list of Keras-like callbacks for Fit.
type Callbacks struct {
	p        *C.kx_callbacks
	handles  []cgo.Handle
	panicked interface{} // a panic of a CallbackFunc, raised again by Fit
}

// NewCallbacks makes an empty list.
func NewCallbacks() (*Callbacks, error) {
	var p *C.kx_callbacks
	if err := callErr(func() C.kx_status { return C.kx_callbacks_create(&p) }); err != nil {
		return nil, err
	}
	c := &Callbacks{p: p}
	runtime.SetFinalizer(c, (*Callbacks).Close)
	return c, nil
}

// AddModelCheckpoint is Keras's ModelCheckpoint: pathTemplate may use {epoch:02d}, {step}, {loss},
// {val_loss}; everyNBatches 0 saves at each epoch end; keepLast > 0 keeps that many newest files.
func (c *Callbacks) AddModelCheckpoint(pathTemplate string, everyNBatches int64, keepLast int) error {
	defer runtime.KeepAlive(c)
	t := C.CString(pathTemplate)
	defer C.free(unsafe.Pointer(t))
	return callErr(func() C.kx_status {
		return C.kx_callbacks_add_model_checkpoint(c.p, t, C.int64_t(everyNBatches), C.int32_t(keepLast))
	})
}

// AddEarlyStopping is Keras's EarlyStopping on monitor ("val_loss", "loss", ...).
func (c *Callbacks) AddEarlyStopping(monitor string, patience int, minDelta float64, restoreBestWeights bool) error {
	defer runtime.KeepAlive(c)
	m := C.CString(monitor)
	defer C.free(unsafe.Pointer(m))
	restore := C.int32_t(0)
	if restoreBestWeights {
		restore = 1
	}
	return callErr(func() C.kx_status {
		return C.kx_callbacks_add_early_stopping(c.p, m, C.int32_t(patience), C.double(minDelta), restore)
	})
}

// AddFunc adds a Go function. A panic in it stops training, and Fit panics with it again.
func (c *Callbacks) AddFunc(fn CallbackFunc) error { return c.addFunc(fn, 0) }

// AddFuncNoBatchMetrics adds a Go function that does not read the Loss or Accuracy of BatchEnd
// events (it acts on epochs, or counts steps): a fit on a GPU then need not wait for each step's loss,
// and those events carry the latest values read, which may be some batches old.
func (c *Callbacks) AddFuncNoBatchMetrics(fn CallbackFunc) error {
	defer runtime.KeepAlive(c)
	return c.addFunc(fn, C.KX_CALLBACK_NO_BATCH_METRICS)
}

func (c *Callbacks) addFunc(fn CallbackFunc, flags C.uint32_t) error {
	defer runtime.KeepAlive(c)
	h := cgo.NewHandle(callbackEntry{fn: fn, owner: c})
	if err := callErr(func() C.kx_status { return C.kx_go_add_function(c.p, C.uintptr_t(h), flags) }); err != nil {
		h.Delete()
		return err
	}
	c.handles = append(c.handles, h)
	return nil
}

type callbackEntry struct {
	fn    CallbackFunc
	owner *Callbacks
}

//export kxGoCallback
func kxGoCallback(ev *C.kx_event, user unsafe.Pointer) C.int32_t {
	entry := cgo.Handle(uintptr(user)).Value().(callbackEntry)
	if entry.owner.panicked != nil {
		return 1
	}
	e := Event{Kind: EventKind(ev.kind), Epoch: int(ev.epoch), Step: int64(ev.step),
		StepsPerEpoch: int64(ev.steps_per_epoch), GlobalStep: int64(ev.global_step), Loss: float64(ev.loss),
		Accuracy: float64(ev.accuracy), ValLoss: float64(ev.val_loss), ValAccuracy: float64(ev.val_accuracy),
		BatchLoss: float64(ev.batch_loss), BatchAccuracy: float64(ev.batch_accuracy)}
	if ev.path != nil {
		e.Path = C.GoString(ev.path)
	}
	stop := false
	func() {
		defer func() {
			if r := recover(); r != nil { // never unwinds through C
				entry.owner.panicked = r
				stop = true
			}
		}()
		stop = entry.fn(e)
	}()
	if stop {
		return 1
	}
	return 0
}

// Close releases the list and its functions; safe to call twice.
func (c *Callbacks) Close() {
	if c.p != nil {
		C.kx_callbacks_destroy(c.p)
		c.p = nil
		for _, h := range c.handles {
			h.Delete()
		}
		c.handles = nil
		runtime.SetFinalizer(c, nil)
	}
}

func (c *Callbacks) takePanic() interface{} {
	p := c.panicked
	c.panicked = nil
	return p
}

// AddTensorBoard is Keras's TensorBoard: event files under logDir/train and logDir/validation for
// `tensorboard --logdir logDir`. updateFreq N > 0 logs batch scalars every N batches (0: epochs only);
// histogramFreq N > 0 logs the weights' histograms every N epochs.
func (c *Callbacks) AddTensorBoard(logDir string, updateFreq int64, histogramFreq int) error {
	defer runtime.KeepAlive(c)
	d := C.CString(logDir)
	defer C.free(unsafe.Pointer(d))
	return callErr(func() C.kx_status {
		return C.kx_callbacks_add_tensorboard(c.p, d, C.int64_t(updateFreq), C.int32_t(histogramFreq))
	})
}
