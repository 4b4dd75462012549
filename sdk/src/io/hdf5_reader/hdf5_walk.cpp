#include "io/hdf5_reader/hdf5_walk.hpp"

#include <cstring>
#include <optional>
#include <vector>

#include "io/hdf5_library.hpp"
#include "kx/tensor.hpp"

namespace kx::io::hdf5_stream {

using h5::hid_t;
using h5::Id;

namespace {

constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
// Deflate shrinks data at most about 1032 times: a dataset claiming more is a bomb, not weights.
constexpr double kMaxCompression = 1100;

// A problem with one attribute or dataset: sent with it, not thrown.
struct Problem {
  std::string why;
};

class Walker {
 public:
  Walker(const h5::Api& api, hid_t file, StreamWriter& out, uint64_t file_size)
      : api_(api), file_(file), out_(out), max_nodes_(max_nodes(file_size)) {}

  void run() {
    const uint32_t root = node(kNoParent, "", NodeKind::Group);
    const Id g(api_.gopen2(file_, "/", h5::kDefault), api_.gclose);
    if (!g.ok()) fail(Status::Corrupt, "has no readable root group");
    attributes(g.get());
    members("", root, 1);
    out_.ensure_room(9);
    out_.tag(Tag::End);
    out_.u64(nodes_);
  }

 private:
  uint32_t node(uint32_t parent, const std::string& name, NodeKind kind) {
    if (nodes_ >= max_nodes_)
      fail(Status::Corrupt, "holds more than " + std::to_string(max_nodes_) +
                                " objects, more than its size allows (hard links that repeat its groups?)");
    out_.ensure_room(1 + 4 + StreamWriter::str_size(name) + 1);
    out_.tag(Tag::Node);
    out_.u32(parent);
    out_.str(name);
    out_.u8(static_cast<uint8_t>(kind));
    return static_cast<uint32_t>(nodes_++);
  }

  // The members of the group at path (node `index`), each written with what it holds.
  void members(const std::string& path, uint32_t index, int depth) {
    if (depth > kMaxDepth) fail(Status::Corrupt, "nests groups deeper than " + std::to_string(kMaxDepth));
    const Id g(api_.gopen2(file_, path.empty() ? "/" : path.c_str(), h5::kDefault), api_.gclose);
    h5::GroupInfo info{};
    if (!g.ok() || api_.gget_info(g.get(), &info) < 0) fail(Status::Corrupt, quoted(path) + " cannot be listed");
    if (info.nlinks > max_nodes_) fail(Status::Corrupt, quoted(path) + " claims " + std::to_string(info.nlinks) + " members");
    for (h5::hsize_t i = 0; i < info.nlinks; ++i) {
      const std::string name = member_name(g.get(), path, i);
      // A name no path can reach is no member kx could ask for.
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) continue;
      const std::string child = path.empty() ? name : path + "/" + name;
      // Only hard links: a soft or external link could reach another file.
      alignas(16) unsigned char link[128] = {};  // H5L_info_t (1.10) or H5L_info2_t: the type comes first
      if (api_.lget_info(file_, child.c_str(), link, h5::kDefault) < 0) continue;
      int type = 0;
      std::memcpy(&type, link, sizeof type);
      if (type != h5::kLinkHard) continue;
      const Id obj(api_.oopen(file_, child.c_str(), h5::kDefault), api_.oclose);
      const int kind = obj.ok() ? api_.iget_type(obj.get()) : -1;
      if (kind == h5::kIdGroup) {
        const uint32_t sub = node(index, name, NodeKind::Group);
        attributes(obj.get());
        members(child, sub, depth + 1);
      } else if (kind == h5::kIdDataset) {
        node(index, name, NodeKind::Dataset);
        attributes(obj.get());
        dataset(obj.get());
      } else {
        node(index, name, NodeKind::Other);
      }
    }
  }

  std::string member_name(hid_t group, const std::string& path, h5::hsize_t i) {
    const long n = api_.lget_name_by_idx(group, ".", 0, 0, i, nullptr, 0, h5::kDefault);
    if (n < 0 || static_cast<unsigned long>(n) > kMaxName) fail(Status::Corrupt, quoted(path) + " has a member name that cannot be read");
    std::string name(static_cast<size_t>(n) + 1, '\0');
    if (api_.lget_name_by_idx(group, ".", 0, 0, i, name.data(), name.size(), h5::kDefault) != n)
      fail(Status::Corrupt, quoted(path) + " has a member name that cannot be read");
    name.resize(static_cast<size_t>(n));
    return name;
  }

