#include "core/train/train_position.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "kx/error.hpp"

namespace kx::core {

namespace {

[[noreturn]] void bad_value(const io::SafetensorsFile& f, const std::string& key) {
  fail(Status::Corrupt, f.source() + ": metadata \"" + key + "\" is not a valid number: \"" + f.meta(key) + "\"");
}

template <class T>
T parse_integer(const io::SafetensorsFile& f, const std::string& key) {
  const std::string& s = f.meta(key);
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) bad_value(f, key);
  return v;
}

}  // namespace

int64_t meta_int(const io::SafetensorsFile& f, const std::string& key) { return parse_integer<int64_t>(f, key); }
uint64_t meta_uint(const io::SafetensorsFile& f, const std::string& key) { return parse_integer<uint64_t>(f, key); }

double meta_double(const io::SafetensorsFile& f, const std::string& key) {
  const std::string& s = f.meta(key);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) bad_value(f, key);
  return v;
}

std::string meta_double_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);  // round-trips exactly
  return buf;
}

int64_t peek_global_step(const std::string& path) {
  const std::optional<io::Metadata> m = io::peek_metadata(path);
  if (!m) return -1;
  const auto it = m->find("optimizer_steps");
  if (it == m->end()) return -1;
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return ec == std::errc() && end == it->second.data() + it->second.size() && v >= 0 ? v : -1;
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
  const int64_t epoch = meta_int(f, "epoch");
  if (epoch < 0 || epoch > INT32_MAX) bad_value(f, "epoch");
  p.epoch = static_cast<int32_t>(epoch);
  p.step_in_epoch = meta_int(f, "step_in_epoch");
  p.steps_per_epoch = meta_int(f, "steps_per_epoch");
  p.data_pass = meta_uint(f, "data_pass");
  p.data_position = meta_int(f, "data_position");
  p.loss_sum = meta_double(f, "epoch_loss_sum");
  p.correct_sum = meta_double(f, "epoch_correct_sum");
  p.seen = meta_int(f, "epoch_seen");
  // Checkpoints written before sample weights existed: every sample weighed 1.
  p.weight_sum = f.metadata().count("epoch_weight_sum") ? meta_double(f, "epoch_weight_sum")
                                                        : static_cast<double>(p.seen);
  if (p.steps_per_epoch <= 0 || p.step_in_epoch < 0 || p.step_in_epoch > p.steps_per_epoch || p.data_position < 0 ||
      p.seen < 0)
    fail(Status::Corrupt, f.source() + ": the training position in the metadata is inconsistent");
  return p;
}

DataOrder get_data_order(const io::SafetensorsFile& f) {
  DataOrder d;
  d.samples = meta_int(f, "data_samples");
  d.batch = meta_int(f, "data_batch");
  d.drop_remainder = meta_int(f, "data_drop_remainder") != 0;
  d.shuffle_buffer = meta_int(f, "data_shuffle_buffer");
  d.shuffle_seed = meta_uint(f, "data_shuffle_seed");
  return d;
}

}  // namespace kx::core
