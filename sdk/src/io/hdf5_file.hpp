// An HDF5 file held in memory, read or written through libhdf5 (io/hdf5_library.hpp): what Keras's
// .h5 and .keras weight files need and no more. Paths are "group/sub/name" from the root.
//
// Reading distrusts the file: only hard links are followed (a soft or external link could reach
// another file), external and virtual datasets are refused, a dataset is read only into a buffer
// of the shape the caller expects, and only when the file holds at least the bytes that shape
// needs. Any failure is Corrupt naming the source and the path.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/hdf5_library.hpp"
#include "kx/tensor.hpp"

namespace kx::io {

class Hdf5File {
 public:
  // A file from its bytes (copied); source names it in errors. Unsupported without libhdf5, Corrupt
  // when the bytes are no HDF5 file.
  Hdf5File(const std::string& bytes, std::string source);
  // A new, empty file in memory, to write (image() returns its bytes).
  Hdf5File();
  ~Hdf5File();
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  const std::string& source() const { return source_; }

  enum class Kind { None, Group, Dataset, Other };
  // What path is: None when a component is missing or is no hard link.
  Kind kind(const std::string& path) const;
  bool is_group(const std::string& path) const { return kind(path) == Kind::Group; }
  bool is_dataset(const std::string& path) const { return kind(path) == Kind::Dataset; }
  // The names in a group (empty path: the root), in HDF5's name order.
  std::vector<std::string> children(const std::string& group) const;
  // A string attribute of the object at path (scalar: one string; a 1-D array: each), variable or
  // fixed length; nullopt when the object has no such attribute. Corrupt when it is no string.
  std::optional<std::vector<std::string>> strings(const std::string& path, const std::string& attribute) const;
  // A dataset's shape ({} for a scalar) and whether it holds numbers (integers or floats).
  Shape shape(const std::string& path) const;
  // Its values converted to float32 into out, which holds num_elements(expected) floats: Corrupt
  // unless the dataset has that shape and holds numbers.
  void read(const std::string& path, const Shape& expected, float* out) const;
  // A scalar (or one-element) integer or float dataset, as a double.
  double read_scalar(const std::string& path) const;

  // Writing (a file made by Hdf5File()). Groups are made along the path as needed.
  void create_group(const std::string& path);
  void write(const std::string& path, const Shape& shape, const float* values);
  void write_scalar_int64(const std::string& path, int64_t value);
  void write_scalar_float(const std::string& path, float value);
  // A scalar variable-length UTF-8 string attribute (as h5py writes a Python str).
  void set_string(const std::string& path, const std::string& attribute, const std::string& value);
  // The file's bytes, flushed.
  std::string image() const;

 private:
  struct Id;
  h5::Session session_;  // first: the HDF5 lock outlives every id below
  std::string source_;
  std::unique_ptr<Id> file_;
  const h5::Api& api() const { return session_.api(); }
  [[noreturn]] void corrupt(const std::string& path, const std::string& what) const;
  Id open_object(const std::string& path) const;
  Id open_or_create_group(const std::string& path);
  void write_dataset(const std::string& path, const Shape& shape, h5::hid_t file_type, h5::hid_t memory_type,
                     const void* data);
};

// The signature at the start of every file Keras writes (h5py puts no user block before it).
bool looks_like_hdf5(const std::string& bytes);

}  // namespace kx::io
