#include "io/event_file.hpp"

#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "io/crc32c.hpp"
#include "io/protobuf_writer.hpp"
#include "kx/error.hpp"

namespace kx::io {
namespace {

// Written as protobuf writes these proto3 messages: fields in number order, defaults left out.
// Field numbers of tensorflow/core/util/event.proto and framework/summary.proto.
namespace event {
constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
}
namespace summary {
constexpr int kValue = 1;
}
namespace value {
constexpr int kTag = 1, kSimpleValue = 2, kHisto = 5;
}
namespace histo {
constexpr int kMin = 1, kMax = 2, kNum = 3, kSum = 4, kSumSquares = 5, kBucketLimit = 6, kBucket = 7;
}

double wall_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

ProtoWriter event_header(int64_t step) {
  ProtoWriter e;
  e.float64(event::kWallTime, wall_time());
  e.varint_unless_zero(event::kStep, step);
  return e;
}

// An Event holding a Summary of one value.
std::string summary_event(const ProtoWriter& value, int64_t step) {
  ProtoWriter s;
  s.message(summary::kValue, value);
  ProtoWriter e = event_header(step);
  e.message(event::kSummary, s);
  return e.data();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string name(buf);
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

std::string little_endian(uint64_t v, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

}  // namespace

EventFile::EventFile(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  require(!ec, Status::Io, "TensorBoard: cannot create the log directory " + dir + ": " + ec.message());
  const std::string stem = dir + "/events.out.tfevents." +
                           std::to_string(static_cast<int64_t>(wall_time())) + "." + host_name() + "." +
                           std::to_string(getpid()) + ".";
  // O_EXCL: a file of another writer (another callback, a run in the same second) is never reused.
  for (int n = 0; !file_; ++n) {
    path_ = stem + std::to_string(n) + ".v2";
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && n < 1000) continue;
    require(fd >= 0, Status::Io, "TensorBoard: cannot create " + path_ + ": " + std::strerror(errno));
    file_.reset(::fdopen(fd, "wb"));
    if (!file_) ::close(fd);
    require(file_ != nullptr, Status::Io, "TensorBoard: cannot open " + path_);
  }
  ProtoWriter e = event_header(0);
  e.bytes(event::kFileVersion, "brain.Event:2");
  write_event(e.data());
  flush();
}

void EventFile::write_event(const std::string& event) {
  const std::string length = little_endian(event.size(), 8);
  const std::string record = length + little_endian(masked_crc32c(length), 4) + event +
                             little_endian(masked_crc32c(event), 4);
  require(std::fwrite(record.data(), 1, record.size(), file_.get()) == record.size(), Status::Io,
          "TensorBoard: cannot write " + path_);
}

void EventFile::scalar(const std::string& tag, double value, int64_t step) {
  ProtoWriter v;
  v.bytes(value::kTag, tag);
  v.float32(value::kSimpleValue, static_cast<float>(value));
  write_event(summary_event(v, step));
}

void EventFile::histogram(const std::string& tag, const float* values, size_t n, int64_t step, int buckets) {
  // Non-finite values (a diverged weight) are left out: they have no bin.
  double lo = INFINITY, hi = -INFINITY, sum = 0, sum_squares = 0;
  size_t finite = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = values[i];
    if (!std::isfinite(x)) continue;
    ++finite;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
    sum_squares += x * x;
  }
  if (finite == 0) lo = hi = 0;
  // Bucket k counts the values in (limit[k-1], limit[k]], the first from -inf: TensorBoard's reading.
  const int bins = hi > lo ? std::max(buckets, 1) : 1;
  const double width = (hi - lo) / bins;
  std::vector<double> limit(static_cast<size_t>(bins)), count(static_cast<size_t>(bins), 0.0);
  for (int k = 0; k < bins; ++k) limit[static_cast<size_t>(k)] = k + 1 == bins ? hi : lo + width * (k + 1);
  for (size_t i = 0; i < n; ++i) {
    const double x = values[i];
    if (!std::isfinite(x)) continue;
    const auto above = std::lower_bound(limit.begin(), limit.end(), x);
    ++count[static_cast<size_t>(std::min<std::ptrdiff_t>(above - limit.begin(), bins - 1))];
  }
  ProtoWriter h;
  h.float64_unless_zero(histo::kMin, lo);
  h.float64_unless_zero(histo::kMax, hi);
  h.float64_unless_zero(histo::kNum, static_cast<double>(finite));
  h.float64_unless_zero(histo::kSum, sum);
  h.float64_unless_zero(histo::kSumSquares, sum_squares);
  h.packed_doubles(histo::kBucketLimit, limit);
  h.packed_doubles(histo::kBucket, count);
  ProtoWriter v;
  v.bytes(value::kTag, tag);
  v.message(value::kHisto, h);
  write_event(summary_event(v, step));
}

void EventFile::flush() {
  require(std::fflush(file_.get()) == 0, Status::Io, "TensorBoard: cannot write " + path_);
}

}  // namespace kx::io
