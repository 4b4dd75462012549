// Conv2D through cuDNN on a replica's stream: forward, the gradient of the input and of the kernel,
// channels-last as Keras. Keras's kernel layout [k_h, k_w, in, filters] is cuDNN's [filters, k_h, k_w,
// in] transposed, so each call transposes the kernel (or its gradient) on the way; bias, ReLU and the
// bias gradient are kx's own kernels. Descriptors and algorithms are chosen once per shape. Where cuDNN
// offers no deterministic algorithm for a direction of a shape, that direction runs as im2col and
// GEMMs on the same backend instead (as layers do on backends without native convolutions).
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"

namespace kx::backend::cuda {

// Device scratch that only grows, between steps (the first step of a shape runs directly). A buffer
// it outgrows is kept, not freed, until the scratch goes with its backend: a recorded step (CUDA
// graph) holds the address it was recorded with and writes there at every replay, also after a later
// shape (a short last batch, a validation pass, predict) needed more. Growth at least doubles, so
// what is kept stays below what is in use.
class GrowingScratch {
 public:
  explicit GrowingScratch(Backend& be) : be_(be) {}
  // At least `bytes` of device memory (null for none).
  void* get(size_t bytes);

 private:
  Backend& be_;
  DeviceBuffer current_;
  std::vector<DeviceBuffer> outgrown_;
};

class CudnnConv {
 public:
  // Null when cuDNN cannot be opened (convolutions then go through im2col and GEMMs).
  static std::unique_ptr<CudnnConv> create(Backend& be, int device, cudaStream_t stream);
  // Takes a cuDNN handle already bound to stream (create makes one).
  CudnnConv(Backend& be, int device, cudaStream_t stream, void* handle);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  void set_tf32(bool on) { tf32_ = on; }
  // cuDNN pads both sides alike: geometries whose padding is not symmetric are not taken.
  static bool supports(const Window2d& g);
  // As Backend::conv2d_forward / conv2d_backward.
  void forward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w, const float* bias,
               Activation act, float* y);
  void backward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w, const float* dz,
                float* dx, float* dw, float* db);

 private:
  struct Plan;
  Plan& plan(const Window2d& g, int64_t filters, int64_t rows);
  // The columns of x (im2col) in the fallback's scratch; x itself for a pointwise convolution.
  const float* columns_of(const Window2d& g, int64_t rows, const float* x);

  Backend& be_;
  int device_;
  cudaStream_t stream_;
  void* handle_;  // cudnnHandle_t
  bool tf32_ = true;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, bool>;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  // cuDNN's workspace, the transposed kernel (or its gradient) and the fallback's columns.
  GrowingScratch workspace_{be_}, kernel_{be_}, columns_{be_};
};

}  // namespace kx::backend::cuda
