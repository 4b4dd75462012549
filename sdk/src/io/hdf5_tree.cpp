#include "io/hdf5_tree.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "io/hdf5_stream.hpp"
#include "kx/error.hpp"

namespace kx::io {

namespace hs = hdf5_stream;

namespace {

constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";

// Reads the stream front to back; every read is checked against what remains.
class Cursor {
 public:
  Cursor(const std::string& s, const std::string& source) : s_(s), source_(source) {}
  size_t at() const { return at_; }
  size_t left() const { return s_.size() - at_; }
  bool done() const { return at_ == s_.size(); }
  template <class T>
  T get() {
    take(sizeof(T));
    T v;
    std::memcpy(&v, s_.data() + at_ - sizeof(T), sizeof(T));
    return v;
  }
  std::string str(uint32_t max) {
    const auto n = get<uint32_t>();
    if (n > max) bad("a name or string of " + std::to_string(n) + " bytes");
    take(n);
    return s_.substr(at_ - n, n);
  }
  void take(uint64_t n) {
    if (n > left()) bad("a record longer than what remains");
    at_ += static_cast<size_t>(n);
  }
  [[noreturn]] void bad(const std::string& what) const {
    fail(Status::Corrupt, source_ + ": the HDF5 reader's output is malformed (" + what + " at byte " +
                              std::to_string(at_) + ")");
  }

 private:
  const std::string& s_;
  const std::string& source_;
  size_t at_ = 0;
};

Shape read_shape(Cursor& c) {
  const auto rank = c.get<uint32_t>();
  if (rank > static_cast<uint32_t>(hs::kMaxRank)) c.bad("a rank of " + std::to_string(rank));
  Shape s;
  for (uint32_t i = 0; i < rank; ++i) {
    const auto v = c.get<uint64_t>();
    if (v > static_cast<uint64_t>(kMaxElements)) c.bad("a dimension of " + std::to_string(v));
    s.push_back(static_cast<int64_t>(v));
  }
  return s;
}

// The product of the dimensions, -1 past kMaxElements (checked before each multiplication).
int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d != 0 && n > kMaxElements / d) return -1;
    n *= d;
  }
  return n;
}

bool valid_name(const std::string& n) { return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos; }

}  // namespace

bool looks_like_hdf5(const std::string& bytes) { return bytes.compare(0, 8, kSignature, 8) == 0; }

Hdf5Tree::Hdf5Tree(std::string stream, uint64_t file_size, std::string source)
    : stream_(std::move(stream)), source_(std::move(source)) {
  parse(file_size);
}

void Hdf5Tree::parse(uint64_t file_size) {
  Cursor c(stream_, source_);
  if (stream_.size() > hs::max_stream_bytes(file_size) + hs::kErrorReserve) c.bad("more bytes than the file justifies");
  c.take(4);
  if (std::memcmp(stream_.data(), hs::kMagic, 4) != 0) c.bad("no stream header");
  if (const auto v = c.get<uint32_t>(); v != hs::kVersion)
    fail(Status::Corrupt, source_ + ": the HDF5 reader speaks stream version " + std::to_string(v) + ", libkx " +
                              std::to_string(hs::kVersion) + " (a kx-hdf5-reader of another kx release?)");
  Node* last = nullptr;
  while (true) {
    if (c.done()) fail(Status::Corrupt, source_ + ": the HDF5 reader's output ended early");
    if (last && last->kind == Kind::Dataset && !last->has_body && stream_[c.at()] != static_cast<char>(hs::Tag::Dataset) &&
        stream_[c.at()] != static_cast<char>(hs::Tag::Attribute) && stream_[c.at()] != static_cast<char>(hs::Tag::Error))
      c.bad("a dataset without its values");
    const auto tag = static_cast<hs::Tag>(c.get<uint8_t>());
    switch (tag) {
      case hs::Tag::Node: {
        const auto parent = c.get<uint32_t>();
        std::string name = c.str(hs::kMaxName);
        const auto kind = c.get<uint8_t>();
        if (kind < 1 || kind > 3) c.bad("an object of unknown kind");
        if (nodes_.size() >= hs::max_nodes(file_size)) c.bad("more objects than the file can hold");
        Node n;
        n.kind = kind == 1 ? Kind::Group : kind == 2 ? Kind::Dataset : Kind::Other;
        if (nodes_.empty()) {
          if (parent != hs::kNoParent || !name.empty() || n.kind != Kind::Group) c.bad("no root group first");
        } else {
          if (parent >= nodes_.size() || nodes_[parent].kind != Kind::Group) c.bad("an object outside any group");
          if (!valid_name(name)) c.bad("a member name no path can reach");
          Node& p = nodes_[parent];
          if (!p.members.emplace(name, static_cast<uint32_t>(nodes_.size())).second) c.bad("a member named twice");
          p.names.push_back(std::move(name));
        }
        nodes_.push_back(std::move(n));
        last = &nodes_.back();
        break;
      }
      case hs::Tag::Attribute: {
        if (!last) c.bad("an attribute before any object");
        std::string name = c.str(hs::kMaxName);
        if (last->attributes.size() >= hs::kMaxAttributes) c.bad("too many attributes");
        Attribute a;
        const auto form = c.get<uint8_t>();
        if (form == static_cast<uint8_t>(hs::AttributeForm::Strings)) {
          a.form = Attribute::Form::Strings;
          const auto n = c.get<uint32_t>();
          if (n > hs::kMaxStrings || n > c.left() / 4) c.bad("more strings than remain");
          // A value may be long (ResNet50's model_config is 150 kB): bounded by what remains only.
          for (uint32_t i = 0; i < n; ++i) a.values.push_back(c.str(UINT32_MAX));
        } else if (form == static_cast<uint8_t>(hs::AttributeForm::NotString)) {
          a.form = Attribute::Form::NotString;
        } else if (form == static_cast<uint8_t>(hs::AttributeForm::Unreadable)) {
          a.form = Attribute::Form::Unreadable;
          a.problem = c.str(4096);
        } else {
          c.bad("an attribute of unknown form");
        }
        if (!last->attributes.emplace(std::move(name), std::move(a)).second) c.bad("an attribute named twice");
        break;
      }
      case hs::Tag::Dataset: {
        if (!last || last->kind != Kind::Dataset || last->has_body) c.bad("values of no dataset");
        Node& d = *last;
        d.has_body = true;
        const auto form = c.get<uint8_t>();
        if (form == static_cast<uint8_t>(hs::DatasetForm::Numbers)) {
          d.numbers = true;
          d.shape = read_shape(c);
          const auto count = c.get<uint64_t>();
          const int64_t expected = elements(d.shape);
          if (expected < 0 || count != static_cast<uint64_t>(expected)) c.bad("a value count that is not the shape's");
          if (count > c.left() / sizeof(float)) c.bad("more values than remain");
          d.values_at = c.at();
          d.count = static_cast<size_t>(count);
          c.take(count * sizeof(float));
          const auto has_exact = c.get<uint8_t>();
          const auto exact = c.get<int64_t>();
          if (has_exact > 1 || (has_exact && count != 1)) c.bad("an exact value of no integer scalar");
          if (has_exact) d.exact = exact;
        } else if (form == static_cast<uint8_t>(hs::DatasetForm::NotNumbers)) {
          d.shape = read_shape(c);
          d.type_class = c.get<int32_t>();
        } else if (form == static_cast<uint8_t>(hs::DatasetForm::Unreadable)) {
          d.problem = c.str(4096);
          if (d.problem.empty()) c.bad("an unreadable dataset without a reason");
        } else {
          c.bad("a dataset of unknown form");
        }
        break;
      }
      case hs::Tag::End: {
        if (c.get<uint64_t>() != nodes_.size() || nodes_.empty()) c.bad("an object count that is not the stream's");
        if (!c.done()) c.bad("bytes after the end");
        return;
      }
      case hs::Tag::Error: {
        const auto status = static_cast<Status>(c.get<int32_t>());
        const std::string message = c.str(4096);
        // The reader reports a damaged file or a missing libhdf5; anything else it says is damage too.
        if (status == Status::Unsupported) fail(Status::Unsupported, source_ + ": " + message);
        fail(Status::Corrupt, source_ + ": " + message);
      }
      default:
        c.bad("an unknown record");
    }
  }
}

