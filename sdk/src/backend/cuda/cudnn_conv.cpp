#include "backend/cuda/cudnn_conv.hpp"

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/kernels.cuh"

namespace kx::backend::cuda {

void* GrowingScratch::get(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (current_.bytes() < bytes) {
    const size_t grown = std::max(bytes, 2 * current_.bytes());
    if (!current_.empty()) outgrown_.push_back(std::move(current_));
    current_ = be_.allocate(grown);
  }
  return current_.data();
}

}  // namespace kx::backend::cuda

#ifndef KX_HAVE_CUDNN

namespace kx::backend::cuda {

// Built without cudnn.h: no cuDNN, every convolution goes through im2col and cuBLASLt.
struct CudnnConv::Plan {};
std::unique_ptr<CudnnConv> CudnnConv::create(Backend&, int, cudaStream_t) { return nullptr; }
CudnnConv::CudnnConv(Backend& be, int device, cudaStream_t stream, void* handle)
    : be_(be), device_(device), stream_(stream), handle_(handle) {}
CudnnConv::~CudnnConv() = default;
bool CudnnConv::supports(const Window2d&) { return false; }
void CudnnConv::forward(const Window2d&, int64_t, int64_t, const float*, const float*, const float*, Activation,
                        float*) {
  fail(Status::Internal, "this build has no cuDNN");
}
void CudnnConv::backward(const Window2d&, int64_t, int64_t, const float*, const float*, const float*, float*, float*,
                         float*) {
  fail(Status::Internal, "this build has no cuDNN");
}

}  // namespace kx::backend::cuda

#else

#include "backend/cuda/cudnn_library.hpp"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kx::backend::cuda {
namespace {

// Algorithms needing more scratch than this are passed over.
constexpr size_t kMaxWorkspaceBytes = size_t{512} << 20;

// A 1x1 kernel with stride 1 and no padding: the input is its own columns.
bool pointwise(const Window2d& g) {
  return g.k_h == 1 && g.k_w == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 && g.pad_left == 0;
}

void check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  const Status status = s == CUDNN_STATUS_ALLOC_FAILED ? Status::OutOfMemory
                        : s == CUDNN_STATUS_NOT_SUPPORTED ? Status::Unsupported
                                                          : Status::Device;
  fail(status, std::string(what) + ": " + CudnnLibrary::get().error_string(s));
}

// The first of cuDNN's ranked algorithms that succeeds, is deterministic (runs repeat bitwise), fits
// the workspace limit and computes on float32 data: never ALLOW_CONVERSION, which may convert the
// operands down to float16 (range +-65504, subnormals lost), what neither TF32 nor strict float32 is;
// and for strict float32 no tensor-core math at all.
template <class Perf>
const Perf* pick(const Perf* perf, int n, bool strict_fp32) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC &&
        perf[i].memory <= kMaxWorkspaceBytes && !(strict_fp32 && perf[i].mathType == CUDNN_TENSOR_OP_MATH))
      return &perf[i];
  }
  return nullptr;
}

// Sets algo and bytes from the ranked list; false when it holds no algorithm pick takes (that direction
// then runs as im2col and GEMMs). With TF32 allowed the descriptor takes the math the algorithm was
// ranked with, as cuDNN advises; strict float32 keeps FMA math.
template <class Perf, class Algo>
bool choose(const Perf* perf, int n, bool strict_fp32, cudnnConvolutionDescriptor_t conv, Algo* algo,
            size_t* bytes) {
  const Perf* p = pick(perf, n, strict_fp32);
  if (!p) return false;
  *algo = p->algo;
  *bytes = p->memory;
  if (!strict_fp32) check(CudnnLibrary::get().set_math_type(conv, p->mathType), "cudnnSetConvolutionMathType");
  return true;
}

}  // namespace

struct CudnnConv::Plan {
  const CudnnLibrary& lib;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t forward_conv = nullptr, data_conv = nullptr, filter_conv = nullptr;
  cudnnConvolutionFwdAlgo_t forward_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  size_t forward_bytes = 0, data_bytes = 0, filter_bytes = 0;
  // Whether cuDNN runs each direction; false: im2col and GEMMs (no deterministic algorithm).
  bool native_forward = false, native_data = false, native_filter = false;

  explicit Plan(const CudnnLibrary& l) : lib(l) {}
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (x) lib.destroy_tensor(x);
    if (y) lib.destroy_tensor(y);
    if (w) lib.destroy_filter(w);
    for (cudnnConvolutionDescriptor_t c : {forward_conv, data_conv, filter_conv})
      if (c) lib.destroy_convolution(c);
  }
};

