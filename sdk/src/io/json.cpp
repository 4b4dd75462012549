#include "io/json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kx/error.hpp"

namespace kx::json {
namespace {

const char* type_name(Value::Type t) {
  switch (t) {
    case Value::Type::Null: return "null";
    case Value::Type::Bool: return "a boolean";
    case Value::Type::Number: return "a number";
    case Value::Type::String: return "a string";
    case Value::Type::Array: return "an array";
    case Value::Type::Object: return "an object";
  }
  return "?";
}

[[noreturn]] void wrong_type(const std::string& what, const char* want, Value::Type got) {
  fail(Status::InvalidArgument, what + " must be " + want + ", not " + type_name(got));
}

void escape_to(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Value parse_document() {
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) error("unexpected text after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void error(const std::string& msg) {
    fail(Status::InvalidArgument, "invalid JSON at byte " + std::to_string(pos_) + ": " + msg);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool consume(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) error("nesting deeper than 256");
    skip_ws();
    if (pos_ >= s_.size()) error("unexpected end of input");
    char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value(parse_string());
    if (consume("null")) return Value();
    if (consume("true")) return Value(true);
    if (consume("false")) return Value(false);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    error(std::string("unexpected character '") + c + "'");
  }

  Value parse_number() {
    size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    const size_t first_digit = pos_;
    const size_t integer_digits = digits();
    if (integer_digits == 0) error("a number needs digits");
    if (integer_digits > 1 && s_[first_digit] == '0') error("a number cannot start with 0");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) error("a number needs digits after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) error("a number needs digits in its exponent");
    }
    std::string text = s_.substr(start, pos_ - start);
    double v = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(v)) error("number out of range");
    return Value(v);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > s_.size()) error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else error("bad hex digit in \\u escape");
    }
    return v;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) error("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) error("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (!consume("\\u")) error("unpaired surrogate");
            uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo >= 0xE000) error("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            error("unpaired surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: error(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  Value parse_array(int depth) {
    ++pos_;
    Value::Array items;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Value(std::move(items));
    }
    while (true) {
      items.push_back(parse_value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return Value(std::move(items));
      }
      error("expected ',' or ']'");
    }
  }

  Value parse_object(int depth) {
    ++pos_;
    Value::Object members;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Value(std::move(members));
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') error("expected a string key");
      std::string key = parse_string();
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') error("expected ':'");
      ++pos_;
      for (const auto& m : members)
        if (m.first == key) error("duplicate key \"" + key + "\"");
      members.emplace_back(std::move(key), parse_value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return Value(std::move(members));
      }
      error("expected ',' or '}'");
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

bool Value::as_bool(const std::string& what) const {
  if (type_ != Type::Bool) wrong_type(what, "a boolean", type_);
  return bool_;
}
double Value::as_number(const std::string& what) const {
  if (type_ != Type::Number) wrong_type(what, "a number", type_);
  return number_;
}
int64_t Value::as_int(const std::string& what) const {
  double d = as_number(what);
  if (d != std::floor(d) || std::fabs(d) > 9007199254740992.0)
    fail(Status::InvalidArgument, what + " must be an integer");
  return static_cast<int64_t>(d);
}
const std::string& Value::as_string(const std::string& what) const {
  if (type_ != Type::String) wrong_type(what, "a string", type_);
  return string_;
}
const Value::Array& Value::as_array(const std::string& what) const {
  if (type_ != Type::Array) wrong_type(what, "an array", type_);
  return array_;
}
const Value::Object& Value::as_object(const std::string& what) const {
  if (type_ != Type::Object) wrong_type(what, "an object", type_);
  return object_;
}
const Value* Value::find(const std::string& key) const {
  if (type_ != Type::Object) return nullptr;
  for (const auto& m : object_)
    if (m.first == key) return &m.second;
  return nullptr;
}
const Value& Value::at(const std::string& key, const std::string& what) const {
  as_object(what);
  const Value* v = find(key);
  if (!v) fail(Status::InvalidArgument, what + " has no \"" + key + "\"");
  return *v;
}
Value& Value::set(const std::string& key, Value v) {
  if (type_ != Type::Object) fail(Status::Internal, "json set on a non-object");
  object_.emplace_back(key, std::move(v));
  return object_.back().second;
}

std::string Value::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

void Value::dump_to(std::string& out) const {
  switch (type_) {
    case Type::Null: out += "null"; return;
    case Type::Bool: out += bool_ ? "true" : "false"; return;
    case Type::Number: {
      char buf[32];
      if (number_ == std::floor(number_) && std::fabs(number_) < 1e15)
        std::snprintf(buf, sizeof buf, real_ ? "%.1f" : "%.0f", number_);
      else  // the shortest text that reads back as the same double, as Python's repr (0.99, not 0.98999999999999999)
        *std::to_chars(buf, buf + sizeof buf, number_).ptr = '\0';
      out += buf;
      return;
    }
    case Type::String: escape_to(string_, out); return;
    case Type::Array:
      out += '[';
      for (size_t i = 0; i < array_.size(); ++i) {
        if (i) out += ", ";
        array_[i].dump_to(out);
      }
      out += ']';
      return;
    case Type::Object:
      out += '{';
      for (size_t i = 0; i < object_.size(); ++i) {
        if (i) out += ", ";
        escape_to(object_[i].first, out);
        out += ": ";
        object_[i].second.dump_to(out);
      }
      out += '}';
      return;
  }
}

Value parse(const std::string& text) { return Parser(text).parse_document(); }

}  // namespace kx::json