const Hdf5Tree::Node* Hdf5Tree::find(const std::string& path) const {
  const Node* n = &nodes_.front();
  size_t start = 0;
  while (!path.empty() && start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const auto it = n->members.find(path.substr(start, slash - start));
    if (it == n->members.end()) return nullptr;
    n = &nodes_[it->second];
    start = slash + 1;
  }
  return n;
}

void Hdf5Tree::corrupt(const std::string& path, const std::string& what) const {
  fail(Status::Corrupt, source_ + ": \"" + (path.empty() ? "/" : path) + "\" " + what);
}

Hdf5Tree::Kind Hdf5Tree::kind(const std::string& path) const {
  const Node* n = find(path);
  return n ? n->kind : Kind::None;
}

std::vector<std::string> Hdf5Tree::children(const std::string& group) const {
  const Node* n = find(group);
  if (!n || n->kind != Kind::Group) corrupt(group, "is no group");
  return n->names;
}

std::optional<std::vector<std::string>> Hdf5Tree::strings(const std::string& path, const std::string& attribute) const {
  const Node* n = find(path);
  if (!n) corrupt(path, "is missing (or is a link kx does not follow)");
  const auto it = n->attributes.find(attribute);
  if (it == n->attributes.end()) return std::nullopt;
  const std::string what = "has an attribute \"" + attribute + "\" that ";
  switch (it->second.form) {
    case Attribute::Form::Strings:
      return it->second.values;
    case Attribute::Form::NotString:
      corrupt(path, what + "is no string");
    case Attribute::Form::Unreadable:
      break;
  }
  corrupt(path, what + it->second.problem);
}

const Hdf5Tree::Node& Hdf5Tree::dataset(const std::string& path) const {
  const Node* n = find(path);
  if (!n || n->kind != Kind::Dataset) corrupt(path, "is no dataset");
  if (!n->problem.empty()) corrupt(path, n->problem);
  return *n;
}

Shape Hdf5Tree::shape(const std::string& path) const { return dataset(path).shape; }

void Hdf5Tree::read(const std::string& path, const Shape& expected, float* out) const {
  const Node& d = dataset(path);
  if (d.shape != expected) corrupt(path, "has shape " + to_string(d.shape) + ", " + to_string(expected) + " is expected");
  if (!d.numbers) corrupt(path, "holds no numbers (HDF5 type class " + std::to_string(d.type_class) + ")");
  if (d.count > 0) std::memcpy(out, stream_.data() + d.values_at, d.count * sizeof(float));
}

double Hdf5Tree::read_scalar(const std::string& path) const {
  const Node& d = dataset(path);
  if (d.count != 1 || d.shape.size() > 1) corrupt(path, "is no scalar (shape " + to_string(d.shape) + ")");
  if (d.exact) return static_cast<double>(*d.exact);
  float v = 0;
  read(path, d.shape, &v);
  return v;
}

}  // namespace kx::io
