// What a checkpoint holds besides the model: where training stands, so that a resumed fit continues
// at the exact next batch. Stored as safetensors metadata strings.
#pragma once
#include <cstdint>
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
TrainPosition get_position(const io::SafetensorsFile& f);  // Corrupt if a value does not parse
DataOrder get_data_order(const io::SafetensorsFile& f);

// The optimizer step count a checkpoint file records, from its header alone; -1 if unreadable.
int64_t peek_global_step(const std::string& path);

// Metadata value parsers: Corrupt naming the file and key when the text is not a number.
int64_t meta_int(const io::SafetensorsFile& f, const std::string& key);
uint64_t meta_uint(const io::SafetensorsFile& f, const std::string& key);
double meta_double(const io::SafetensorsFile& f, const std::string& key);
std::string meta_double_text(double v);

}  // namespace kx::core
