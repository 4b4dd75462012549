// Compiled only when nccl.h was found (KX_HAVE_NCCL).
#ifdef KX_HAVE_NCCL
#include "backend/cuda/nccl_library.hpp"

#include "io/shared_library.hpp"
#include "kx/error.hpp"

namespace kx::backend::cuda {
namespace {

NcclLibrary open_library() {
  NcclLibrary lib;
  // Opened for good (RTLD_NODELETE): threads the library starts may outlive any one use.
  io::SharedLibrary so("libnccl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  so.resolve("ncclCommInitAll", lib.comm_init_all);
  so.resolve("ncclGetUniqueId", lib.get_unique_id);
  so.resolve("ncclCommInitRankConfig", lib.comm_init_rank_config);
  so.resolve("ncclCommGetAsyncError", lib.comm_get_async_error);
  so.resolve("ncclCommAbort", lib.comm_abort);
  so.resolve("ncclCommDestroy", lib.comm_destroy);
  so.resolve("ncclAllReduce", lib.all_reduce);
  so.resolve("ncclGetErrorString", lib.error_string);
  lib.why = so.problem();
  return lib;
}

}  // namespace

const NcclLibrary& NcclLibrary::get() {
  static const NcclLibrary lib = open_library();
  return lib;
}

const NcclLibrary& NcclLibrary::load(const char* purpose) {
  const NcclLibrary& lib = get();
  if (!lib.why.empty())
    fail(Status::Unsupported, std::string(purpose) + " need NCCL, and it could not be used (" + lib.why + "); install NCCL 2.14 or later");
  return lib;
}

}  // namespace kx::backend::cuda

#endif  // KX_HAVE_NCCL