  static std::string quoted(const std::string& path) { return "\"" + (path.empty() ? std::string("/") : path) + "\""; }

  void attributes(hid_t object) {
    std::vector<std::string> names;
    h5::hsize_t at = 0;
    // The callback runs inside libhdf5: it only collects names and never throws.
    const auto collect = [](hid_t, const char* name, const void*, void* data) -> h5::herr_t {
      auto& list = *static_cast<std::vector<std::string>*>(data);
      if (list.size() >= kMaxAttributes || std::strlen(name) > kMaxName) return 1;
      try {
        list.emplace_back(name);
      } catch (...) {
        return -1;
      }
      return 0;
    };
    if (api_.aiterate2(object, 0, 0, &at, collect, &names) < 0) return;  // none readable: none sent
    for (const std::string& name : names) {
      std::optional<std::vector<std::string>> strings;
      std::string why;
      try {
        strings = read_strings(object, name);
      } catch (const Problem& p) {
        why = p.why;
      }
      uint64_t size = 1 + StreamWriter::str_size(name) + 1 + (strings ? 4 : StreamWriter::str_size(why));
      if (strings)
        for (const std::string& s : *strings) size += StreamWriter::str_size(s);
      out_.ensure_room(size);
      out_.tag(Tag::Attribute);
      out_.str(name);
      if (strings) {
        out_.u8(static_cast<uint8_t>(AttributeForm::Strings));
        out_.u32(static_cast<uint32_t>(strings->size()));
        for (const std::string& s : *strings) out_.str(s);
      } else if (why.empty()) {
        out_.u8(static_cast<uint8_t>(AttributeForm::NotString));
      } else {
        out_.u8(static_cast<uint8_t>(AttributeForm::Unreadable));
        out_.str(why);
      }
    }
  }

  // The attribute's strings (scalar: one; 1-D: each), variable or fixed length; nullopt when it is
  // no string. Problem when it cannot be read.
  std::optional<std::vector<std::string>> read_strings(hid_t object, const std::string& name) {
    const Id attr(api_.aopen(object, name.c_str(), h5::kDefault), api_.aclose);
    const Id type(attr.ok() ? api_.aget_type(attr.get()) : -1, api_.tclose);
    const Id space(attr.ok() ? api_.aget_space(attr.get()) : -1, api_.sclose);
    if (!type.ok() || !space.ok()) throw Problem{"cannot be read"};
    if (api_.tget_class(type.get()) != h5::kClassString) return std::nullopt;
    const int rank = api_.sget_simple_extent_ndims(space.get());
    const long long count = api_.sget_simple_extent_npoints(space.get());
    if (rank < 0 || rank > 1 || count < 0 || count > kMaxStrings) throw Problem{"has an unexpected shape"};
    const auto n = static_cast<size_t>(count);
    const Id memory(api_.tcopy(type.get()), api_.tclose);  // the file's string type: no conversion
    if (!memory.ok()) throw Problem{"cannot be read"};
    std::vector<std::string> out;
    if (api_.tis_variable_str(type.get()) > 0) {
      std::vector<char*> ptrs(n, nullptr);
      const bool read = api_.aread(attr.get(), memory.get(), ptrs.data()) >= 0;
      // HDF5 allocated each string: copy, then free every one, whatever happens.
      for (char* p : ptrs) {
        if (read) out.emplace_back(p ? p : "");
        if (p) api_.free_memory(p);
      }
      if (!read) throw Problem{"cannot be read"};
      return out;
    }
    const size_t size = api_.tget_size(type.get());
    if (size == 0 || size > kMaxName || n * size > api_.aget_storage_size(attr.get()))
      throw Problem{"is larger than what the file stores"};
    std::string bytes(n * size, '\0');
    if (api_.aread(attr.get(), memory.get(), bytes.data()) < 0) throw Problem{"cannot be read"};
    for (size_t i = 0; i < n; ++i) {
      const std::string one = bytes.substr(i * size, size);
      out.push_back(one.substr(0, one.find('\0')));  // NUL- or space-padded as written
    }
    return out;
  }

  void dataset(hid_t d) {
    std::string why;
    try {
      dataset_body(d);
      return;
    } catch (const Problem& p) {
      why = p.why;
    }
    out_.ensure_room(2 + StreamWriter::str_size(why));
    out_.tag(Tag::Dataset);
    out_.u8(static_cast<uint8_t>(DatasetForm::Unreadable));
    out_.str(why);
  }

