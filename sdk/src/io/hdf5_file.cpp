#include "io/hdf5_file.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kx/error.hpp"

namespace kx::io {

using h5::hid_t;

// An HDF5 id and the call that closes it.
struct Hdf5File::Id {
  hid_t id = -1;
  h5::herr_t (*close)(hid_t) = nullptr;
  Id() = default;
  Id(hid_t i, h5::herr_t (*c)(hid_t)) : id(i), close(c) {}
  Id(Id&& o) noexcept : id(std::exchange(o.id, -1)), close(o.close) {}
  Id& operator=(Id&&) = delete;
  Id(const Id&) = delete;
  ~Id() {
    if (id >= 0 && close) close(id);
  }
  bool ok() const { return id >= 0; }
};

namespace {

constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
// Past these, a name, an attribute or a group is no Keras file's: refused before anything that size
// is allocated.
constexpr size_t kMaxName = 1 << 16;
constexpr int kMaxRank = 32;
// Deflate shrinks data at most about 1032 times: a dataset claiming more is a bomb, not weights.
constexpr double kMaxCompression = 1100;

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

bool valid_path(const std::string& path) {
  if (path.empty()) return true;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

std::string unique_name(const void* self) {
  return "kx-memory-" + std::to_string(reinterpret_cast<uintptr_t>(self)) + ".h5";
}

}  // namespace

bool looks_like_hdf5(const std::string& bytes) { return bytes.compare(0, 8, kSignature, 8) == 0; }

Hdf5File::Hdf5File(const std::string& bytes, std::string source) : source_(std::move(source)) {
  require(looks_like_hdf5(bytes), Status::Corrupt, source_ + ": not an HDF5 file (no HDF5 signature)");
  const Id fapl(api().pcreate(*api().file_access_class), api().pclose);
  require(fapl.ok() && api().pset_fapl_core(fapl.id, 1 << 16, 0) >= 0 &&
              api().pset_file_image(fapl.id, const_cast<char*>(bytes.data()), bytes.size()) >= 0,
          Status::Internal, source_ + ": HDF5 could not be set up to read from memory");
  file_ = std::make_unique<Id>(api().fopen(unique_name(this).c_str(), h5::kReadOnly, fapl.id), api().fclose);
  require(file_->ok(), Status::Corrupt, source_ + ": HDF5 cannot open it (damaged or truncated)");
}

Hdf5File::Hdf5File() : source_("(new HDF5 file)") {
  const Id fapl(api().pcreate(*api().file_access_class), api().pclose);
  require(fapl.ok() && api().pset_fapl_core(fapl.id, 1 << 20, 0) >= 0, Status::Internal,
          "HDF5 could not be set up to write to memory");
  file_ = std::make_unique<Id>(api().fcreate(unique_name(this).c_str(), h5::kTruncate, h5::kDefault, fapl.id),
                               api().fclose);
  require(file_->ok(), Status::Internal, "HDF5 could not create a file in memory");
}

Hdf5File::~Hdf5File() = default;

void Hdf5File::corrupt(const std::string& path, const std::string& what) const {
  fail(Status::Corrupt, source_ + ": \"" + (path.empty() ? "/" : path) + "\" " + what);
}

Hdf5File::Kind Hdf5File::kind(const std::string& path) const {
  if (!valid_path(path)) return Kind::None;
  for (const std::string& p : prefixes(path)) {
    if (api().lexists(file_->id, p.c_str(), h5::kDefault) <= 0) return Kind::None;
    // Large enough for H5L_info_t (1.10) and H5L_info2_t (1.12 on); the type is their first member.
    alignas(16) unsigned char info[128] = {};
    if (api().lget_info(file_->id, p.c_str(), info, h5::kDefault) < 0) return Kind::None;
    int type = 0;
    std::memcpy(&type, info, sizeof type);
    if (type != h5::kLinkHard) return Kind::None;
  }
  const Id obj(api().oopen(file_->id, path.empty() ? "/" : path.c_str(), h5::kDefault), api().oclose);
  if (!obj.ok()) return Kind::None;
  const int type = api().iget_type(obj.id);
  return type == h5::kIdGroup ? Kind::Group : type == h5::kIdDataset ? Kind::Dataset : Kind::Other;
}

Hdf5File::Id Hdf5File::open_object(const std::string& path) const {
  if (kind(path) == Kind::None) corrupt(path, "is missing (or is a link kx does not follow)");
  Id obj(api().oopen(file_->id, path.empty() ? "/" : path.c_str(), h5::kDefault), api().oclose);
  if (!obj.ok()) corrupt(path, "cannot be opened");
  return obj;
}

std::vector<std::string> Hdf5File::children(const std::string& group) const {
  if (kind(group) != Kind::Group) corrupt(group, "is no group");
  const Id g(api().gopen2(file_->id, group.empty() ? "/" : group.c_str(), h5::kDefault), api().gclose);
  h5::GroupInfo info{};
  if (!g.ok() || api().gget_info(g.id, &info) < 0) corrupt(group, "cannot be listed");
  if (info.nlinks > (1u << 24)) corrupt(group, "claims " + std::to_string(info.nlinks) + " members");
  std::vector<std::string> names;
  for (h5::hsize_t i = 0; i < info.nlinks; ++i) {
    const long n = api().lget_name_by_idx(g.id, ".", 0, 0, i, nullptr, 0, h5::kDefault);
    if (n < 0 || static_cast<size_t>(n) > kMaxName) corrupt(group, "has a member name that cannot be read");
    std::string name(static_cast<size_t>(n) + 1, '\0');
    if (api().lget_name_by_idx(g.id, ".", 0, 0, i, name.data(), name.size(), h5::kDefault) != n)
      corrupt(group, "has a member name that cannot be read");
    name.resize(static_cast<size_t>(n));
    names.push_back(std::move(name));
  }
  return names;
}

std::optional<std::vector<std::string>> Hdf5File::strings(const std::string& path, const std::string& attribute) const {
  const Id obj = open_object(path);
  const int exists = api().aexists(obj.id, attribute.c_str());
  if (exists < 0) corrupt(path, "has attributes that cannot be read");
  if (exists == 0) return std::nullopt;
  const std::string what = "attribute \"" + attribute + "\"";
  const Id attr(api().aopen(obj.id, attribute.c_str(), h5::kDefault), api().aclose);
  const Id type(attr.ok() ? api().aget_type(attr.id) : -1, api().tclose);
  const Id space(attr.ok() ? api().aget_space(attr.id) : -1, api().sclose);
  if (!type.ok() || !space.ok()) corrupt(path, "has an " + what + " that cannot be read");
  if (api().tget_class(type.id) != h5::kClassString) corrupt(path, "has an " + what + " that is no string");
  const int rank = api().sget_simple_extent_ndims(space.id);
  const long long count = api().sget_simple_extent_npoints(space.id);
  if (rank < 0 || rank > 1 || count < 0 || count > (1 << 20)) corrupt(path, "has an " + what + " of an unexpected shape");
  const auto n = static_cast<size_t>(count);
  std::vector<std::string> out;
  const Id memory(api().tcopy(type.id), api().tclose);  // the file's string type: no conversion
  if (!memory.ok()) corrupt(path, "has an " + what + " that cannot be read");
  if (api().tis_variable_str(type.id) > 0) {
    std::vector<char*> ptrs(n, nullptr);
    const bool read = api().aread(attr.id, memory.id, ptrs.data()) >= 0;
    // HDF5 allocated each string: copy, then free every one, whatever happens.
    for (char* p : ptrs) {
      if (read) out.emplace_back(p ? p : "");
      if (p) api().free_memory(p);
    }
    if (!read) corrupt(path, "has an " + what + " that cannot be read");
    return out;
  }
  const size_t size = api().tget_size(type.id);
  if (size == 0 || size > kMaxName || n * size > api().aget_storage_size(attr.id))
    corrupt(path, "has an " + what + " larger than what the file stores");
  std::string bytes(n * size, '\0');
  if (api().aread(attr.id, memory.id, bytes.data()) < 0) corrupt(path, "has an " + what + " that cannot be read");
  for (size_t i = 0; i < n; ++i) {
    const std::string one = bytes.substr(i * size, size);
    out.push_back(one.substr(0, one.find('\0')));  // NUL- or space-padded as written
  }
  return out;
}

Shape Hdf5File::shape(const std::string& path) const {
  if (kind(path) != Kind::Dataset) corrupt(path, "is no dataset");
  const Id d(api().dopen2(file_->id, path.c_str(), h5::kDefault), api().dclose);
  const Id space(d.ok() ? api().dget_space(d.id) : -1, api().sclose);
  if (!space.ok()) corrupt(path, "cannot be opened");
  const int rank = api().sget_simple_extent_ndims(space.id);
  if (rank < 0 || rank > kMaxRank) corrupt(path, "has an unexpected rank");
  std::vector<h5::hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && api().sget_simple_extent_dims(space.id, dims.data(), nullptr) != rank) corrupt(path, "has no readable shape");
  Shape s;
  for (h5::hsize_t v : dims) {
    if (v > static_cast<h5::hsize_t>(kMaxElements)) corrupt(path, "has a dimension of " + std::to_string(v));
    s.push_back(static_cast<int64_t>(v));
  }
  return s;
}

void Hdf5File::read(const std::string& path, const Shape& expected, float* out) const {
  const Shape s = shape(path);
  if (s != expected) corrupt(path, "has shape " + to_string(s) + ", " + to_string(expected) + " is expected");
  const Id d(api().dopen2(file_->id, path.c_str(), h5::kDefault), api().dclose);
  const Id type(d.ok() ? api().dget_type(d.id) : -1, api().tclose);
  const Id plist(d.ok() ? api().dget_create_plist(d.id) : -1, api().pclose);
  if (!type.ok() || !plist.ok()) corrupt(path, "cannot be opened");
  const int cls = api().tget_class(type.id);
  if (cls != h5::kClassFloat && cls != h5::kClassInteger)
    corrupt(path, "holds no numbers (HDF5 type class " + std::to_string(cls) + ")");
  if (api().pget_external_count(plist.id) != 0 || api().pget_layout(plist.id) == h5::kLayoutVirtual)
    corrupt(path, "keeps its data outside the file (external or virtual dataset)");
  const int64_t n = num_elements(s);
  const double declared = static_cast<double>(n) * static_cast<double>(api().tget_size(type.id));
  const auto stored = static_cast<double>(api().dget_storage_size(d.id));
  if (n > 0 && (stored <= 0 || declared > stored * kMaxCompression))
    corrupt(path, "declares " + std::to_string(static_cast<int64_t>(declared)) + " bytes but stores " +
                      std::to_string(static_cast<int64_t>(stored)));
  if (n > 0 && api().dread(d.id, *api().native_float, h5::kDefault, h5::kDefault, h5::kDefault, out) < 0)
    corrupt(path, "cannot be read (damaged data)");
}

double Hdf5File::read_scalar(const std::string& path) const {
  const Shape s = shape(path);
  if (num_elements(s) != 1 || s.size() > 1) corrupt(path, "is no scalar (shape " + to_string(s) + ")");
  const Id d(api().dopen2(file_->id, path.c_str(), h5::kDefault), api().dclose);
  const Id type(d.ok() ? api().dget_type(d.id) : -1, api().tclose);
  if (!type.ok()) corrupt(path, "cannot be opened");
  const int cls = api().tget_class(type.id);
  if (cls == h5::kClassInteger) {
    int64_t v = 0;
    if (api().dread(d.id, *api().native_int64, h5::kDefault, h5::kDefault, h5::kDefault, &v) < 0)
      corrupt(path, "cannot be read");
    return static_cast<double>(v);
  }
  float v = 0;
  read(path, s, &v);
  return v;
}

Hdf5File::Id Hdf5File::open_or_create_group(const std::string& path) {
  for (const std::string& p : prefixes(path))
    if (api().lexists(file_->id, p.c_str(), h5::kDefault) <= 0) {
      const Id g(api().gcreate2(file_->id, p.c_str(), h5::kDefault, h5::kDefault, h5::kDefault), api().gclose);
      require(g.ok(), Status::Internal, "HDF5 could not create group \"" + p + "\"");
    }
  Id g(api().gopen2(file_->id, path.empty() ? "/" : path.c_str(), h5::kDefault), api().gclose);
  require(g.ok(), Status::Internal, "HDF5 could not open group \"" + path + "\"");
  return g;
}

void Hdf5File::create_group(const std::string& path) { open_or_create_group(path); }

void Hdf5File::write_dataset(const std::string& path, const Shape& shape, hid_t file_type, hid_t memory_type,
                             const void* data) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos) open_or_create_group(path.substr(0, slash));
  std::vector<h5::hsize_t> dims(shape.begin(), shape.end());
  const Id space(shape.empty() ? api().screate(h5::kSpaceScalar)
                               : api().screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                 api().sclose);
  const Id d(space.ok() ? api().dcreate2(file_->id, path.c_str(), file_type, space.id, h5::kDefault, h5::kDefault,
                                         h5::kDefault)
                        : -1,
             api().dclose);
  require(d.ok() && api().dwrite(d.id, memory_type, h5::kDefault, h5::kDefault, h5::kDefault, data) >= 0,
          Status::Internal, "HDF5 could not write dataset \"" + path + "\"");
}

