#include "core/train/train_position.hpp"

#include <charconv>
#include <cmath>

#include "kx/error.hpp"

namespace kx::core {

namespace {

// The value as the message quotes it: a crafted file's value may be a megabyte long.
std::string quoted(const std::string& text) {
  constexpr size_t kShown = 40;
  return "\"" + (text.size() <= kShown ? text : text.substr(0, kShown) + "...") + "\"";
}

template <class T>
[[noreturn]] void out_of_range(const io::SafetensorsFile& f, const std::string& key, T min, T max) {
  fail(Status::Corrupt, f.source() + ": metadata \"" + key + "\" is " + quoted(f.meta(key)) + ", not a number in [" +
                            std::to_string(min) + ", " + std::to_string(max) + "]");
}

template <class T>
std::optional<T> parse_integer(const std::string& s, T min, T max) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int64_t> parse_meta_int(const std::string& text, int64_t min, int64_t max) {
  return parse_integer<int64_t>(text, min, max);
}

int64_t meta_int(const io::SafetensorsFile& f, const std::string& key, int64_t min, int64_t max) {
  const std::optional<int64_t> v = parse_integer<int64_t>(f.meta(key), min, max);
  if (!v) out_of_range(f, key, min, max);
  return *v;
}

uint64_t meta_uint(const io::SafetensorsFile& f, const std::string& key, uint64_t max) {
  const std::optional<uint64_t> v = parse_integer<uint64_t>(f.meta(key), 0, max);
  if (!v) out_of_range(f, key, uint64_t{0}, max);
  return *v;
}

double meta_double(const io::SafetensorsFile& f, const std::string& key, double min, double max) {
  // from_chars: the C locale's digits whatever the process's locale, no spaces, no hex.
  const std::string& s = f.meta(key);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < min || v > max)
    fail(Status::Corrupt, f.source() + ": metadata \"" + key + "\" is " + quoted(s) + ", not a finite number in [" +
                              meta_double_text(min) + ", " + meta_double_text(max) + "]");
  return v;
}

std::string meta_double_text(double v) {
  // The shortest text that reads back exactly, in the C locale's digits as meta_double reads them.
  char buf[40];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("nan");
}

int64_t peek_global_step(const std::string& path) {
  const std::optional<io::Metadata> m = io::peek_metadata(path);
  if (!m) return -1;
  const auto it = m->find("optimizer_steps");
  if (it == m->end()) return -1;
  return parse_meta_int(it->second, 0, kMaxCount).value_or(-1);
}

DataOrder DataOrder::of(const Dataset& d) {
  return {d.num_samples(), d.batch_size(), d.drop_remainder(), d.shuffle_buffer(), d.shuffle_seed()};
}

std::string DataOrder::difference(const DataOrder& here) const {
  const auto differs = [](const char* what, auto there, auto now) {
    std::string s = what;
    s.append(" ").append(std::to_string(there)).append(" in the checkpoint, ");
    s.append(std::to_string(now)).append(" here");
    return s;
  };
  if (samples != here.samples) return differs("training samples", samples, here.samples);
  if (batch != here.batch) return differs("batch size", batch, here.batch);
  if (drop_remainder != here.drop_remainder) return differs("drop_remainder", drop_remainder, here.drop_remainder);
  if (shuffle_buffer != here.shuffle_buffer) return differs("shuffle buffer", shuffle_buffer, here.shuffle_buffer);
  if (shuffle_seed != here.shuffle_seed) return differs("shuffle seed", shuffle_seed, here.shuffle_seed);
  return "";
}

void put_position(const TrainPosition& p, const DataOrder& order, io::Metadata& m) {
  m["epoch"] = std::to_string(p.epoch);
  m["step_in_epoch"] = std::to_string(p.step_in_epoch);
  m["steps_per_epoch"] = std::to_string(p.steps_per_epoch);
  m["data_pass"] = std::to_string(p.data_pass);
  m["data_position"] = std::to_string(p.data_position);
  m["epoch_loss_sum"] = meta_double_text(p.loss_sum);
  m["epoch_correct_sum"] = meta_double_text(p.correct_sum);
  m["epoch_seen"] = std::to_string(p.seen);
  m["epoch_weight_sum"] = meta_double_text(p.weight_sum);
  m["data_samples"] = std::to_string(order.samples);
  m["data_batch"] = std::to_string(order.batch);
  m["data_drop_remainder"] = std::to_string(order.drop_remainder ? 1 : 0);
  m["data_shuffle_buffer"] = std::to_string(order.shuffle_buffer);
  m["data_shuffle_seed"] = std::to_string(order.shuffle_seed);
}

bool has_position(const io::SafetensorsFile& f) { return f.metadata().count("step_in_epoch") != 0; }

TrainPosition get_position(const io::SafetensorsFile& f) {
  TrainPosition p;
  // The epoch a resume starts (the next one) and its 1-based number are int32 too, as FitOptions::epochs.
  p.epoch = static_cast<int32_t>(meta_int(f, "epoch", 0, INT32_MAX - 2));
  p.steps_per_epoch = meta_int(f, "steps_per_epoch", 1, kMaxCount);
  p.step_in_epoch = meta_int(f, "step_in_epoch", 0, p.steps_per_epoch);
  p.data_pass = meta_uint(f, "data_pass", static_cast<uint64_t>(kMaxCount));
  p.data_position = meta_int(f, "data_position", 0, kMaxCount);
  p.loss_sum = meta_double(f, "epoch_loss_sum", -kMaxSum, kMaxSum);
  p.correct_sum = meta_double(f, "epoch_correct_sum", -kMaxSum, kMaxSum);
  p.seen = meta_int(f, "epoch_seen", 0, kMaxCount);
  // Checkpoints written before sample weights existed: every sample weighed 1.
  p.weight_sum = f.metadata().count("epoch_weight_sum") ? meta_double(f, "epoch_weight_sum", -kMaxSum, kMaxSum)
                                                        : static_cast<double>(p.seen);
  return p;
}

DataOrder get_data_order(const io::SafetensorsFile& f) {
  DataOrder d;
  d.samples = meta_int(f, "data_samples", 0, kMaxElements);
  d.batch = meta_int(f, "data_batch", 1, kMaxElements);
  d.drop_remainder = meta_int(f, "data_drop_remainder", 0, 1) != 0;
  d.shuffle_buffer = meta_int(f, "data_shuffle_buffer", 0, INT64_MAX);  // any buffer size a shuffle took
  d.shuffle_seed = meta_uint(f, "data_shuffle_seed", UINT64_MAX);
  return d;
}

}  // namespace kx::core
