// Built only where cudnn.h is (KX_HAVE_CUDNN).
#ifdef KX_HAVE_CUDNN
#include "backend/cuda/cudnn_library.hpp"

#include <dlfcn.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace kx::backend::cuda {
namespace {

template <class F>
void resolve(void* library, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(library, name));
  if (!f) missing += missing.empty() ? name : std::string(", ") + name;
}

CudnnLibrary open_cudnn() {
  CudnnLibrary lib;
  void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char* e = dlerror();
    lib.why = e ? e : "libcudnn.so.9 not found";
    return lib;
  }
  std::string missing;
  resolve(h, "cudnnCreate", lib.create, missing);
  resolve(h, "cudnnDestroy", lib.destroy, missing);
  resolve(h, "cudnnSetStream", lib.set_stream, missing);
  resolve(h, "cudnnGetErrorString", lib.error_string, missing);
  resolve(h, "cudnnCreateTensorDescriptor", lib.create_tensor, missing);
  resolve(h, "cudnnSetTensor4dDescriptor", lib.set_tensor_4d, missing);
  resolve(h, "cudnnDestroyTensorDescriptor", lib.destroy_tensor, missing);
  resolve(h, "cudnnCreateFilterDescriptor", lib.create_filter, missing);
  resolve(h, "cudnnSetFilter4dDescriptor", lib.set_filter_4d, missing);
  resolve(h, "cudnnDestroyFilterDescriptor", lib.destroy_filter, missing);
  resolve(h, "cudnnCreateConvolutionDescriptor", lib.create_convolution, missing);
  resolve(h, "cudnnSetConvolution2dDescriptor", lib.set_convolution_2d, missing);
  resolve(h, "cudnnSetConvolutionMathType", lib.set_math_type, missing);
  resolve(h, "cudnnDestroyConvolutionDescriptor", lib.destroy_convolution, missing);
  resolve(h, "cudnnGetConvolutionForwardAlgorithm_v7", lib.forward_algorithms, missing);
  resolve(h, "cudnnGetConvolutionBackwardDataAlgorithm_v7", lib.backward_data_algorithms, missing);
  resolve(h, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", lib.backward_filter_algorithms, missing);
  resolve(h, "cudnnConvolutionForward", lib.forward, missing);
  resolve(h, "cudnnConvolutionBackwardData", lib.backward_data, missing);
  resolve(h, "cudnnConvolutionBackwardFilter", lib.backward_filter, missing);
  if (!missing.empty()) {
    lib.forward = nullptr;
    lib.why = "libcudnn.so.9 lacks " + missing;
  }
  return lib;
}

}  // namespace

const CudnnLibrary& CudnnLibrary::get() {
  static const CudnnLibrary lib = open_cudnn();
  return lib;
}

}  // namespace kx::backend::cuda

#endif  // KX_HAVE_CUDNN
