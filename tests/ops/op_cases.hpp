// One test case per backend kernel (as ggml's test-backend-ops): the table op_cases() has a row for
// every operation of KX_BACKEND_KERNELS, in Op order, and the build fails without one (op_cases.cpp).
// A case's setup uploads fresh random inputs through an OpIo and returns the call that runs the
// operation on them, so the same case runs on any backend, directly or inside capture(); the buffers
// it marks as outputs are read back and compared across backends (compare_results).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.hpp"

namespace kx::test::ops {

// What an output buffer is checked for on its own, besides agreeing across backends.
struct Check {
  bool written = true;    // the op changes it (an out() ends not all zero, an inout() not as uploaded);
                          // false: the op must leave it as it was (a skipped update)
  bool finite = true;     // every value ends finite (false where the case feeds NaN or infinity)
  double tolerance = -1;  // across backends instead of the case's (< 0: the case's)
};

// One compared buffer as read back after a run.
struct Compared {
  std::string name;
  bool floats = true;  // floats within the tolerance; else raw bytes (a struct), equal or not
  Check check;
  std::vector<std::byte> before;  // as uploaded (zeros for an out())
  std::vector<std::byte> after;   // as read back

  // after as floats (a copy: the bytes hold no float objects).
  std::vector<float> values_after() const {
    std::vector<float> v(after.size() / sizeof(float));
    if (!v.empty()) std::memcpy(v.data(), after.data(), v.size() * sizeof(float));
    return v;
  }
};

// Everything a run of a case produced.
struct OpResult {
  std::vector<Compared> buffers;
  backend::LossSums loss_sums;  // taken after the run: zero unless the op is the loss
  bool used_reference = false;  // the backend lacks the op and the case ran its reference instead
};

// The buffers of one case on one backend; they live as long as the OpIo, which the backend outlives.
// Inputs are drawn from `seed`, so two OpIos with the same seed give a case the same values.
class OpIo {
 public:
  OpIo(backend::Backend& be, uint32_t seed) : be_(be), gen_(seed) {}
  OpIo(const OpIo&) = delete;
  OpIo& operator=(const OpIo&) = delete;

  backend::Backend& backend() { return be_; }
  // Uniform values in [lo, hi), and a value in [0, n), from this OpIo's sequence.
  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f);
  int64_t random_index(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(gen_); }

  // Device copies the op reads and nobody compares (floats, int64 indices, a uint64 seed...).
  template <class T>
  T* in(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    return static_cast<T*>(upload(values.data(), values.size() * sizeof(T)));
  }
  // Zero-filled, written by the op and compared.
  float* out(std::string name, size_t n, Check check = {});
  // Uploaded, updated by the op and compared.
  float* inout(std::string name, const std::vector<float>& values, Check check = {});
  // A struct the op updates (LossScaleState), compared byte by byte.
  template <class T>
  T* inout_bytes(std::string name, const T& value, Check check = {}) {
    static_assert(std::is_trivially_copyable_v<T>);
    return static_cast<T*>(track(std::move(name), false, check, &value, sizeof(T)));
  }
  // Zero-filled working memory of a case's reference, not compared.
  float* scratch(size_t n);

  // Whether the backend runs q natively; when not, the case runs its reference from other ops and the
  // result says so.
  bool native(const backend::OpQuery& q);

  // The compared buffers as they are now (waits for the backend).
  std::vector<Compared> read();
  // After the run: read() and the loss sums, which are taken (zeroed).
  OpResult finish();

 private:
  void* upload(const void* data, size_t bytes);
  void* track(std::string name, bool floats, Check check, const void* data, size_t bytes);

  struct Tracked {
    Compared initial;
    const void* device;
  };
  backend::Backend& be_;
  std::mt19937 gen_;
  std::vector<backend::DeviceBuffer> buffers_;
  std::vector<Tracked> tracked_;
  bool used_reference_ = false;
};

// Runs a case's operation(s) on the buffers its setup made; be is the backend of that OpIo.
using OpCall = std::function<void(backend::Backend& be)>;

struct OpCase {
  backend::Op op;
  const char* name;  // the operation's name in backend_ops.hpp
  // Across backends (CPU vs CUDA): |a - b| <= tolerance * max(1, |b|) elementwise; 0 asks for equal bits.
  double tolerance;
  OpCall (*setup)(OpIo& io);
};

// gtest names a failing case by its operation.
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// The table: one row per operation of KX_BACKEND_KERNELS, in Op order.
std::span<const OpCase> op_cases();

// Empty when got and want agree: bit for bit (exact), or within the case's tolerances; else what
// differs, a line per buffer.
std::string compare_results(const OpCase& c, const OpResult& got, const OpResult& want, bool exact);
// Empty when a run did what its case says: outputs finite and written (or left alone) as their Check
// says, loss sums only from the loss; else what is wrong.
std::string sanity_problems(const OpCase& c, const OpResult& r);
// Empty when no compared buffer differs from what was uploaded (a capture must run nothing).
std::string changes_since_upload(const std::vector<Compared>& now);

// A seed from KX_TEST_SEED, else a fresh one (print it with a failure).
uint32_t fresh_seed();

}  // namespace kx::test::ops
