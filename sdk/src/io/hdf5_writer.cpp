#include "io/hdf5_writer.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kx/error.hpp"

namespace kx::io {

using h5::hid_t;
using h5::Id;

namespace {

// "a/b/c" -> {"a", "a/b", "a/b/c"}; empty: the root, no prefixes.
std::vector<std::string> prefixes(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size() && !path.empty()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    out.push_back(path.substr(0, slash));
    start = slash + 1;
  }
  return out;
}

std::string unique_name(const void* self) {
  return "kx-memory-" + std::to_string(reinterpret_cast<uintptr_t>(self)) + ".h5";
}

}  // namespace

Hdf5Writer::Hdf5Writer() {
  const Id fapl(api().pcreate(*api().file_access_class), api().pclose);
  require(fapl.ok() && api().pset_fapl_core(fapl.get(), 1 << 20, 0) >= 0, Status::Internal,
          "HDF5 could not be set up to write to memory");
  file_ = Id(api().fcreate(unique_name(this).c_str(), h5::kTruncate, h5::kDefault, fapl.get()), api().fclose);
  require(file_.ok(), Status::Internal, "HDF5 could not create a file in memory");
}

Id Hdf5Writer::open_or_create_group(const std::string& path) {
  for (const std::string& p : prefixes(path))
    if (api().lexists(file_.get(), p.c_str(), h5::kDefault) <= 0) {
      const Id g(api().gcreate2(file_.get(), p.c_str(), h5::kDefault, h5::kDefault, h5::kDefault), api().gclose);
      require(g.ok(), Status::Internal, "HDF5 could not create group \"" + p + "\"");
    }
  Id g(api().gopen2(file_.get(), path.empty() ? "/" : path.c_str(), h5::kDefault), api().gclose);
  require(g.ok(), Status::Internal, "HDF5 could not open group \"" + path + "\"");
  return g;
}

void Hdf5Writer::create_group(const std::string& path) { open_or_create_group(path); }

void Hdf5Writer::write_dataset(const std::string& path, const Shape& shape, hid_t file_type, hid_t memory_type,
                               const void* data) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos) open_or_create_group(path.substr(0, slash));
  std::vector<h5::hsize_t> dims(shape.begin(), shape.end());
  const Id space(shape.empty() ? api().screate(h5::kSpaceScalar)
                               : api().screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                 api().sclose);
  const Id d(space.ok() ? api().dcreate2(file_.get(), path.c_str(), file_type, space.get(), h5::kDefault, h5::kDefault,
                                         h5::kDefault)
                        : -1,
             api().dclose);
  require(d.ok() && api().dwrite(d.get(), memory_type, h5::kDefault, h5::kDefault, h5::kDefault, data) >= 0,
          Status::Internal, "HDF5 could not write dataset \"" + path + "\"");
}

void Hdf5Writer::write(const std::string& path, const Shape& shape, const float* values) {
  write_dataset(path, shape, *api().ieee_f32le, *api().native_float, values);
}

void Hdf5Writer::write_scalar_int64(const std::string& path, int64_t value) {
  write_dataset(path, {}, *api().std_i64le, *api().native_int64, &value);
}

void Hdf5Writer::write_scalar_float(const std::string& path, float value) {
  write_dataset(path, {}, *api().ieee_f32le, *api().native_float, &value);
}

void Hdf5Writer::set_string(const std::string& path, const std::string& attribute, const std::string& value) {
  const Id obj(api().oopen(file_.get(), path.empty() ? "/" : path.c_str(), h5::kDefault), api().oclose);
  const Id type(api().tcopy(*api().c_s1), api().tclose);
  const Id space(api().screate(h5::kSpaceScalar), api().sclose);
  require(obj.ok() && type.ok() && space.ok() && api().tset_size(type.get(), h5::kVariable) >= 0 &&
              api().tset_cset(type.get(), h5::kCsetUtf8) >= 0,
          Status::Internal, "HDF5 could not prepare attribute \"" + attribute + "\" of \"" + path + "\"");
  const Id attr(api().acreate2(obj.get(), attribute.c_str(), type.get(), space.get(), h5::kDefault, h5::kDefault),
                api().aclose);
  const char* text = value.c_str();
  require(attr.ok() && api().awrite(attr.get(), type.get(), &text) >= 0, Status::Internal,
          "HDF5 could not write attribute \"" + attribute + "\" of \"" + path + "\"");
}

std::string Hdf5Writer::image() const {
  require(api().fflush(file_.get(), h5::kScopeGlobal) >= 0, Status::Internal, "HDF5 could not flush a file in memory");
  const long size = api().fget_file_image(file_.get(), nullptr, 0);
  require(size > 0, Status::Internal, "HDF5 could not size a file in memory");
  std::string bytes(static_cast<size_t>(size), '\0');
  require(api().fget_file_image(file_.get(), bytes.data(), bytes.size()) == size, Status::Internal,
          "HDF5 could not copy a file out of memory");
  return bytes;
}

}  // namespace kx::io
