#include "data/npy_format.hpp"

#include <cctype>
#include <cstring>

#include "kx/error.hpp"

namespace kx::data {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

// A cursor over the header's dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  [[noreturn]] void bad(const std::string& why) const {
    fail(Status::Corrupt, name_ + ": not a valid .npy header (" + why + " at character " + std::to_string(i_) + ")");
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(std::string("expected '") + c + "'");
  }
  std::string string_literal() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) bad("expected a string");
    const char quote = s_[i_++];
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != quote) ++i_;
    if (i_ >= s_.size()) bad("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const size_t n = std::strlen(word);
      if (s_.substr(i_, n) == word) {
        i_ += n;
        return value;
      }
    }
    bad("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (!eat(')')) {
      skip_space();
      int64_t v = 0;
      size_t digits = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        if (v > (int64_t{1} << 50)) bad("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
        ++digits;
      }
      if (digits == 0) bad("expected a dimension");
      skip_space();
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2's long suffix
      shape.push_back(v);
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }
  bool at_end() {
    skip_space();
    return i_ == s_.size();
  }

 private:
  std::string_view s_;
  const std::string& name_;
  size_t i_ = 0;
};

uint32_t little_u16(const char* p) {
  return static_cast<uint32_t>(static_cast<unsigned char>(p[0])) | static_cast<uint32_t>(static_cast<unsigned char>(p[1])) << 8;
}

// numpy's descr for the dtypes kx takes: '<' little-endian, '|' no byte order (one byte).
bool dtype_of(const std::string& descr, DType& t, size_t& bytes) {
  struct Known {
    const char* descr;
    DType t;
    size_t bytes;
  };
  static constexpr Known kKnown[] = {{"<f4", DType::F32, 4}, {"<f8", DType::F64, 8}, {"|u1", DType::U8, 1},
                                     {"<u1", DType::U8, 1},  {"<i4", DType::I32, 4}, {"<i8", DType::I64, 8}};
  for (const Known& k : kKnown) {
    if (descr == k.descr) {
      t = k.t;
      bytes = k.bytes;
      return true;
    }
  }
  return false;
}

}  // namespace

NpyHeader parse_npy_header(std::string_view bytes, const std::string& name) {
  if (bytes.size() < kMagicBytes + 4 || std::memcmp(bytes.data(), kMagic, kMagicBytes) != 0)
    fail(Status::Corrupt, name + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    fail(Status::InvalidArgument, name + ": .npy format version " + std::to_string(major) +
                                      " is not supported (versions 1, 2 and 3 are)");
  size_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = little_u16(bytes.data() + 8);
    prefix = 10;
  } else {
    if (bytes.size() < 12) fail(Status::Corrupt, name + ": truncated .npy header");
    header_len = little_u16(bytes.data() + 8) | static_cast<size_t>(little_u16(bytes.data() + 10)) << 16;
    prefix = 12;
  }
  if (bytes.size() < prefix || header_len > bytes.size() - prefix)
    fail(Status::Corrupt, name + ": truncated .npy header (" + std::to_string(header_len) + " bytes announced)");
  DictParser p(bytes.substr(prefix, header_len), name);
  std::string descr;
  bool fortran = false, have_descr = false, have_order = false, have_shape = false;
  Shape shape;
  p.expect('{');
  while (!p.eat('}')) {
    const std::string key = p.string_literal();
    p.expect(':');
    if (key == "descr") {
      descr = p.string_literal();
      have_descr = true;
    } else if (key == "fortran_order") {
      fortran = p.boolean();
      have_order = true;
    } else if (key == "shape") {
      shape = p.tuple();
      have_shape = true;
    } else {
      p.bad("unknown key '" + key + "'");
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  if (!p.at_end()) p.bad("text after the dict");
  if (!have_descr || !have_order || !have_shape) p.bad("descr, fortran_order or shape missing");
  NpyHeader h;
  if (!dtype_of(descr, h.dtype, h.item_bytes))
    fail(Status::InvalidArgument, name + ": dtype '" + descr +
                                      "' is not supported (little-endian float32 <f4, float64 <f8, uint8 |u1, "
                                      "int32 <i4 and int64 <i8 are)");
  if (fortran)
    fail(Status::InvalidArgument, name + ": the array is in Fortran order; save it in C order "
                                         "(numpy.ascontiguousarray) first");
  if (shape.empty()) fail(Status::InvalidArgument, name + ": a 0-d array has no sample dimension");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) fail(Status::InvalidArgument, name + ": shape " + to_string(shape) + " has an empty dimension");
    if (n > kMaxElements / d) fail(Status::InvalidArgument, name + ": shape " + to_string(shape) + " is too large");
    n *= d;
  }
  h.shape = std::move(shape);
  h.elements = n;
  h.data_offset = prefix + header_len;
  return h;
}

void check_npy_data_length(const NpyHeader& h, size_t file_bytes, const std::string& name) {
  const size_t want = static_cast<size_t>(h.elements) * h.item_bytes;
  const size_t have = file_bytes - std::min(file_bytes, h.data_offset);
  if (have < want)
    fail(Status::Corrupt, name + ": truncated (" + std::to_string(have) + " bytes of data, shape " +
                              to_string(h.shape) + " needs " + std::to_string(want) + ")");
  if (have > want)
    fail(Status::Corrupt, name + ": " + std::to_string(have - want) + " bytes after the array's data (shape " +
                              to_string(h.shape) + ")");
}

}  // namespace kx::data
