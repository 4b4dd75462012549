// The reader's side of io/hdf5_stream.hpp: records written to a file descriptor (the pipe to libkx)
// within the stream's budget. A record is checked against the budget before any of it is written, so
// an over-long stream still ends with a whole error record (kept in kErrorReserve).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/hdf5_stream.hpp"
#include "kx/error.hpp"

namespace kx::io::hdf5_stream {

class StreamWriter {
 public:
  StreamWriter(int fd, uint64_t budget);
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Corrupt unless `bytes` more fit the budget; call before each record with its full size.
  void ensure_room(uint64_t bytes) const;
  void u8(uint8_t v) { put(&v, 1); }
  void u32(uint32_t v) { put(&v, sizeof v); }
  void i32(int32_t v) { put(&v, sizeof v); }
  void u64(uint64_t v) { put(&v, sizeof v); }
  void i64(int64_t v) { put(&v, sizeof v); }
  void str(const std::string& s);
  void floats(const float* v, size_t n) { put(v, n * sizeof(float)); }
  void tag(Tag t) { u8(static_cast<uint8_t>(t)); }
  static uint64_t str_size(const std::string& s) { return 4 + s.size(); }

  // The terminal error record (within the reserve), then everything flushed.
  void error(Status status, const std::string& message);
  // Writes what is buffered; a parent that has gone ends this process (nothing is left to do).
  void flush();

 private:
  void put(const void* data, size_t n);
  int fd_;
  uint64_t budget_;
  uint64_t written_ = 0;
  std::string buffer_;
};

}  // namespace kx::io::hdf5_stream
