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

// Strategy says which devices train: NewDefaultStrategy or NewMirroredStrategy.
type Strategy struct{ p *C.kx_strategy }

func newStrategy(p *C.kx_strategy) *Strategy {
	s := &Strategy{p}
	runtime.SetFinalizer(s, (*Strategy).Close)
	return s
}

// NewDefaultStrategy uses the first GPU, else the CPU.
func NewDefaultStrategy() (*Strategy, error) {
	var p *C.kx_strategy
	if err := callErr(func() C.kx_status { return C.kx_strategy_create_default(&p) }); err != nil {
		return nil, err
	}
	return newStrategy(p), nil
}

// NewMirroredStrategy makes synchronous replicas on the named devices ("cpu", "cuda:0", ...; a
// repeated name makes logical replicas). No devices: every GPU, or one CPU replica without GPUs.
func NewMirroredStrategy(devices ...string) (*Strategy, error) {
	var p *C.kx_strategy
	if len(devices) == 0 {
		if err := callErr(func() C.kx_status { return C.kx_strategy_create_mirrored(nil, 0, &p) }); err != nil {
			return nil, err
		}
		return newStrategy(p), nil
	}
	names := C.malloc(C.size_t(len(devices)) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(names)
	list := unsafe.Slice((**C.char)(names), len(devices))
	for i, d := range devices {
		list[i] = C.CString(d)
		defer C.free(unsafe.Pointer(list[i]))
	}
	err := callErr(func() C.kx_status {
		return C.kx_strategy_create_mirrored((**C.char)(names), C.size_t(len(devices)), &p)
	})
	if err != nil {
		return nil, err
	}
	return newStrategy(p), nil
}

// NumReplicas is TensorFlow's num_replicas_in_sync.
func (s *Strategy) NumReplicas() int { return int(C.kx_strategy_num_replicas(s.p)) }

// SetNumThreads sets the CPU threads of models created afterwards (0 = every core).
func (s *Strategy) SetNumThreads(n int) error {
	defer runtime.KeepAlive(s)
	return callErr(func() C.kx_status { return C.kx_strategy_set_num_threads(s.p, C.int32_t(n)) })
}

// Close releases the strategy; models made from it keep what they need. Safe to call twice.
func (s *Strategy) Close() {
	if s.p != nil {
		C.kx_strategy_destroy(s.p)
		s.p = nil
		runtime.SetFinalizer(s, nil)
	}
}
