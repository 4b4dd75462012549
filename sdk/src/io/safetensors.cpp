#include "io/safetensors.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "io/json.hpp"
#include "kx/error.hpp"

namespace kx::io {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

constexpr const char* kDataCrcKey = "kx_crc32_data";
constexpr const char* kHeaderCrcKey = "kx_crc32_header";
constexpr uint64_t kMaxHeader = 100u << 20;  // safetensors' own limit

uint32_t crc32_of(const char* p, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(p), chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// Everything the header states except its own checksum, in a fixed form.
std::string header_digest_text(const std::vector<TensorEntry>& tensors, const Metadata& metadata) {
  std::string s;
  for (const TensorEntry& t : tensors) {
    s += t.name;
    s += '\0';
    for (int64_t d : t.shape) s += std::to_string(d) + ",";
    s += '\0' + std::to_string(t.begin) + "," + std::to_string(t.end) + "\n";
  }
  for (const auto& [k, v] : metadata) {
    if (k == kHeaderCrcKey) continue;
    s += k;
    s += '\0';
    s += v;
    s += '\n';
  }
  return s;
}

[[noreturn]] void corrupt(const std::string& source, const std::string& what) {
  fail(Status::Corrupt, source + ": not a valid kx safetensors file: " + what);
}

}  // namespace

std::string encode_safetensors(const std::vector<TensorToWrite>& tensors, Metadata metadata) {
  std::vector<TensorEntry> entries;
  int64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const int64_t bytes = num_elements(t.shape) * static_cast<int64_t>(sizeof(float));
    entries.push_back({t.name, t.shape, offset, offset + bytes});
    offset += bytes;
  }
  std::string data(static_cast<size_t>(offset), '\0');
  for (size_t i = 0; i < tensors.size(); ++i)
    if (entries[i].end > entries[i].begin)
      std::memcpy(data.data() + entries[i].begin, tensors[i].data, static_cast<size_t>(entries[i].end - entries[i].begin));
  metadata.erase(kHeaderCrcKey);
  metadata[kDataCrcKey] = hex32(crc32_of(data.data(), data.size()));
  metadata[kHeaderCrcKey] = hex32(0);
  const std::string digest = header_digest_text(entries, metadata);
  metadata[kHeaderCrcKey] = hex32(crc32_of(digest.data(), digest.size()));

