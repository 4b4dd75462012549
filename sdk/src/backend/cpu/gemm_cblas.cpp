// GEMM through CBLAS (OpenBLAS) when kx is configured with it (KX_HAVE_CBLAS).
#include "backend/cpu/gemm.hpp"
#include "kx/error.hpp"

#ifdef KX_HAVE_CBLAS
#include <cblas.h>

#ifdef KX_HAVE_OPENBLAS_CONFIG
extern "C" char* openblas_get_corename(void);
#endif

namespace kx::backend::cpu {

bool cblas_available() { return true; }

void cblas_gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta == Trans::Yes ? CblasTrans : CblasNoTrans, tb == Trans::Yes ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

const char* cblas_core_name() {
#ifdef KX_HAVE_OPENBLAS_CONFIG
  return openblas_get_corename();
#else
  return "cblas";
#endif
}

}  // namespace kx::backend::cpu

#else

namespace kx::backend::cpu {
bool cblas_available() { return false; }
void cblas_gemm(Trans, Trans, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float, float*,
                int64_t) {
  fail(Status::Internal, "CBLAS GEMM called in a build without CBLAS");
}
const char* cblas_core_name() { return "none"; }
}  // namespace kx::backend::cpu

#endif
