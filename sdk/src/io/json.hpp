// A small JSON value with a strict parser and a writer, for model configs and checkpoint metadata.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kx::json {

class Value {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<Value>;
  using Object = std::vector<std::pair<std::string, Value>>;  // keeps insertion order

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : type_(Type::Bool), bool_(b) {}
  Value(double d) : type_(Type::Number), number_(d) {}
  Value(int v) : Value(static_cast<double>(v)) {}
  Value(int64_t v) : Value(static_cast<double>(v)) {}
  Value(const char* s) : type_(Type::String), string_(s) {}
  Value(std::string s) : type_(Type::String), string_(std::move(s)) {}
  Value(Array a) : type_(Type::Array), array_(std::move(a)) {}
  Value(Object o) : type_(Type::Object), object_(std::move(o)) {}
  // A number written as a float even when it is whole ("1.0", as Python's json writes a float): Keras
  // refuses an optimizer whose learning_rate reads back as the integer 1.
  static Value real(double d) {
    Value v(d);
    v.real_ = true;
    return v;
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }

  // Typed access; `what` names the value in the error message (InvalidArgument) on a type mismatch.
  bool as_bool(const std::string& what) const;
  double as_number(const std::string& what) const;
  int64_t as_int(const std::string& what) const;  // must be integral
  const std::string& as_string(const std::string& what) const;
  const Array& as_array(const std::string& what) const;
  const Object& as_object(const std::string& what) const;

  // Object member or null when absent (or when this is not an object).
  const Value* find(const std::string& key) const;
  // Object member; InvalidArgument naming `what` and the key when absent.
  const Value& at(const std::string& key, const std::string& what) const;
  // Appends to an object (this must be an object).
  Value& set(const std::string& key, Value v);

  std::string dump() const;

 private:
  void dump_to(std::string& out) const;
  Type type_ = Type::Null;
  bool bool_ = false;
  double number_ = 0;
  bool real_ = false;
  std::string string_;
  Array array_;
  Object object_;
};

// Throws kx::Error(InvalidArgument) with the byte offset of the first problem.
Value parse(const std::string& text);

}  // namespace kx::json
