// The safetensors layout (8-byte little-endian header length, JSON header, raw little-endian tensors)
// for kx's model files and checkpoints, with two CRC32s in the metadata: one over the tensor bytes and
// one over everything the header says, so any damaged byte is found on load.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kx/tensor.hpp"

namespace kx::io {

using Metadata = std::map<std::string, std::string>;

struct TensorToWrite {
  std::string name;
  Shape shape;
  const float* data = nullptr;  // num_elements(shape) floats
};

// The bytes of a safetensors file holding the tensors (F32, in the order given) and metadata.
std::string encode_safetensors(const std::vector<TensorToWrite>& tensors, Metadata metadata);

struct TensorEntry {
  std::string name;
  Shape shape;
  int64_t begin = 0, end = 0;  // byte offsets into the data section
};

// What decode does with kx's CRC32s in the metadata.
enum class Checksums {
  Required,    // kx's own files: absent or wrong checksums are Corrupt
  IfPresent,   // files from elsewhere (Python's safetensors writes none): checked when there
  Unchecked,   // for the fuzzer, which must reach what lies behind them
};

class SafetensorsFile {
 public:
  // Checks the whole layout and the checksums as `checksums` says; throws Error(Corrupt) naming
  // `source` and the first problem. Only F32 tensors are accepted.
  static SafetensorsFile decode(std::string bytes, const std::string& source, Checksums checksums = Checksums::Required);

  const Metadata& metadata() const { return metadata_; }
  // Metadata value; Corrupt naming the key when absent.
  const std::string& meta(const std::string& key) const;
  const std::vector<TensorEntry>& tensors() const { return tensors_; }  // in file order
  const TensorEntry* find(const std::string& name) const;
  // Copies a tensor's values into out (num_elements(entry.shape) floats).
  void read(const TensorEntry& entry, float* out) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::string bytes_;
  size_t data_start_ = 0;
  Metadata metadata_;
  std::vector<TensorEntry> tensors_;
};

// The metadata of a file from its header alone (no checksums checked); nullopt if it cannot be read.
std::optional<Metadata> peek_metadata(const std::string& path);

// The whole file; throws Error(Io) naming the path.
std::string read_file(const std::string& path);

}  // namespace kx::io
