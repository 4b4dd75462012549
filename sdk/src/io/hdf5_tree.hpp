// An HDF5 file as kx reads Keras's files from it: the groups, datasets and attributes that
// kx-hdf5-reader, a process of its own, got from libhdf5 (io/hdf5_stream.hpp). libhdf5 never parses a
// file in the caller's process: a file that crashes it, spins it or makes it allocate without bound
// ends that child, and kx reports the file as Corrupt naming it.
//
// The stream is distrusted as the file is: every length is checked against what remains, every
// parent, name and count against the stream's rules, and the stream's length against the file's size.
// Paths are "group/sub/name" from the root ("" is the root). Only hard links are in the tree (a soft
// or external link could reach another file); a dataset's values are numbers the file stores itself
// (no external or virtual dataset). Every failure is Corrupt naming the source and the path.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kx/tensor.hpp"

namespace kx::io {

class Hdf5Tree {
 public:
  // An HDF5 file's bytes, read by kx-hdf5-reader; source names it in errors. Corrupt when the bytes
  // are no HDF5 file, damage crashes or stops the reader, or its output is malformed; Unsupported
  // when the reader or libhdf5 is missing.
  static Hdf5Tree read(const std::string& bytes, const std::string& source);
  // The reader's output for a file of file_size bytes (read() runs the reader and calls this; the
  // fuzzer calls it directly).
  Hdf5Tree(std::string stream, uint64_t file_size, std::string source);

  const std::string& source() const { return source_; }

  enum class Kind { None, Group, Dataset, Other };
  Kind kind(const std::string& path) const;
  bool is_group(const std::string& path) const { return kind(path) == Kind::Group; }
  bool is_dataset(const std::string& path) const { return kind(path) == Kind::Dataset; }
  // The names in a group (empty path: the root), in HDF5's name order.
  std::vector<std::string> children(const std::string& group) const;
  // A string attribute of the object at path (scalar: one string; a 1-D array: each), variable or
  // fixed length; nullopt when the object has no such attribute. Corrupt when it is no string.
  std::optional<std::vector<std::string>> strings(const std::string& path, const std::string& attribute) const;
  // A dataset's shape ({} for a scalar).
  Shape shape(const std::string& path) const;
  // Its values as float32 into out, which holds num_elements(expected) floats: Corrupt unless the
  // dataset has that shape and holds numbers.
  void read(const std::string& path, const Shape& expected, float* out) const;
  // A scalar (or one-element) integer or float dataset, as a double (an integer exactly).
  double read_scalar(const std::string& path) const;

 private:
  struct Attribute {
    enum class Form { Strings, NotString, Unreadable } form = Form::NotString;
    std::vector<std::string> values;  // Strings
    std::string problem;              // Unreadable
  };
  struct Node {
    Kind kind = Kind::None;
    std::vector<std::string> names;              // a group's members, in order
    std::map<std::string, uint32_t> members;     // a group's members by name
    std::map<std::string, Attribute> attributes;
    // A dataset: its shape, and where its float32 values are in the stream (count of them), or why not.
    bool has_body = false;
    bool numbers = false;
    int type_class = -1;
    std::string problem;
    Shape shape;
    size_t values_at = 0, count = 0;
    std::optional<int64_t> exact;
  };
  std::string stream_;
  std::string source_;
  std::vector<Node> nodes_;

  void parse(uint64_t file_size);
  const Node* find(const std::string& path) const;
  const Node& dataset(const std::string& path) const;
  [[noreturn]] void corrupt(const std::string& path, const std::string& what) const;
};

// The signature at the start of every file Keras writes (h5py puts no user block before it).
bool looks_like_hdf5(const std::string& bytes);

}  // namespace kx::io
