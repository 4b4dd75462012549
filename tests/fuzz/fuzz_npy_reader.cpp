// libFuzzer target for the .npy reader: any bytes give an array or a kx::Error, never a crash, a hang
// or an allocation beyond the input's own size.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "data/npy_format.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const kx::data::NpyHeader h = kx::data::parse_npy_header(bytes, "fuzz-input");
    kx::data::check_npy_data_length(h, size, "fuzz-input");  // the data is the input's own bytes
    std::vector<uint64_t> aligned((size - h.data_offset + 7) / 8);
    std::memcpy(aligned.data(), data + h.data_offset, size - h.data_offset);
    const std::vector<int64_t> labels(static_cast<size_t>(h.shape[0]), 0);
    kx::Dataset::from_arrays(aligned.data(), h.dtype, h.shape, labels.data(), kx::DType::I64, {h.shape[0]});
  } catch (const kx::Error&) {
    // a clear error is the expected outcome for damaged input
  }
  return 0;
}
