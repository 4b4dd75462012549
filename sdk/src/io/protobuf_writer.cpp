#include "io/protobuf_writer.hpp"

#include <cstring>

namespace kx::io {
namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void append_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

void ProtoWriter::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

void ProtoWriter::tag(int field, int wire_type) {
  raw_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::varint(int field, int64_t value) {
  tag(field, kVarint);
  raw_varint(static_cast<uint64_t>(value));
}

void ProtoWriter::fixed32(int field, uint32_t bits) {
  tag(field, kFixed32);
  append_le(out_, bits, 4);
}

void ProtoWriter::fixed64(int field, uint64_t bits) {
  tag(field, kFixed64);
  append_le(out_, bits, 8);
}

void ProtoWriter::float32(int field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  fixed32(field, bits);
}

void ProtoWriter::float64(int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  fixed64(field, bits);
}

void ProtoWriter::float64_unless_zero(int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (bits != 0) fixed64(field, bits);  // -0.0 is not the default
}

void ProtoWriter::bytes(int field, std::string_view data) {
  tag(field, kLengthDelimited);
  raw_varint(data.size());
  out_.append(data);
}

void ProtoWriter::packed_varints(int field, const std::vector<int64_t>& values) {
  ProtoWriter body;
  for (int64_t v : values) body.raw_varint(static_cast<uint64_t>(v));
  bytes(field, body.out_);
}

void ProtoWriter::packed_doubles(int field, const std::vector<double>& values) {
  std::string body;
  body.reserve(values.size() * 8);
  for (double v : values) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    append_le(body, bits, 8);
  }
  bytes(field, body);
}

}  // namespace kx::io
