#include "io/stored_zip.hpp"

#include <zlib.h>

#include <cstdint>
#include <algorithm>
#include <limits>

#include "kx/error.hpp"

namespace kx::io {

namespace {

constexpr uint32_t kLocalSignature = 0x04034b50, kCentralSignature = 0x02014b50, kEndSignature = 0x06054b50;
constexpr size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22;
constexpr uint16_t kStored = 0, kDeflated = 8;
constexpr uint16_t kDosDate1980 = (1 << 5) | 1;  // 1980-01-01, time 00:00
// Deflate's best ratio is about 1032:1; an entry declaring more is a bomb.
constexpr uint64_t kMaxRatio = 1032;

uint16_t u16(const std::string& b, uint64_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) | static_cast<uint8_t>(b[at + 1]) << 8);
}
uint32_t u32(const std::string& b, uint64_t at) { return u16(b, at) | static_cast<uint32_t>(u16(b, at + 2)) << 16; }

void put16(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>((v >> 8) & 0xff));
}
void put32(std::string& out, uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}

uint32_t crc_of(const char* data, uint64_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {  // zlib takes a uInt per call
    const auto chunk = static_cast<uInt>(std::min<uint64_t>(size, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

bool looks_like_zip(const std::string& bytes) { return bytes.size() >= 4 && u32(bytes, 0) == kLocalSignature; }

ZipArchive::ZipArchive(const std::string& bytes, std::string source) : bytes_(bytes), source_(std::move(source)) {
  const uint64_t size = bytes.size();
  const auto corrupt = [&](const std::string& what) { fail(Status::Corrupt, source_ + ": damaged zip archive: " + what); };
  if (size < kEndSize) corrupt("too short for one");
  // The end record is last, after a comment of at most 65535 bytes.
  uint64_t end = size - kEndSize;
  const uint64_t lowest = size > kEndSize + 0xffff ? size - kEndSize - 0xffff : 0;
  while (!(u32(bytes, end) == kEndSignature && end + kEndSize + u16(bytes, end + 20) == size)) {
    if (end == lowest) corrupt("no end of central directory record");
    --end;
  }
  const uint16_t disk = u16(bytes, end + 4), cd_disk = u16(bytes, end + 6);
  const uint16_t count = u16(bytes, end + 10);
  const uint32_t cd_size = u32(bytes, end + 12), cd_offset = u32(bytes, end + 16);
  require(disk == 0 && cd_disk == 0, Status::Unsupported, source_ + ": a zip archive split over several disks");
  require(count != 0xffff && cd_size != 0xffffffff && cd_offset != 0xffffffff, Status::Unsupported,
          source_ + ": a Zip64 archive (over 4 GiB or 65535 entries)");
  if (uint64_t{cd_offset} + cd_size > end) corrupt("the central directory lies outside the archive");
  if (uint64_t{count} * kCentralSize > cd_size) corrupt("the central directory is shorter than its entries");
  uint64_t at = cd_offset;
  for (uint16_t i = 0; i < count; ++i) {
    if (at + kCentralSize > uint64_t{cd_offset} + cd_size || u32(bytes, at) != kCentralSignature)
      corrupt("central directory entry " + std::to_string(i) + " is damaged");
    Entry e;
    const uint16_t flags = u16(bytes, at + 8);
    e.method = u16(bytes, at + 10);
    e.crc = u32(bytes, at + 16);
    e.compressed = u32(bytes, at + 20);
    e.size = u32(bytes, at + 24);
    const uint16_t name_len = u16(bytes, at + 28), extra_len = u16(bytes, at + 30), comment_len = u16(bytes, at + 32);
    const uint32_t local = u32(bytes, at + 42);
    const uint64_t next = at + kCentralSize + name_len + extra_len + comment_len;
    if (next > uint64_t{cd_offset} + cd_size) corrupt("central directory entry " + std::to_string(i) + " overruns it");
    e.name = bytes.substr(at + kCentralSize, name_len);
    require(e.compressed != 0xffffffff && e.size != 0xffffffff && local != 0xffffffff, Status::Unsupported,
            source_ + ": entry \"" + e.name + "\" is Zip64 (over 4 GiB)");
    require((flags & 1) == 0, Status::Unsupported, source_ + ": entry \"" + e.name + "\" is encrypted");
    // The local header repeats the name; its extra field may differ from the central one.
    if (uint64_t{local} + kLocalSize > cd_offset || u32(bytes, local) != kLocalSignature)
      corrupt("entry \"" + e.name + "\" has no local header where the directory says");
    const uint16_t local_name = u16(bytes, local + 26), local_extra = u16(bytes, local + 28);
    e.data_offset = uint64_t{local} + kLocalSize + local_name + local_extra;
    if (e.data_offset + e.compressed > cd_offset) corrupt("entry \"" + e.name + "\" runs past the archive's data");
    if (bytes.compare(local + kLocalSize, local_name, e.name) != 0)
      corrupt("entry \"" + e.name + "\" has another name in its local header");
    entries_.push_back(std::move(e));
    at = next;
  }
}

const ZipArchive::Entry* ZipArchive::find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::string ZipArchive::read(const Entry& e) const {
  const std::string what = source_ + ": zip entry \"" + e.name + "\"";
  std::string out;
  if (e.method == kStored) {
    require(e.compressed == e.size, Status::Corrupt, what + " is stored with two different sizes");
    out = bytes_.substr(e.data_offset, e.size);
  } else if (e.method == kDeflated) {
    require(e.size <= e.compressed * kMaxRatio + 64, Status::Corrupt,
            what + " claims to inflate " + std::to_string(e.compressed) + " bytes to " + std::to_string(e.size));
    out.assign(e.size, '\0');
    z_stream z{};
    require(inflateInit2(&z, -MAX_WBITS) == Z_OK, Status::OutOfMemory, what + ": zlib could not start");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes_.data() + e.data_offset));
    z.avail_in = static_cast<uInt>(e.compressed);
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z, Z_FINISH);
    const uLong produced = z.total_out;
    inflateEnd(&z);
    require(rc == Z_STREAM_END && produced == e.size, Status::Corrupt, what + " does not inflate to its declared size");
  } else {
    fail(Status::Unsupported, what + " uses compression method " + std::to_string(e.method) +
                                  " (kx reads stored and deflated entries)");
  }
  require(crc_of(out.data(), out.size()) == e.crc, Status::Corrupt, what + " fails its CRC32 check");
  return out;
}

std::string write_stored_zip(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, directory;
  for (const auto& entry : entries) {
    // Named references, not structured bindings: clang before 16 cannot capture those in `common`.
    const std::string& name = entry.first;
    const std::string& data = entry.second;
    require(data.size() < 0xffffffffu && out.size() < 0xffffffffu, Status::Unsupported,
            "a .keras file over 4 GiB (Zip64) is not supported");
    const uint32_t crc = crc_of(data.data(), data.size());
    const auto offset = static_cast<uint32_t>(out.size());
    const auto size = static_cast<uint32_t>(data.size());
    // The fields after the signature that both headers share: version 2.0, no flags, stored, the date.
    const auto common = [&](std::string& h) {
      put16(h, 20);
      put16(h, 0);
      put16(h, kStored);
      put16(h, 0);
      put16(h, kDosDate1980);
      put32(h, crc);
      put32(h, size);
      put32(h, size);
      put16(h, static_cast<uint32_t>(name.size()));
      put16(h, 0);
    };
    put32(out, kLocalSignature);
    common(out);
    out += name;
    out += data;
    put32(directory, kCentralSignature);
    put16(directory, 20);  // made by: MS-DOS attributes, version 2.0
    common(directory);
    put16(directory, 0);  // comment
    put16(directory, 0);  // disk
    put16(directory, 0);  // internal attributes
    put32(directory, 0);  // external attributes
    put32(directory, offset);
    directory += name;
  }
  require(entries.size() < 0xffff && out.size() + directory.size() < 0xffffffffu, Status::Unsupported,
          "a .keras file over 4 GiB (Zip64) is not supported");
  const auto cd_offset = static_cast<uint32_t>(out.size());
  out += directory;
  put32(out, kEndSignature);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint32_t>(entries.size()));
  put16(out, static_cast<uint32_t>(entries.size()));
  put32(out, static_cast<uint32_t>(directory.size()));
  put32(out, cd_offset);
  put16(out, 0);
  return out;
}

}  // namespace kx::io
