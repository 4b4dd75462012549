// A minimal protocol-buffers encoder (the wire format only: varints, fixed 32/64-bit, length-delimited
// fields), enough to write TensorBoard's Event and ONNX's ModelProto without libprotobuf. Fields are
// appended in the order they are written; a nested message is written into its own ProtoWriter and
// added with message().
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kx::io {

class ProtoWriter {
 public:
  // int32, int64, uint64, bool and enum fields (negative values as ten-byte varints, as protobuf does).
  void varint(int field, int64_t value);
  void fixed32(int field, uint32_t bits);
  void fixed64(int field, uint64_t bits);
  void float32(int field, float value);   // a `float` field
  void float64(int field, double value);  // a `double` field
  // proto3 leaves a scalar field out when it holds its default (all bits zero): these write nothing then.
  void varint_unless_zero(int field, int64_t value) {
    if (value != 0) varint(field, value);
  }
  void float64_unless_zero(int field, double value);
  // string and bytes fields.
  void bytes(int field, std::string_view data);
  void message(int field, const ProtoWriter& nested) { bytes(field, nested.data()); }
  // Packed repeated fields (proto3's default for scalars).
  void packed_varints(int field, const std::vector<int64_t>& values);
  void packed_doubles(int field, const std::vector<double>& values);

  const std::string& data() const { return out_; }

 private:
  void tag(int field, int wire_type);
  void raw_varint(uint64_t v);
  std::string out_;
};

}  // namespace kx::io