std::unique_ptr<CudnnConv> CudnnConv::create(Backend& be, int device, cudaStream_t stream) {
  const CudnnLibrary& lib = CudnnLibrary::get();
  if (!lib.usable()) return nullptr;
  cudaSetDevice(device);
  cudnnHandle_t handle = nullptr;
  if (lib.create(&handle) != CUDNN_STATUS_SUCCESS) return nullptr;  // no usable cuDNN for this device
  if (lib.set_stream(handle, stream) != CUDNN_STATUS_SUCCESS) {
    lib.destroy(handle);
    return nullptr;
  }
  return std::make_unique<CudnnConv>(be, device, stream, handle);
}

CudnnConv::CudnnConv(Backend& be, int device, cudaStream_t stream, void* handle)
    : be_(be), device_(device), stream_(stream), handle_(handle) {}

CudnnConv::~CudnnConv() {
  plans_.clear();
  cudaSetDevice(device_);
  CudnnLibrary::get().destroy(static_cast<cudnnHandle_t>(handle_));
}

bool CudnnConv::supports(const Window2d& g) {
  // cuDNN pads symmetrically: the window must fit what the symmetric padding gives, over the dilated span.
  const auto out = [](int64_t in, int64_t pad, int64_t k, int64_t d, int64_t s) {
    return (in + 2 * pad - ((k - 1) * d + 1)) / s + 1;
  };
  return out(g.in_h, g.pad_top, g.k_h, g.dilation_h, g.stride_h) == g.out_h &&
         out(g.in_w, g.pad_left, g.k_w, g.dilation_w, g.stride_w) == g.out_w;
}

