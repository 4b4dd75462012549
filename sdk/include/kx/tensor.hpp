// Shapes and aligned host buffers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace kx {

// A shape without the batch dimension (per sample), or with it where a function says so.
using Shape = std::vector<int64_t>;

// The most values one tensor, arena or dataset may hold: 2^40 (4 TiB of float32), beyond any real
// model and far from int64 overflow in later sums. Larger shapes are refused before anything overflows.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

inline int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::string to_string(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// 64-byte aligned allocation so that SIMD kernels may use aligned loads at the start of each buffer.
template <class T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T) - kAlignment) throw std::bad_alloc();
    std::size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes == 0 ? kAlignment : bytes);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) noexcept { std::free(p); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const AlignedAllocator<U>&) const noexcept { return false; }
};

using FloatBuffer = std::vector<float, AlignedAllocator<float>>;

}  // namespace kx
