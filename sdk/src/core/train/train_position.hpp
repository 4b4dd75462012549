// What a checkpoint holds besides the model: where training stands, so that a resumed fit continues
// at the exact next batch. Stored as safetensors metadata strings.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "io/safetensors.hpp"
#include "kx/dataset.hpp"

namespace kx::core {

struct TrainPosition {
  int32_t epoch = 0;             // the epoch the checkpoint was written in (0-based)
  int64_t step_in_epoch = 0;     // batches done in that epoch; == steps_per_epoch: the epoch is over
  int64_t steps_per_epoch = 0;
  uint64_t data_pass = 0;        // the pass over the data the next batch comes from
  int64_t data_position = 0;     // and its batch index within that pass
  double loss_sum = 0;           // the epoch's running sums, so its metrics continue
  double correct_sum = 0;
  double weight_sum = 0;         // of the sample weights (the samples seen when unweighted)
  int64_t seen = 0;
};

// How the training data was ordered; a resume needs the same to replay the same batches.
struct DataOrder {
  int64_t samples = 0;
  int64_t batch = 0;
  bool drop_remainder = false;
  int64_t shuffle_buffer = 0;
  uint64_t shuffle_seed = 0;

  static DataOrder of(const Dataset& d);
  // "" when equal, else the first difference ("batch size 32 in the checkpoint, 64 here").
  std::string difference(const DataOrder& here) const;
};

void put_position(const TrainPosition& p, const DataOrder& order, io::Metadata& m);
bool has_position(const io::SafetensorsFile& f);
// Corrupt if a value does not parse, lies outside its field's range or contradicts another.
TrainPosition get_position(const io::SafetensorsFile& f);
DataOrder get_data_order(const io::SafetensorsFile& f);

// The optimizer step count a checkpoint file records, from its header alone; -1 if unreadable.
int64_t peek_global_step(const std::string& path);

// The largest step, pass or sample count a file may record: 2^53, exact as a double (counts reach
// doubles: Adam's bias correction, an epoch's mean loss) and far from int64 overflow when a fit goes
// on counting from it.
inline constexpr int64_t kMaxCount = int64_t{1} << 53;
// The range of a sum of losses or weights: any finite value.
inline constexpr double kMaxSum = std::numeric_limits<double>::max();

// The metadata value parsers, the one way kx reads a number from a file's metadata: every field states
// its range, and a value that is not a number of the type, or lies outside [min, max] (doubles: or is
// not finite), is Corrupt naming the file, the field and the value.
int64_t meta_int(const io::SafetensorsFile& f, const std::string& key, int64_t min, int64_t max);
uint64_t meta_uint(const io::SafetensorsFile& f, const std::string& key, uint64_t max);
double meta_double(const io::SafetensorsFile& f, const std::string& key, double min, double max);
// The same on text alone (a header peeked at): nullopt where meta_int fails.
std::optional<int64_t> parse_meta_int(const std::string& text, int64_t min, int64_t max);
std::string meta_double_text(double v);

}  // namespace kx::core