CudnnConv::Plan& CudnnConv::plan(const Window2d& g, int64_t filters, int64_t rows) {
  const Key key{g.in_h,     g.in_w,       g.channels,   g.k_h,      g.k_w,   g.stride_h, g.stride_w, g.pad_top,
                g.pad_left, g.dilation_h, g.dilation_w, filters,    rows,    tf32_};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  const CudnnLibrary& lib = CudnnLibrary::get();
  auto p = std::make_unique<Plan>(lib);
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  check(lib.create_tensor(&p->x), "cudnnCreateTensorDescriptor");
  check(lib.set_tensor_4d(p->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(rows), i(g.channels), i(g.in_h), i(g.in_w)),
        "the input's descriptor");
  check(lib.create_tensor(&p->y), "cudnnCreateTensorDescriptor");
  check(lib.set_tensor_4d(p->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(rows), i(filters), i(g.out_h), i(g.out_w)),
        "the output's descriptor");
  check(lib.create_filter(&p->w), "cudnnCreateFilterDescriptor");
  check(lib.set_filter_4d(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, i(filters), i(g.channels), i(g.k_h), i(g.k_w)),
        "the kernel's descriptor");
  const cudnnMathType_t math = tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  for (cudnnConvolutionDescriptor_t* c : {&p->forward_conv, &p->data_conv, &p->filter_conv}) {
    check(lib.create_convolution(c), "cudnnCreateConvolutionDescriptor");
    check(lib.set_convolution_2d(*c, i(g.pad_top), i(g.pad_left), i(g.stride_h), i(g.stride_w), i(g.dilation_h),
                                 i(g.dilation_w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "the convolution's descriptor");
    check(lib.set_math_type(*c, math), "cudnnSetConvolutionMathType");
  }
  const auto h = static_cast<cudnnHandle_t>(handle_);
  const bool strict = !tf32_;
  int n = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  check(lib.forward_algorithms(h, p->x, p->w, p->forward_conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, fwd),
        "cudnnGetConvolutionForwardAlgorithm_v7");
  p->native_forward = choose(fwd, n, strict, p->forward_conv, &p->forward_algo, &p->forward_bytes);
  cudnnConvolutionBwdDataAlgoPerf_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  check(lib.backward_data_algorithms(h, p->w, p->y, p->data_conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n,
                                     bwd_data),
        "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  p->native_data = choose(bwd_data, n, strict, p->data_conv, &p->data_algo, &p->data_bytes);
  cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  check(lib.backward_filter_algorithms(h, p->x, p->y, p->filter_conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n,
                                       bwd_filter),
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  p->native_filter = choose(bwd_filter, n, strict, p->filter_conv, &p->filter_algo, &p->filter_bytes);
  return *plans_.emplace(key, std::move(p)).first->second;
}

const float* CudnnConv::columns_of(const Window2d& g, int64_t rows, const float* x) {
  if (pointwise(g)) return x;
  auto* col = static_cast<float*>(columns_.get(static_cast<size_t>(rows * g.out_h * g.out_w * g.patch()) * sizeof(float)));
  be_.im2col(g, rows, x, col);
  return col;
}

void CudnnConv::forward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w,
                        const float* bias, Activation act, float* y) {
  if (rows == 0) return;
  Plan& p = plan(g, filters, rows);
  const int64_t patch = g.patch(), positions = rows * g.out_h * g.out_w;
  const bool relu = act == Activation::Relu;
  if (!p.native_forward) {  // y = act(columns K + b), the layer's own im2col path
    be_.gemm(Trans::No, Trans::No, positions, filters, patch, columns_of(g, rows, x), patch, w, filters, 0.0f, y,
             filters, Epilogue{bias, relu ? Activation::Relu : Activation::None});
    return;
  }
  const CudnnLibrary& lib = CudnnLibrary::get();
  auto* w_ohwi = static_cast<float*>(kernel_.get(static_cast<size_t>(patch * filters) * sizeof(float)));
  void* ws = workspace_.get(p.forward_bytes);
  transpose(stream_, patch, filters, w, w_ohwi);  // [k_h k_w in, filters] -> [filters, k_h k_w in]
  const float one = 1.0f, zero = 0.0f;
  check(lib.forward(static_cast<cudnnHandle_t>(handle_), &one, p.x, x, p.w, w_ohwi, p.forward_conv, p.forward_algo, ws,
                    p.forward_bytes, &zero, p.y, y),
        "cudnnConvolutionForward");
  if (bias || relu) bias_relu(stream_, positions, filters, filters, y, bias, relu);
  check(cudaGetLastError(), "convolution");
}

void CudnnConv::backward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w,
                         const float* dz, float* dx, float* dw, float* db) {
  const int64_t patch = g.patch(), positions = rows * g.out_h * g.out_w;
  if (rows == 0) {  // no samples: zero gradients
    if (dw) check(cudaMemsetAsync(dw, 0, static_cast<size_t>(patch * filters) * sizeof(float), stream_), "memset");
    if (db) check(cudaMemsetAsync(db, 0, static_cast<size_t>(filters) * sizeof(float), stream_), "memset");
    return;
  }
  Plan& p = plan(g, filters, rows);
  const CudnnLibrary& lib = CudnnLibrary::get();
  const auto h = static_cast<cudnnHandle_t>(handle_);
  const float one = 1.0f, zero = 0.0f;
  float* scratch = (dw && p.native_filter) || (dx && p.native_data)
                       ? static_cast<float*>(kernel_.get(static_cast<size_t>(patch * filters) * sizeof(float)))
                       : nullptr;
  if (db) be_.bias_grad(positions, filters, dz, db);  // on this stream, with the backend's scratch
  if (dw && p.native_filter) {
    void* ws = workspace_.get(p.filter_bytes);
    check(lib.backward_filter(h, &one, p.x, x, p.y, dz, p.filter_conv, p.filter_algo, ws, p.filter_bytes, &zero, p.w,
                              scratch),
          "cudnnConvolutionBackwardFilter");
    transpose(stream_, filters, patch, scratch, dw);  // [filters, k_h k_w in] -> Keras's layout
  } else if (dw) {  // dK = columns^T dz, in Keras's layout
    be_.gemm(Trans::Yes, Trans::No, patch, filters, positions, columns_of(g, rows, x), patch, dz, filters, 0.0f, dw,
             filters, Epilogue{});
  }
  if (dx && p.native_data) {
    void* ws = workspace_.get(p.data_bytes);
    transpose(stream_, patch, filters, w, scratch);
    check(lib.backward_data(h, &one, p.w, scratch, p.y, dz, p.data_conv, p.data_algo, ws, p.data_bytes, &zero, p.x, dx),
          "cudnnConvolutionBackwardData");
  } else if (dx) {  // the columns' gradient dz K^T, folded back onto dx (col2im)
    float* dcol = pointwise(g) ? dx
                               : static_cast<float*>(columns_.get(static_cast<size_t>(positions * patch) * sizeof(float)));
    be_.gemm(Trans::No, Trans::Yes, positions, patch, filters, dz, filters, w, filters, 0.0f, dcol, patch, Epilogue{});
    if (!pointwise(g)) be_.col2im(g, rows, dcol, dx);
  }
  check(cudaGetLastError(), "convolution gradient");
}

}  // namespace kx::backend::cuda

#endif  // KX_HAVE_CUDNN
