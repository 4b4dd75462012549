// The zip archive of a Keras .keras file. Keras writes it with Python's zipfile defaults: entries
// STORED (uncompressed), no encryption, no Zip64 below 4 GiB. kx reads that, and DEFLATE entries
// (a file re-zipped by a tool) through zlib, which libkx links already; everything else is
// Unsupported. Reading checks every offset and length against the archive and each entry's CRC32,
// and inflates no more than the entry's declared size (itself capped by deflate's best ratio), so
// a damaged or hostile archive is Corrupt naming the source, never a read out of bounds.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kx::io {

class ZipArchive {
 public:
  struct Entry {
    std::string name;
    uint16_t method = 0;
    uint32_t crc = 0;
    uint64_t compressed = 0, size = 0;
    uint64_t data_offset = 0;  // where its bytes start in the archive
  };
  // Parses the central directory of an archive held in `bytes` (kept by reference: it must outlive
  // this object).
  ZipArchive(const std::string& bytes, std::string source);
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(const std::string& name) const;
  // An entry's bytes, checked against its CRC32.
  std::string read(const Entry& e) const;

 private:
  const std::string& bytes_;
  std::string source_;
  std::vector<Entry> entries_;
};

// An archive of these entries, STORED, in this order, dated 1980-01-01 (so equal contents give equal
// bytes), as Python's zipfile reads it.
std::string write_stored_zip(const std::vector<std::pair<std::string, std::string>>& entries);

bool looks_like_zip(const std::string& bytes);

}  // namespace kx::io
