// The CUDA tests' guard: a test that needs a GPU skips without one, saying why (the module's status).
#pragma once
#include <gtest/gtest.h>

#include "backend/cuda_module.hpp"
#include "kx/kx.hpp"

#define REQUIRE_GPU()                                \
  if (::kx::device_count(::kx::DeviceKind::Cuda) == 0) \
  GTEST_SKIP() << "no CUDA device: " << ::kx::backend::CudaModule::load().status()
