// A TensorBoard event file: TFRecord records (length, masked CRC-32C of the length, an Event
// protobuf, masked CRC-32C of it), the first Event holding the file version "brain.Event:2" and each
// later one a Summary with one scalar (simple_value) or one histogram (HistogramProto) at a step.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace kx::io {

class EventFile {
 public:
  // Creates dir (with its parents) and a new "events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2"
  // file in it, never one that exists. Throws Error(Io) naming the path.
  explicit EventFile(const std::string& dir);

  void scalar(const std::string& tag, double value, int64_t step);
  // The distribution of n values in `buckets` equal bins between their minimum and maximum.
  void histogram(const std::string& tag, const float* values, size_t n, int64_t step, int buckets = 30);
  // Hands what was written to the operating system (TensorBoard reads a file as it grows).
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Close> file_;
};

}  // namespace kx::io
