// The bootstrap of a group launched by mpirun: each worker's rendezvous address is swapped over
// MPI_COMM_WORLD (as llm.c swaps NCCL's id), then Gloo carries everything else.
#pragma once
#include <string>
#include <vector>

namespace kx::workers {

// "libmpi.so.40 (Open MPI) opened at run time", or why mpirun launches are not supported by this build.
const char* mpi_bootstrap_description();

// Every worker's `record` (at most 255 bytes), in rank order. Opens libmpi.so.40 at run time and
// initialises MPI unless the program did; MPI is then finalised at once if this call initialised it
// (it only bootstraps), so it works once per process unless the program keeps MPI initialised itself.
// Checks that MPI's rank and size are `rank` and `size`. Status::Unsupported without MPI, Comm when
// MPI fails.
std::vector<std::string> mpi_all_gather(const std::string& record, int rank, int size);

}  // namespace kx::workers
