# Resolution of the AUTO|ON|OFF options and the search for CBLAS.

foreach(opt KX_WITH_CUDA KX_WITH_NCCL KX_WITH_CUDNN KX_WITH_MPI KX_WITH_GLOO KX_WITH_BLAS KX_WITH_IMAGES)
  string(TOUPPER "${${opt}}" _v)
  if(NOT _v MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${opt} must be AUTO, ON or OFF (got '${${opt}}')")
  endif()
  set(${opt} ${_v})
endforeach()

# KX_WITH_GLOO and KX_WITH_MPI (the multi-worker module) are resolved in KxWorkers.cmake.

# The CUDA backend module (libkx_cuda.so): CUDA 13 from /usr/local/cuda unless CMAKE_CUDA_COMPILER
# says otherwise. AUTO builds it when nvcc works; ON fails without it.
set(KX_HAVE_CUDA OFF)
set(KX_CUDA_STATUS "off")
if(NOT KX_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  # Jetson Orin (87), A100 (80) and Hopper (90); more only make the build slower.
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;87;90")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND TARGET CUDA::cublasLt)
    set(KX_HAVE_CUDA ON)
    set(KX_CUDA_STATUS "module (CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(KX_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KX_WITH_CUDA=ON but no working CUDA toolkit with cuBLASLt was found "
                        "(looked for /usr/local/cuda/bin/nvcc; set CMAKE_CUDA_COMPILER)")
  else()
    set(KX_CUDA_STATUS "no CUDA toolkit found")
  endif()
endif()

# CBLAS: OpenBLAS's cblas.h and library (Debian: libopenblas-dev).
function(kx_find_cblas)
  set(KX_HAVE_CBLAS OFF PARENT_SCOPE)
  if(KX_WITH_BLAS STREQUAL "OFF")
    return()
  endif()
  find_path(KX_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
  find_library(KX_CBLAS_LIBRARY NAMES openblas cblas)
  if(KX_CBLAS_INCLUDE_DIR AND KX_CBLAS_LIBRARY)
    set(KX_HAVE_CBLAS ON PARENT_SCOPE)
    if(KX_CBLAS_LIBRARY MATCHES "openblas")
      set(KX_CBLAS_DEFINITIONS KX_HAVE_OPENBLAS_CONFIG PARENT_SCOPE)
    endif()
    message(STATUS "kx: CBLAS from ${KX_CBLAS_LIBRARY}")
  elseif(KX_WITH_BLAS STREQUAL "ON")
    message(FATAL_ERROR "KX_WITH_BLAS=ON but no cblas.h/libopenblas was found (install libopenblas-dev)")
  else()
    message(STATUS "kx: no CBLAS found; the built-in GEMM kernels are used")
  endif()
endfunction()

# A library the CUDA module opens at run time (dlopen), of which the build needs the header alone.
# KX_WITH_<NAME> AUTO|ON|OFF; defines KX_HAVE_<NAME> on target when the header is found, and sets
# status_var to what was decided.
function(kx_use_runtime_library target name header soname status_var)
  set(status "off")
  if(NOT KX_WITH_${name} STREQUAL "OFF")
    find_path(KX_${name}_INCLUDE_DIR ${header} HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(KX_${name}_INCLUDE_DIR)
      target_include_directories(${target} SYSTEM PRIVATE ${KX_${name}_INCLUDE_DIR})
      target_compile_definitions(${target} PRIVATE KX_HAVE_${name})
      set(status "${soname} opened at run time (${header} in ${KX_${name}_INCLUDE_DIR})")
    elseif(KX_WITH_${name} STREQUAL "ON")
      message(FATAL_ERROR "KX_WITH_${name}=ON but ${header} was not found")
    else()
      set(status "no ${header} found")
    endif()
  endif()
  set(${status_var} "${status}" PARENT_SCOPE)
endfunction()

# The image decoders of kx_dataset_from_image_directory: Debian's libjpeg62-turbo-dev and libpng-dev.
# AUTO uses them when both are found; without them the function fails with KX_E_UNSUPPORTED.
macro(kx_find_image_decoders)
  set(KX_HAVE_IMAGES OFF)
  if(NOT KX_WITH_IMAGES STREQUAL "OFF")
    find_package(JPEG)
    find_package(PNG)
    if(JPEG_FOUND AND PNG_FOUND)
      set(KX_HAVE_IMAGES ON)
    elseif(KX_WITH_IMAGES STREQUAL "ON")
      message(FATAL_ERROR "KX_WITH_IMAGES=ON but libjpeg or libpng was not found "
                          "(install libjpeg62-turbo-dev and libpng-dev)")
    endif()
  endif()
endmacro()
