// numpy's .npy format: the header (magic, version, a Python dict literal with descr, fortran_order and
// shape) and where the data starts. Kept apart from the file reading so that the fuzzer feeds it bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "kx/dataset.hpp"

namespace kx::data {

struct NpyHeader {
  DType dtype = DType::F32;
  Shape shape;                // rank >= 1: shape[0] is the sample count
  size_t data_offset = 0;     // bytes before the first value
  size_t item_bytes = 0;
  int64_t elements = 0;
};

// Parses the header at the start of `bytes` (at least the whole header). Accepts versions 1, 2 and 3,
// little-endian f4/f8/i4/i8 and bytes u1 ('<u1' or '|u1'), C order. InvalidArgument naming `name` and the
// reason for anything else (another dtype, byte order, Fortran order, a 0-d array); Corrupt for a
// header that is not one (bad magic, truncated, not a dict).
NpyHeader parse_npy_header(std::string_view bytes, const std::string& name);

// The whole dataset array of a file's bytes (header + data): checks the data length.
void check_npy_data_length(const NpyHeader& h, size_t file_bytes, const std::string& name);

}  // namespace kx::data
