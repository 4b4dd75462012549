#include "distribute/gloo/mpi_bootstrap.hpp"

#include "kx/error.hpp"

#ifdef KX_WORKERS_HAVE_MPI
#include <dlfcn.h>

#include <array>
#include <cstring>

#define OMPI_SKIP_MPICXX 1  // the C interface only
#include <mpi.h>
#endif

namespace kx::workers {

#ifndef KX_WORKERS_HAVE_MPI

const char* mpi_bootstrap_description() { return "no mpirun bootstrap (built without Open MPI's mpi.h)"; }

std::vector<std::string> mpi_all_gather(const std::string&, int, int) {
  fail(Status::Unsupported,
       "this kx was built without MPI (KX_WITH_MPI, libopenmpi-dev): launch the workers with TF_CONFIG instead of mpirun");
}

#else

namespace {

constexpr const char kLibrary[] = "libmpi.so.40";
constexpr size_t kRecordBytes = 256;

// The MPI functions used, resolved from the library (libkx and this module link no MPI), with their
// types taken from mpi.h.
struct MpiLibrary {
  decltype(&MPI_Initialized) initialized = nullptr;
  decltype(&MPI_Finalized) finalized = nullptr;
  decltype(&MPI_Init_thread) init_thread = nullptr;
  decltype(&MPI_Comm_rank) comm_rank = nullptr;
  decltype(&MPI_Comm_size) comm_size = nullptr;
  decltype(&MPI_Allgather) allgather = nullptr;
  decltype(&MPI_Finalize) finalize = nullptr;
  MPI_Comm world = nullptr;  // Open MPI's MPI_COMM_WORLD and MPI_CHAR are addresses of its globals
  MPI_Datatype chars = nullptr;
};

template <typename T>
void resolve(void* handle, const char* name, T& out) {
  out = reinterpret_cast<T>(dlsym(handle, name));
  require(out != nullptr, Status::Unsupported, std::string(kLibrary) + " has no " + name + ": it is not Open MPI 4 or 5");
}

MpiLibrary open_library() {
  // RTLD_GLOBAL: Open MPI's own plugins look for libmpi's symbols globally. Never unloaded.
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
  if (!handle) {
    const char* why = dlerror();
    fail(Status::Unsupported, std::string("launched by mpirun, but ") + kLibrary + " could not be opened (" +
                                  (why ? why : "?") + "): install Open MPI (openmpi-bin) or launch with TF_CONFIG");
  }
  MpiLibrary mpi;
  resolve(handle, "MPI_Initialized", mpi.initialized);
  resolve(handle, "MPI_Finalized", mpi.finalized);
  resolve(handle, "MPI_Init_thread", mpi.init_thread);
  resolve(handle, "MPI_Comm_rank", mpi.comm_rank);
  resolve(handle, "MPI_Comm_size", mpi.comm_size);
  resolve(handle, "MPI_Allgather", mpi.allgather);
  resolve(handle, "MPI_Finalize", mpi.finalize);
  resolve(handle, "ompi_mpi_comm_world", mpi.world);
  resolve(handle, "ompi_mpi_char", mpi.chars);
  dlclose(handle);  // RTLD_NODELETE keeps it
  return mpi;
}

void check(int rc, const char* what) {
  require(rc == MPI_SUCCESS, Status::Comm, std::string(what) + " failed (MPI error " + std::to_string(rc) + ")");
}

}  // namespace

const char* mpi_bootstrap_description() { return "mpirun (Open MPI's libmpi.so.40, opened at run time)"; }

std::vector<std::string> mpi_all_gather(const std::string& record, int rank, int size) {
  require(record.size() < kRecordBytes, Status::Internal, "MPI bootstrap record too long: " + record);
  const MpiLibrary mpi = open_library();
  int initialized = 0, finalized = 0;
  check(mpi.initialized(&initialized), "MPI_Initialized");
  check(mpi.finalized(&finalized), "MPI_Finalized");
  require(!finalized, Status::Misuse,
          "launched by mpirun, but MPI was already finalised in this process: kx bootstraps through MPI once per process "
          "(keep one multi-worker group, or initialise MPI in the program before creating it)");
  const bool ours = !initialized;
  if (ours) {
    int provided = 0;
    check(mpi.init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  }
  int mpi_rank = -1, mpi_size = 0;
  check(mpi.comm_rank(mpi.world, &mpi_rank), "MPI_Comm_rank");
  check(mpi.comm_size(mpi.world, &mpi_size), "MPI_Comm_size");
  require(mpi_rank == rank && mpi_size == size, Status::InvalidArgument,
          "MPI says rank " + std::to_string(mpi_rank) + " of " + std::to_string(mpi_size) + ", the environment rank " +
              std::to_string(rank) + " of " + std::to_string(size));
  std::array<char, kRecordBytes> own{};
  record.copy(own.data(), record.size());
  std::vector<char> all(kRecordBytes * static_cast<size_t>(size));
  check(mpi.allgather(own.data(), kRecordBytes, mpi.chars, all.data(), kRecordBytes, mpi.chars, mpi.world),
        "MPI_Allgather");
  if (ours) check(mpi.finalize(), "MPI_Finalize");
  std::vector<std::string> records;
  for (int i = 0; i < size; ++i) {
    const char* r = all.data() + kRecordBytes * static_cast<size_t>(i);
    records.emplace_back(r, strnlen(r, kRecordBytes));
  }
  return records;
}

#endif

}  // namespace kx::workers
