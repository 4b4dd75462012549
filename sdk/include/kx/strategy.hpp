// A distribution strategy: the ordered list of replica devices that train in sync.
#pragma once
#include <string>
#include <vector>

#include "kx/device.hpp"

namespace kx {

// Which GEMM the CPU backend uses: Auto picks the built-in AVX-512 kernel where the CPU has it, else
// CBLAS when kx was built with it, else the portable built-in kernel.
enum class CpuGemm { Auto = 0, Builtin = 1, Blas = 2 };

class Strategy {
 public:
  // The first GPU if there is one, else the CPU.
  static Strategy default_strategy();
  // Replicas on the named devices; empty = every GPU, or one CPU replica without GPUs.
  static Strategy mirrored(const std::vector<std::string>& devices);

  int num_replicas() const { return static_cast<int>(replicas_.size()); }
  const std::vector<Device>& replicas() const { return replicas_; }

  // CPU threads for kernels; 0 = every core.
  void set_num_threads(int n);
  int num_threads() const { return num_threads_; }
  void set_cpu_gemm(CpuGemm g) { cpu_gemm_ = g; }
  CpuGemm cpu_gemm() const { return cpu_gemm_; }
  // TF32 tensor cores for float32 GEMMs on GPUs that have them (on by default, as in TensorFlow).
  void set_tf32(bool on) { tf32_ = on; }
  bool tf32() const { return tf32_; }

 private:
  explicit Strategy(std::vector<Device> replicas) : replicas_(std::move(replicas)) {}
  std::vector<Device> replicas_;
  int num_threads_ = 0;
  CpuGemm cpu_gemm_ = CpuGemm::Auto;
  bool tf32_ = true;
};

}  // namespace kx
