// Decoded samples kept after their first decode (kx_dataset_cache): in memory, or in a file that a
// later run reuses when its header says it was made from the same source and is complete.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kx/dataset.hpp"

namespace kx {

class SampleCache {
 public:
  // path "": in memory (allocated at the first put). Else the file at path: reused as it is when its
  // header matches (identity, sample count and size) and it is complete; otherwise made anew. Io when
  // it cannot be created.
  SampleCache(std::string path, std::string identity, int64_t samples, int64_t row_floats);
  ~SampleCache();
  SampleCache(const SampleCache&) = delete;
  SampleCache& operator=(const SampleCache&) = delete;

  // Sample i into out if it is cached. Safe to call concurrently with get and put.
  bool get(int64_t i, float* out);
  // Keeps sample i (once; a sample already kept is left as it is).
  void put(int64_t i, const float* row);
  // Every sample is kept (a file cache found complete, or filled since).
  bool complete();
  // Whether the file existed, matched and was complete when opened.
  bool reused() const { return reused_; }

  // The file's header for this identity and layout (what a reused file must start with).
  static std::string header(const std::string& identity, int64_t samples, int64_t row_floats);

 private:
  void mark_complete();

  std::mutex mutex_;
  std::string path_, identity_;
  int64_t samples_, row_floats_;
  int fd_ = -1;
  size_t data_offset_ = 0;
  bool reused_ = false;
  int64_t kept_ = 0;
  std::vector<bool> have_;
  FloatBuffer memory_;
};

}  // namespace kx
