// An HDF5 file made in memory through libhdf5 (io/hdf5_library.hpp): what kx writes into a .keras
// file's model.weights.h5. kx writes only its own data here; reading a file, which may be damaged or
// hostile, is done by the kx-hdf5-reader process (io/hdf5_tree.hpp), never by libhdf5 in libkx.
// Paths are "group/sub/name" from the root.
#pragma once
#include <string>

#include "io/hdf5_library.hpp"
#include "kx/tensor.hpp"

namespace kx::io {

class Hdf5Writer {
 public:
  // A new, empty file in memory. Unsupported without libhdf5.
  Hdf5Writer();
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;

  // Groups are made along the path as needed.
  void create_group(const std::string& path);
  void write(const std::string& path, const Shape& shape, const float* values);
  void write_scalar_int64(const std::string& path, int64_t value);
  void write_scalar_float(const std::string& path, float value);
  // A scalar variable-length UTF-8 string attribute (as h5py writes a Python str).
  void set_string(const std::string& path, const std::string& attribute, const std::string& value);
  // The file's bytes, flushed.
  std::string image() const;

 private:
  h5::Session session_;  // first: the HDF5 lock outlives the file's id
  h5::Id file_;
  const h5::Api& api() const { return session_.api(); }
  h5::Id open_or_create_group(const std::string& path);
  void write_dataset(const std::string& path, const Shape& shape, h5::hid_t file_type, h5::hid_t memory_type,
                     const void* data);
};

}  // namespace kx::io
