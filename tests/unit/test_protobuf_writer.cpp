// The protobuf encoder and CRC-32C behind TensorBoard's files and ONNX export, against the wire
// format's published examples (protobuf's encoding guide) and CRC-32C's check value.
#include <gtest/gtest.h>

#include <string>

#include "io/crc32c.hpp"
#include "io/protobuf_writer.hpp"

namespace kx::io {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s.push_back(static_cast<char>(v));
  return s;
}

TEST(Crc32c, CheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xe3069283u);  // the catalogue's check value of CRC-32/ISCSI
  EXPECT_EQ(crc32c(""), 0u);
  const uint32_t c = crc32c("123456789");
  EXPECT_EQ(masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(ProtoWriter, VarintsAsTheEncodingGuide) {
  ProtoWriter w;
  w.varint(1, 150);  // field 1 = 150: 08 96 01
  EXPECT_EQ(w.data(), bytes({0x08, 0x96, 0x01}));
  ProtoWriter n;
  n.varint(2, -1);  // int64 -1: ten bytes
  EXPECT_EQ(n.data(), bytes({0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  ProtoWriter z;
  z.varint_unless_zero(3, 0);
  z.float64_unless_zero(4, 0.0);
  EXPECT_TRUE(z.data().empty());
  z.float64_unless_zero(4, -0.0);  // not the default: written
  EXPECT_EQ(z.data().size(), 9u);
}

TEST(ProtoWriter, LengthDelimitedAndFixed) {
  ProtoWriter s;
  s.bytes(2, "testing");  // 12 07 74 65 73 74 69 6e 67
  EXPECT_EQ(s.data(), bytes({0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}));
  ProtoWriter outer;
  outer.message(3, s);  // 1a 09 <s>
  EXPECT_EQ(outer.data(), bytes({0x1a, 0x09}) + s.data());
  ProtoWriter f;
  f.float32(2, 1.0f);   // 15 00 00 80 3f
  f.float64(1, -2.0);   // 09 00 00 00 00 00 00 00 c0
  EXPECT_EQ(f.data(), bytes({0x15, 0, 0, 0x80, 0x3f, 0x09, 0, 0, 0, 0, 0, 0, 0, 0xc0}));
  ProtoWriter p;
  p.packed_varints(4, {3, 270, 86942});  // 22 06 03 8e 02 9e a7 05
  EXPECT_EQ(p.data(), bytes({0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}));
  ProtoWriter d;
  d.packed_doubles(6, {1.0});
  EXPECT_EQ(d.data(), bytes({0x32, 0x08, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}));
}

}  // namespace
}  // namespace kx::io
