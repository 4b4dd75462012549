// The NCCL entry points kx uses, resolved from libnccl.so.2 at run time: a machine without NCCL still
// trains on one GPU, and says what is missing only when NCCL is asked for.
#pragma once
#include <string>

#include <nccl.h>

namespace kx::backend::cuda {

struct NcclLibrary {
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  std::string why;  // why the library is unusable; empty when every entry was found

  // Loads NCCL once per process (it stays loaded: its communicators' threads need it).
  static const NcclLibrary& get();
  // get(), or Status::Unsupported naming `purpose` ("replicas on several GPUs") and what is missing.
  // A literal, not a std::string: GCC 13 warns of a reference kept past a temporary argument.
  static const NcclLibrary& load(const char* purpose);
};

}  // namespace kx::backend::cuda
