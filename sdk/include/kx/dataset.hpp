// In-memory datasets of (x, y) samples with a tf.data-like pipeline: take, skip, shuffle, batch.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kx/tensor.hpp"

namespace kx {

// The samples themselves, immutable once built and shared by every view of them.
struct DatasetStorage {
  FloatBuffer x;        // samples * numel(x_shape)
  std::vector<float> y; // samples * numel(y_shape)
  Shape x_shape;        // per sample
  Shape y_shape;        // per sample ({} for one scalar label)
  int64_t samples = 0;
  // Keras's sample_weight: one finite weight >= 0 per sample, or empty when every sample weighs 1.
  std::vector<float> weight;
};

enum class DType { F32 = 0, I32 = 1, I64 = 2, U8 = 3 };
// How many element types there are: a new one goes last, and is named here.
inline constexpr int kDTypeCount = static_cast<int>(DType::U8) + 1;
constexpr bool is_valid(DType t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kDTypeCount; }

// What Keras's Normalization.adapt() finds: the mean and the (biased) variance of x.
struct FeatureMoments {
  std::vector<float> mean, variance;
};

class Dataset {
 public:
  static constexpr int64_t kDefaultBatch = 32;  // Keras's fit default

  // Copies x and y (row-major, shape[0] = samples). u8 x is scaled to [0, 1].
  // sample_weight: shape[0] floats, finite and >= 0, weighing each sample's loss and metrics as Keras's
  // sample_weight; null when every sample weighs 1.
  static Dataset from_arrays(const void* x, DType x_dtype, const Shape& x_shape, const void* y, DType y_dtype,
                             const Shape& y_shape, const float* sample_weight = nullptr);
  // IDX image and label files (optionally gzip-compressed), images scaled to [0, 1].
  static Dataset from_idx(const std::string& images_path, const std::string& labels_path);

  Dataset take(int64_t n) const;
  Dataset skip(int64_t n) const;
  void shuffle(int64_t buffer_size, uint64_t seed);
  void batch(int64_t global_batch_size, bool drop_remainder);
  void cache(const std::string& path) { cache_path_ = path; }
  void prefetch(int32_t batches);

  int64_t num_samples() const { return count_; }
  int64_t batch_size() const { return batch_size_; }
  bool drop_remainder() const { return drop_remainder_; }
  int64_t shuffle_buffer() const { return shuffle_buffer_; }  // 0: not shuffled
  uint64_t shuffle_seed() const { return shuffle_seed_; }
  int64_t batches_per_pass() const;
  const Shape& x_shape() const { return storage_->x_shape; }
  const Shape& y_shape() const { return storage_->y_shape; }
  const DatasetStorage& storage() const { return *storage_; }
  bool has_sample_weights() const { return !storage_->weight.empty(); }
  // The sample weights indexed as the storage (sharing its ownership), or null when there are none.
  std::shared_ptr<const std::vector<float>> sample_weights() const;
  // The storage, shared by every dataset made from the same arrays with take/skip/shuffle.
  const std::shared_ptr<const DatasetStorage>& shared_storage() const { return storage_; }

  // Storage indices of the samples of pass number `pass` (an epoch over the data), in the order they
  // are visited: the shuffle of that pass, or storage order without shuffle.
  std::vector<int64_t> order(uint64_t pass) const;
  // The moments of x over every sample of this dataset and every position of a sample, per channel
  // (x's last axis) when `channels` is that axis's size, or over all values when it is 1; summed in
  // float64. Throws InvalidArgument for another count or an empty dataset.
  FeatureMoments feature_moments(int64_t channels) const;
  // Storage indices of the samples, unshuffled.
  std::vector<int64_t> in_storage_order() const;

 private:
  explicit Dataset(std::shared_ptr<const DatasetStorage> s);
  std::shared_ptr<const DatasetStorage> storage_;
  int64_t begin_ = 0;
  int64_t count_ = 0;
  int64_t shuffle_buffer_ = 0;  // 0: no shuffle
  uint64_t shuffle_seed_ = 0;
  int64_t batch_size_ = kDefaultBatch;
  bool drop_remainder_ = false;
  int32_t prefetch_ = 0;
  std::string cache_path_;
};

}  // namespace kx
