// cuDNN, opened at run time: the convolution entry points kx uses, resolved from libcudnn.so.9 (the
// library that forwards to cuDNN's parts). A machine without cuDNN still trains convolutions on the
// GPU, through im2col and cuBLASLt.
//
// kx uses cuDNN's convolution API of descriptors and algorithms. cuDNN 9 marks it deprecated in favour
// of its graph API, which is practical only through the separate cudnn-frontend C++ library; the
// deprecation warnings are silenced in the files that call it.
#pragma once
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn.h>

#include <string>

namespace kx::backend::cuda {

struct CudnnLibrary {
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
  decltype(&cudnnSetTensor4dDescriptor) set_tensor_4d = nullptr;
  decltype(&cudnnDestroyTensorDescriptor) destroy_tensor = nullptr;
  decltype(&cudnnCreateFilterDescriptor) create_filter = nullptr;
  decltype(&cudnnSetFilter4dDescriptor) set_filter_4d = nullptr;
  decltype(&cudnnDestroyFilterDescriptor) destroy_filter = nullptr;
  decltype(&cudnnCreateConvolutionDescriptor) create_convolution = nullptr;
  decltype(&cudnnSetConvolution2dDescriptor) set_convolution_2d = nullptr;
  decltype(&cudnnSetConvolutionMathType) set_math_type = nullptr;
  decltype(&cudnnDestroyConvolutionDescriptor) destroy_convolution = nullptr;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) forward_algorithms = nullptr;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) backward_data_algorithms = nullptr;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) backward_filter_algorithms = nullptr;
  decltype(&cudnnConvolutionForward) forward = nullptr;
  decltype(&cudnnConvolutionBackwardData) backward_data = nullptr;
  decltype(&cudnnConvolutionBackwardFilter) backward_filter = nullptr;
  std::string why;  // why it is not usable, when forward is null

  bool usable() const { return forward != nullptr; }
  // Opened once per process and kept loaded; unusable (with why) when missing or incomplete.
  static const CudnnLibrary& get();
};

}  // namespace kx::backend::cuda

#pragma GCC diagnostic pop
