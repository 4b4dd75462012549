// The CUDA driver probe and the decision it makes: libkx loads its CUDA module only when the driver
// reports a GPU. Fake driver libraries built beside the tests stand in for libcuda.so.1.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda_driver_probe.hpp"
#include "backend/cuda_module.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

using backend::CudaModule;
using backend::probe_cuda_driver;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool is_loaded(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (handle) dlclose(handle);
  return handle != nullptr;
}

TEST(CudaDriverProbe, NoDriverLibraryMeansNoDeviceAndSaysSo) {
  const backend::DriverProbe p = probe_cuda_driver("/nonexistent/libcuda.so.1");
  EXPECT_EQ(p.devices, 0);
  EXPECT_TRUE(contains(p.why, "no CUDA driver")) << p.why;
  EXPECT_TRUE(contains(p.why, "/nonexistent/libcuda.so.1")) << p.why;
}

TEST(CudaDriverProbe, ADriverWithoutAGpuMeansNoDeviceAndSaysSo) {
  const backend::DriverProbe p = probe_cuda_driver(KX_FAKE_NO_GPU);
  EXPECT_EQ(p.devices, 0);
  EXPECT_TRUE(contains(p.why, "no CUDA-capable device is detected")) << p.why;
  EXPECT_TRUE(contains(p.why, "CUresult 100")) << p.why;
}

TEST(CudaDriverProbe, ALibraryWithoutTheDriverEntriesIsNoDriver) {
  const backend::DriverProbe p = probe_cuda_driver(KX_FAKE_NOT_A_DRIVER);
  EXPECT_EQ(p.devices, 0);
  EXPECT_TRUE(contains(p.why, "is not a CUDA driver")) << p.why;
}

TEST(CudaDriverProbe, CountsTheGpusTheDriverReports) {
  EXPECT_EQ(probe_cuda_driver(KX_FAKE_TWO_GPUS).devices, 2);
}

// The stand-in module is any library: what matters is whether it was opened at all.
TEST(CudaDriverProbe, TheModuleIsLoadedOnlyWhenTheDriverReportsAGpu) {
  ASSERT_FALSE(is_loaded(KX_FAKE_MODULE));
  const CudaModule without_gpu = CudaModule::open(KX_FAKE_NO_GPU, KX_FAKE_MODULE);
  EXPECT_EQ(without_gpu.device_count(), 0);
  EXPECT_TRUE(contains(without_gpu.status(), "no CUDA device")) << without_gpu.status();
  EXPECT_TRUE(contains(without_gpu.status(), "was not loaded")) << without_gpu.status();
  EXPECT_FALSE(is_loaded(KX_FAKE_MODULE)) << "the module was opened although the driver has no GPU";

  const CudaModule with_gpus = CudaModule::open(KX_FAKE_TWO_GPUS, KX_FAKE_MODULE);
  EXPECT_TRUE(is_loaded(KX_FAKE_MODULE)) << with_gpus.status();
  // Not a kx module: no devices, and the status names it.
  EXPECT_EQ(with_gpus.device_count(), 0);
  EXPECT_TRUE(contains(with_gpus.status(), "is not a kx backend module")) << with_gpus.status();
}

TEST(CudaDriverProbe, AskingForAGpuWithoutOneIsADeviceErrorThatSaysWhy) {
  const CudaModule none = CudaModule::open("/nonexistent/libcuda.so.1", "");
  try {
    none.create_backend(0);
    FAIL() << "a backend without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Device);
    EXPECT_TRUE(contains(e.what(), "no CUDA driver")) << e.what();
  }
}

}  // namespace
}  // namespace kx
