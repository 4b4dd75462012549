// Package kx trains deep-learning models with the kx C library from Go, as Keras does from Python:
// a Strategy (which devices train), a Model, a Dataset, and Model.Fit.
//
// Every failing call returns an *Error carrying kx's status code and message. Objects own C handles:
// call Close when done (a finalizer closes forgotten ones, later). A handle is used by one goroutine
// at a time; different handles are independent.
package kx

/*
#cgo LDFLAGS: -lkx
#cgo CFLAGS: -DKX_ALLOW_DEPRECATED
#include <kx/kx.h>
*/
import "C"

import (
	"fmt"
	"runtime"
)

// Status codes of kx.h.
const (
	OK                 = 0
	Stopped            = 1
	ErrInvalidArgument = -1
	ErrMisuse          = -2
	ErrOutOfMemory     = -3
	ErrDevice          = -4
	ErrIO              = -5
	ErrCorrupt         = -6
	ErrUnsupported     = -7
	ErrDiverged        = -8
	ErrComm            = -9
	ErrInternal        = -100
)

// Error is a failed kx call: Code is the kx_status (negative), Message kx's one-line explanation.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return "kx: " + StatusName(e.Code) + ": " + e.Message }

// StatusName is the KX_* name of a status code, from the library ("KX_UNKNOWN_STATUS" for a code it
// does not define).
func StatusName(code int) string { return C.GoString(C.kx_status_name(C.kx_status(code))) }

// call runs f, a kx call returning a status, and turns a negative status into an *Error. The
// goroutine stays on its OS thread between the call and reading the thread-local message.
func call(f func() C.kx_status) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := int(f())
	if st < 0 {
		return st, &Error{Code: st, Message: C.GoString(C.kx_last_error_message())}
	}
	return st, nil
}

// callErr is call for functions whose only result is the error.
func callErr(f func() C.kx_status) error {
	_, err := call(f)
	return err
}

// invalid is an error detected on the Go side, before reaching C.
func invalid(format string, args ...interface{}) error {
	return &Error{Code: ErrInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// Version is kx's version string, e.g. "0.1.0".
func Version() string { return C.GoString(C.kx_version_string()) }

// DeviceCount is the number of CUDA devices (0 without a GPU, driver or the CUDA module).
func CUDADeviceCount() int { return int(C.kx_device_count(C.KX_DEVICE_CUDA)) }

// keepAlive keeps objects whose finalizers free C handles reachable until the deferring function
// returns. Every function that passes a handle (x.p) to C defers it, or runtime.KeepAlive for one
// object: otherwise, once x.p is read, the collector may finalize x (a temporary argument, say) while
// C still uses its handle, and a callback into Go during kx_fit can run that collection.
func keepAlive(objects ...interface{}) {
	for _, o := range objects {
		runtime.KeepAlive(o)
	}
}
