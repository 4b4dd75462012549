// Owners of the CUDA objects a backend holds, so that a constructor failing half-way (no memory, a
// device gone) releases what it already made.
#pragma once
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.hpp"

namespace kx::backend::cuda {

// A non-blocking stream on one device; destroyed once its work has finished.
class OwnedStream {
 public:
  explicit OwnedStream(int device) : device_(device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  ~OwnedStream() {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  operator cudaStream_t() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

// Page-locked host memory for `count` values of T, which the device can copy into asynchronously.
template <class T>
class PinnedArray {
 public:
  explicit PinnedArray(size_t count) {
    check(cudaMallocHost(&p_, count * sizeof(T)), "cudaMallocHost");
  }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() { cudaFreeHost(p_); }
  T* get() const { return p_; }
  T& operator[](size_t i) const { return p_[i]; }

 private:
  T* p_ = nullptr;
};

}  // namespace kx::backend::cuda
