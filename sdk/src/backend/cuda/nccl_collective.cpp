// All-reduce between replicas on distinct GPUs of one process through NCCL: one communicator per
// GPU from ncclCommInitAll, each used by its replica's own thread on the replica's stream (NCCL's
// "multiple threads, each provided with a comm object"). The sum is enqueued on the stream like any
// kernel, so the optimizer that follows waits for it on the device, not on the host.
//
// libnccl is opened at run time (nccl_library.hpp).
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_check.hpp"
#include "distribute/collective.hpp"

#ifdef KX_HAVE_NCCL
#include "backend/cuda/nccl_library.hpp"
#endif

namespace kx::backend::cuda {

#ifdef KX_HAVE_NCCL
namespace {

class NcclCollective final : public distribute::Collective {
 public:
  NcclCollective(Backend* const* replicas, int count) : nccl_(NcclLibrary::load("replicas on several GPUs")) {
    std::vector<int> devices;
    for (int k = 0; k < count; ++k) {
      streams_.push_back(replica_stream(*replicas[k]));
      for (int d : devices)
        if (d == streams_.back().device)
          fail(Status::Unsupported,
                "NCCL needs one replica per GPU, and cuda:" + std::to_string(d) + " is named twice");
      devices.push_back(streams_.back().device);
    }
    comms_.resize(static_cast<size_t>(count));
    check_nccl(nccl_.comm_init_all(comms_.data(), count, devices.data()), "ncclCommInitAll");
  }

  ~NcclCollective() override {
    for (size_t k = 0; k < comms_.size(); ++k) {
      cudaSetDevice(streams_[k].device);
      cudaStreamSynchronize(streams_[k].stream);  // no sum may still use the communicator
      if (comms_[k]) nccl_.comm_destroy(comms_[k]);
    }
  }

  void all_reduce_sum(int replica, Backend&, float* buffer, int64_t n) override {
    const ReplicaStream& r = streams_[static_cast<size_t>(replica)];
    check(cudaSetDevice(r.device), "cudaSetDevice");
    check_nccl(nccl_.all_reduce(buffer, buffer, static_cast<size_t>(n), ncclFloat32, ncclSum,
                                comms_[static_cast<size_t>(replica)], r.stream),
               "ncclAllReduce of the gradients");
  }
  // NCCL's calls are queued on the replica's stream, where a CUDA graph captures them.
  bool capturable() const override { return true; }

 private:
  void check_nccl(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess) return;
    const Status s = r == ncclInvalidArgument || r == ncclInvalidUsage ? Status::Internal : Status::Device;
    fail(s, std::string(what) + ": " + nccl_.error_string(r));
  }

  const NcclLibrary& nccl_;
  std::vector<ReplicaStream> streams_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace

std::unique_ptr<distribute::Collective> create_nccl_collective(Backend* const* replicas, int count) {
  return std::make_unique<NcclCollective>(replicas, count);
}

#else

std::unique_ptr<distribute::Collective> create_nccl_collective(Backend* const*, int) {
  fail(Status::Unsupported,
        "replicas on several GPUs need NCCL, and this build of the CUDA module was made without nccl.h");
}

#endif

}  // namespace kx::backend::cuda
