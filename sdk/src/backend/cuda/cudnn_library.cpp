// Built only where cudnn.h is (KX_HAVE_CUDNN).
#ifdef KX_HAVE_CUDNN
#include "backend/cuda/cudnn_library.hpp"

#include "io/shared_library.hpp"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kx::backend::cuda {
namespace {

CudnnLibrary open_cudnn() {
  CudnnLibrary lib;
  // Opened for good (RTLD_NODELETE): threads the library starts may outlive any one use.
  io::SharedLibrary so("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  so.resolve("cudnnCreate", lib.create);
  so.resolve("cudnnDestroy", lib.destroy);
  so.resolve("cudnnSetStream", lib.set_stream);
  so.resolve("cudnnGetErrorString", lib.error_string);
  so.resolve("cudnnCreateTensorDescriptor", lib.create_tensor);
  so.resolve("cudnnSetTensor4dDescriptor", lib.set_tensor_4d);
  so.resolve("cudnnDestroyTensorDescriptor", lib.destroy_tensor);
  so.resolve("cudnnCreateFilterDescriptor", lib.create_filter);
  so.resolve("cudnnSetFilter4dDescriptor", lib.set_filter_4d);
  so.resolve("cudnnDestroyFilterDescriptor", lib.destroy_filter);
  so.resolve("cudnnCreateConvolutionDescriptor", lib.create_convolution);
  so.resolve("cudnnSetConvolution2dDescriptor", lib.set_convolution_2d);
  so.resolve("cudnnSetConvolutionMathType", lib.set_math_type);
  so.resolve("cudnnDestroyConvolutionDescriptor", lib.destroy_convolution);
  so.resolve("cudnnGetConvolutionForwardAlgorithm_v7", lib.forward_algorithms);
  so.resolve("cudnnGetConvolutionBackwardDataAlgorithm_v7", lib.backward_data_algorithms);
  so.resolve("cudnnGetConvolutionBackwardFilterAlgorithm_v7", lib.backward_filter_algorithms);
  so.resolve("cudnnConvolutionForward", lib.forward);
  so.resolve("cudnnConvolutionBackwardData", lib.backward_data);
  so.resolve("cudnnConvolutionBackwardFilter", lib.backward_filter);
  lib.why = so.problem();
  if (!lib.why.empty()) lib.forward = nullptr;
  return lib;
}

}  // namespace

const CudnnLibrary& CudnnLibrary::get() {
  static const CudnnLibrary lib = open_cudnn();
  return lib;
}

}  // namespace kx::backend::cuda

#endif  // KX_HAVE_CUDNN
