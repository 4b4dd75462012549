// The bfloat16 GEMM of mixed_bfloat16 on CPUs with bfloat16 dot products: AVX512_BF16's vdpbf16ps on
// x86-64 (gemm_bf16_avx512.cpp), FEAT_BF16's BFDOT on AArch64 (gemm_bf16_neon.cpp).
#pragma once
#include <cstdint>

#include "backend/cpu/gemm.hpp"

namespace kx::backend::cpu {

// C[M, N] = op(A) op(B) (+ beta C, bias, ReLU), row-major as Backend::gemm, each product of bfloat16
// values (A and B rounded to bfloat16 as they are packed) summed in float32; C rounded as `rounding` says.
struct Bf16Gemm {
  Trans ta, tb;
  int64_t M, N, K;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float beta;
  float* C;
  int64_t ldc;
  const float* bias;
  bool relu;
  Rounding rounding;
};

// x86-64: AVX512_BF16 (with the AVX-512 it needs); AArch64: FEAT_BF16 (HWCAP2_BF16); else false.
bool cpu_has_bf16_dot();
// What cpu_has_bf16_dot() asks of the CPU, for error messages: "AVX512_BF16", "FEAT_BF16".
const char* bf16_dot_feature();
// True where CpuBf16Gemm::Auto picks the dot products over float32 FMAs (see its definitions).
bool bf16_dot_outruns_fma();
// Only where cpu_has_bf16_dot(). packed_a / packed_b / scratch receive the packed operands,
// workspace the driver's partial sums; all grow as needed.
void bf16_gemm(const Bf16Gemm& g, FloatBuffer& packed_a, FloatBuffer& packed_b, FloatBuffer& scratch,
               FloatBuffer& workspace, int threads);

}  // namespace kx::backend::cpu
