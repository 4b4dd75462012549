// Compiled only when nccl.h was found (KX_HAVE_NCCL).
#ifdef KX_HAVE_NCCL
#include "backend/cuda/nccl_library.hpp"

#include <dlfcn.h>

#include "kx/error.hpp"

namespace kx::backend::cuda {
namespace {

template <class T>
void resolve(void* handle, const char* name, T& out, std::string& missing) {
  out = reinterpret_cast<T>(dlsym(handle, name));
  if (!out) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

NcclLibrary open_library() {
  NcclLibrary lib;
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char* e = dlerror();
    lib.why = e ? e : "libnccl.so.2 not found";
    return lib;
  }
  std::string missing;
  resolve(h, "ncclCommInitAll", lib.comm_init_all, missing);
  resolve(h, "ncclGetUniqueId", lib.get_unique_id, missing);
  resolve(h, "ncclCommInitRankConfig", lib.comm_init_rank_config, missing);
  resolve(h, "ncclCommGetAsyncError", lib.comm_get_async_error, missing);
  resolve(h, "ncclCommAbort", lib.comm_abort, missing);
  resolve(h, "ncclCommDestroy", lib.comm_destroy, missing);
  resolve(h, "ncclAllReduce", lib.all_reduce, missing);
  resolve(h, "ncclGetErrorString", lib.error_string, missing);
  if (!missing.empty()) lib.why = "libnccl.so.2 lacks " + missing + " (NCCL 2.14 or later is needed)";
  return lib;
}

}  // namespace

const NcclLibrary& NcclLibrary::get() {
  static const NcclLibrary lib = open_library();
  return lib;
}

const NcclLibrary& NcclLibrary::load(const std::string& purpose) {
  const NcclLibrary& lib = get();
  if (!lib.why.empty())
    fail(Status::Unsupported, purpose + " need NCCL, and it could not be used (" + lib.why + "); install NCCL 2");
  return lib;
}

}  // namespace kx::backend::cuda

#endif  // KX_HAVE_NCCL
