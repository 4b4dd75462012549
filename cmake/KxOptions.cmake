# Resolution of the AUTO|ON|OFF options and the search for CBLAS.

foreach(opt KX_WITH_CUDA KX_WITH_NCCL KX_WITH_MPI KX_WITH_BLAS)
  string(TOUPPER "${${opt}}" _v)
  if(NOT _v MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${opt} must be AUTO, ON or OFF (got '${${opt}}')")
  endif()
  set(${opt} ${_v})
endforeach()

# The CUDA backend module, NCCL and MPI come with later versions; asking for them now is an error
# rather than a silent CPU-only build.
foreach(opt KX_WITH_CUDA KX_WITH_NCCL KX_WITH_MPI)
  if(${opt} STREQUAL "ON")
    message(FATAL_ERROR "${opt}=ON: this version of kx has no such backend yet")
  endif()
endforeach()
set(KX_CUDA_STATUS "not in this version")

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
