// The C side of Go callbacks: kx calls kxGoCallback (exported by callbacks.go) with a cgo.Handle as
// user data. It lives in its own file because a Go file with //export may only declare C functions.
#include <stdint.h>

#include <kx/kx.h>

#include "_cgo_export.h"

kx_status kx_go_add_function(kx_callbacks* c, uintptr_t handle, uint32_t flags) {
  return kx_callbacks_add_function_flags(c, (kx_callback_fn)kxGoCallback, (void*)handle, flags);
}