void Hdf5File::write(const std::string& path, const Shape& shape, const float* values) {
  write_dataset(path, shape, *api().ieee_f32le, *api().native_float, values);
}

void Hdf5File::write_scalar_int64(const std::string& path, int64_t value) {
  write_dataset(path, {}, *api().std_i64le, *api().native_int64, &value);
}

void Hdf5File::write_scalar_float(const std::string& path, float value) {
  write_dataset(path, {}, *api().ieee_f32le, *api().native_float, &value);
}

void Hdf5File::set_string(const std::string& path, const std::string& attribute, const std::string& value) {
  const Id obj(api().oopen(file_->id, path.empty() ? "/" : path.c_str(), h5::kDefault), api().oclose);
  const Id type(api().tcopy(*api().c_s1), api().tclose);
  const Id space(api().screate(h5::kSpaceScalar), api().sclose);
  require(obj.ok() && type.ok() && space.ok() && api().tset_size(type.id, h5::kVariable) >= 0 &&
              api().tset_cset(type.id, h5::kCsetUtf8) >= 0,
          Status::Internal, "HDF5 could not prepare attribute \"" + attribute + "\" of \"" + path + "\"");
  const Id attr(api().acreate2(obj.id, attribute.c_str(), type.id, space.id, h5::kDefault, h5::kDefault), api().aclose);
  const char* text = value.c_str();
  require(attr.ok() && api().awrite(attr.id, type.id, &text) >= 0, Status::Internal,
          "HDF5 could not write attribute \"" + attribute + "\" of \"" + path + "\"");
}

std::string Hdf5File::image() const {
  require(api().fflush(file_->id, h5::kScopeGlobal) >= 0, Status::Internal, "HDF5 could not flush a file in memory");
  const long size = api().fget_file_image(file_->id, nullptr, 0);
  require(size > 0, Status::Internal, "HDF5 could not size a file in memory");
  std::string bytes(static_cast<size_t>(size), '\0');
  require(api().fget_file_image(file_->id, bytes.data(), bytes.size()) == size, Status::Internal,
          "HDF5 could not copy a file out of memory");
  return bytes;
}

}  // namespace kx::io