  void dataset_body(hid_t d) {
    const Id space(api_.dget_space(d), api_.sclose);
    const Id type(api_.dget_type(d), api_.tclose);
    const Id plist(api_.dget_create_plist(d), api_.pclose);
    if (!space.ok() || !type.ok() || !plist.ok()) throw Problem{"cannot be opened"};
    const int rank = api_.sget_simple_extent_ndims(space.get());
    if (rank < 0 || rank > kMaxRank) throw Problem{"has an unexpected rank"};
    std::vector<h5::hsize_t> dims(static_cast<size_t>(rank));
    if (rank > 0 && api_.sget_simple_extent_dims(space.get(), dims.data(), nullptr) != rank) throw Problem{"has no readable shape"};
    uint64_t count = 1;
    for (h5::hsize_t v : dims) {
      if (v > static_cast<h5::hsize_t>(kMaxElements)) throw Problem{"has a dimension of " + std::to_string(v)};
      if (v != 0 && count > static_cast<uint64_t>(kMaxElements) / v) throw Problem{"has too many elements"};
      count *= v;
    }
    const int cls = api_.tget_class(type.get());
    const uint64_t shape_size = 4 + 8 * dims.size();
    if (cls != h5::kClassFloat && cls != h5::kClassInteger) {
      out_.ensure_room(2 + shape_size + 4);
      out_.tag(Tag::Dataset);
      out_.u8(static_cast<uint8_t>(DatasetForm::NotNumbers));
      shape(dims);
      out_.i32(cls);
      return;
    }
    if (api_.pget_external_count(plist.get()) != 0 || api_.pget_layout(plist.get()) == h5::kLayoutVirtual)
      throw Problem{"keeps its data outside the file (external or virtual dataset)"};
    const double declared = static_cast<double>(count) * static_cast<double>(api_.tget_size(type.get()));
    const auto stored = static_cast<double>(api_.dget_storage_size(d));
    if (count > 0 && (stored <= 0 || declared > stored * kMaxCompression))
      throw Problem{"declares " + std::to_string(static_cast<int64_t>(declared)) + " bytes but stores " +
                    std::to_string(static_cast<int64_t>(stored))};
    const uint64_t size = 2 + shape_size + 8 + 4 * count + 9;
    out_.ensure_room(size);  // before the values are allocated: the budget bounds them
    std::vector<float> values(static_cast<size_t>(count));
    if (count > 0 && api_.dread(d, *api_.native_float, h5::kDefault, h5::kDefault, h5::kDefault, values.data()) < 0)
      throw Problem{"cannot be read (damaged data)"};
    int64_t exact = 0;
    const bool has_exact = cls == h5::kClassInteger && count == 1 &&
                           api_.dread(d, *api_.native_int64, h5::kDefault, h5::kDefault, h5::kDefault, &exact) >= 0;
    out_.tag(Tag::Dataset);
    out_.u8(static_cast<uint8_t>(DatasetForm::Numbers));
    shape(dims);
    out_.u64(count);
    out_.floats(values.data(), values.size());
    out_.u8(has_exact ? 1 : 0);
    out_.i64(exact);
  }

  void shape(const std::vector<h5::hsize_t>& dims) {
    out_.u32(static_cast<uint32_t>(dims.size()));
    for (h5::hsize_t v : dims) out_.u64(v);
  }

  const h5::Api& api_;
  hid_t file_;
  StreamWriter& out_;
  uint64_t max_nodes_;
  uint64_t nodes_ = 0;
};

}  // namespace

void walk_hdf5(const std::string& bytes, StreamWriter& out) {
  if (bytes.compare(0, 8, kSignature, 8) != 0) fail(Status::Corrupt, "is not an HDF5 file (no HDF5 signature)");
  const h5::Session session;
  const h5::Api& api = session.api();
  const Id fapl(api.pcreate(*api.file_access_class), api.pclose);
  if (!fapl.ok() || api.pset_fapl_core(fapl.get(), 1 << 16, 0) < 0 ||
      api.pset_file_image(fapl.get(), const_cast<char*>(bytes.data()), bytes.size()) < 0)
    fail(Status::Internal, "HDF5 could not be set up to read from memory");
  const Id file(api.fopen("kx-hdf5-reader-input.h5", h5::kReadOnly, fapl.get()), api.fclose);
  if (!file.ok()) fail(Status::Corrupt, "HDF5 cannot open it (damaged or truncated)");
  Walker(api, file.get(), out, bytes.size()).run();
}

}  // namespace kx::io::hdf5_stream