  json::Value header{json::Value::Object{}};
  json::Value meta{json::Value::Object{}};
  for (const auto& [k, v] : metadata) meta.set(k, v);
  header.set("__metadata__", std::move(meta));
  for (const TensorEntry& e : entries) {
    json::Value::Array shape;
    for (int64_t d : e.shape) shape.emplace_back(d);
    json::Value entry{json::Value::Object{}};
    entry.set("dtype", "F32");
    entry.set("shape", std::move(shape));
    entry.set("data_offsets", json::Value::Array{json::Value(e.begin), json::Value(e.end)});
    header.set(e.name, std::move(entry));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the tensors 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += text;
  out += data;
  return out;
}

SafetensorsFile SafetensorsFile::decode(std::string bytes, const std::string& source, Checksums checksums) {
  SafetensorsFile f;
  f.source_ = source;
  if (bytes.size() < 8) corrupt(source, "shorter than its 8-byte header length (" + std::to_string(bytes.size()) + " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[static_cast<size_t>(i)])) << (8 * i);
  if (n > kMaxHeader || n > bytes.size() - 8)
    corrupt(source, "header length " + std::to_string(n) + " does not fit the file of " + std::to_string(bytes.size()) +
                        " bytes");
  json::Value header;
  try {
    header = json::parse(bytes.substr(8, static_cast<size_t>(n)));
  } catch (const Error& e) {
    corrupt(source, std::string("header is not JSON: ") + e.what());
  }
  if (header.type() != json::Value::Type::Object) corrupt(source, "header is not a JSON object");
  const size_t data_start = 8 + static_cast<size_t>(n);
  const int64_t data_size = static_cast<int64_t>(bytes.size() - data_start);
  try {
    for (const auto& [key, value] : header.as_object("header")) {
      if (key == "__metadata__") {
        for (const auto& [mk, mv] : value.as_object("__metadata__")) f.metadata_[mk] = mv.as_string("metadata " + mk);
        continue;
      }
      const std::string what = "tensor \"" + key + "\"";
      if (value.at("dtype", what).as_string(what + " dtype") != "F32")
        corrupt(source, what + " has dtype " + value.at("dtype", what).as_string(what) + "; kx reads only F32");
      TensorEntry e;
      e.name = key;
      int64_t count = 1;
      for (const json::Value& d : value.at("shape", what).as_array(what + " shape")) {
        const int64_t dim = d.as_int(what + " shape");
        if (dim < 0 || (dim > 0 && count > data_size / 4 / dim))
          corrupt(source, what + " has a shape larger than the file");
        e.shape.push_back(dim);
        count *= dim;
      }
      const json::Value::Array& off = value.at("data_offsets", what).as_array(what + " data_offsets");
      if (off.size() != 2) corrupt(source, what + " data_offsets needs 2 values");
      e.begin = off[0].as_int(what + " data_offsets");
      e.end = off[1].as_int(what + " data_offsets");
      if (e.begin < 0 || e.end < e.begin || e.end > data_size)
        corrupt(source, what + " data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                            ") lie outside the " + std::to_string(data_size) + " data bytes");
      if (e.end - e.begin != count * 4)
        corrupt(source, what + " holds " + std::to_string(e.end - e.begin) + " bytes but its shape needs " +
                            std::to_string(count * 4));
      f.tensors_.push_back(std::move(e));
    }
  } catch (const Error& e) {
    if (e.status() == Status::Corrupt) throw;
    corrupt(source, e.what());
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  int64_t at = 0;
  for (const TensorEntry& e : f.tensors_) {
    if (e.begin != at) corrupt(source, "tensor \"" + e.name + "\" overlaps another or leaves a gap");
    at = e.end;
  }
  if (at != data_size)
    corrupt(source, std::to_string(data_size - at) + " bytes after the last tensor (truncated or padded file)");
  const auto header_crc = f.metadata_.find(kHeaderCrcKey);
  const auto data_crc = f.metadata_.find(kDataCrcKey);
  const bool present = header_crc != f.metadata_.end() && data_crc != f.metadata_.end();
  if (present != (header_crc != f.metadata_.end() || data_crc != f.metadata_.end()))
    corrupt(source, "one of the two checksums is missing");
  if (!present && checksums == Checksums::Required) corrupt(source, "checksums are missing");
  if (present && checksums != Checksums::Unchecked) {
    const std::string digest = header_digest_text(f.tensors_, f.metadata_);
    if (header_crc->second != hex32(crc32_of(digest.data(), digest.size()))) corrupt(source, "header checksum mismatch");
    if (data_crc->second != hex32(crc32_of(bytes.data() + data_start, static_cast<size_t>(data_size))))
      corrupt(source, "tensor data checksum mismatch");
  }
  f.bytes_ = std::move(bytes);
  f.data_start_ = data_start;
  return f;
}

const std::string& SafetensorsFile::meta(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) corrupt(source_, "metadata \"" + key + "\" is missing");
  return it->second;
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  for (const TensorEntry& e : tensors_)
    if (e.name == name) return &e;
  return nullptr;
}

void SafetensorsFile::read(const TensorEntry& entry, float* out) const {
  if (entry.end > entry.begin)
    std::memcpy(out, bytes_.data() + data_start_ + entry.begin, static_cast<size_t>(entry.end - entry.begin));
}

std::optional<Metadata> peek_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8];
  if (!in.read(reinterpret_cast<char*>(len), 8)) return std::nullopt;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > kMaxHeader) return std::nullopt;
  std::string text(static_cast<size_t>(n), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n))) return std::nullopt;
  try {
    const json::Value header = json::parse(text);
    const json::Value* meta = header.find("__metadata__");
    if (!meta) return std::nullopt;
    Metadata m;
    for (const auto& [k, v] : meta->as_object("__metadata__")) m[k] = v.as_string(k);
    return m;
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(Status::Io, "cannot read " + path + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::Io, "cannot open " + path + ": " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(Status::Io, "cannot read " + path);
  return bytes;
}

}  // namespace kx::io
