// Datasets of (x, y) samples with a tf.data-like pipeline: take, skip, shuffle, batch, cache, prefetch
// and sample maps (augmentation). Samples are held in memory as float32, or decoded on demand from
// files (an image folder) batch by batch; labels are always in memory.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kx/tensor.hpp"

namespace kx {

// Samples decoded on demand (from files) instead of held in memory. read() is called from decoding
// threads, several at once: it must be safe to call concurrently.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Sample `index` (storage order) as numel(x_shape) floats into out. Throws kx::Error naming the file.
  virtual void read(int64_t index, float* out) const = 0;
  // What the samples are made from (files, sizes, times, decoding settings): a cache file made from
  // another identity is not reused.
  virtual std::string identity() const = 0;
};

// A map applied to every sample as it is read (augmentation): deterministic in (pass, index), so that
// a resumed fit sees the same samples. Safe to call concurrently.
class SampleMap {
 public:
  virtual ~SampleMap() = default;
  virtual Shape output_shape(const Shape& input) const = 0;
  // in: one sample of shape `input`; out: output_shape(input) floats. pass: the epoch-like pass over
  // the data the sample is read for; index: its storage index.
  virtual void apply(const float* in, const Shape& input, float* out, uint64_t pass, int64_t index) const = 0;
};

// The samples themselves, immutable once built and shared by every view of them.
struct DatasetStorage {
  FloatBuffer x;        // samples * numel(x_shape); empty when `source` decodes them
  std::vector<float> y; // samples * numel(y_shape)
  Shape x_shape;        // per sample
  Shape y_shape;        // per sample ({} for one scalar label)
  int64_t samples = 0;
  std::shared_ptr<const SampleSource> source;  // null: x holds the samples
  std::vector<std::string> class_names;        // an image folder's classes, label i = class_names[i]
  int64_t skipped = 0;                         // files left out because they did not decode
  // Keras's sample_weight: one finite weight >= 0 per sample, or empty when every sample weighs 1.
  std::vector<float> weight;
};

class SampleCache;  // sdk/src/data/sample_cache.hpp

enum class DType { F32 = 0, I32 = 1, I64 = 2, U8 = 3, F64 = 4 };
// How many element types there are: a new one goes last, and is named here.
inline constexpr int kDTypeCount = static_cast<int>(DType::F64) + 1;
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
  // numpy .npy files (versions 1-3, little-endian f4/f8/u1/i4/i8, C order), converted as from_arrays.
  static Dataset from_npy(const std::string& x_path, const std::string& y_path);
  // A CSV file with a header row and numeric cells: label_column (by name) is y, the others x in order.
  static Dataset from_csv(const std::string& path, const std::string& label_column);
  // Keras's image_dataset_from_directory: one subfolder of dir per class (labels in sorted folder
  // order), its JPEG and PNG files (recursively, sorted) decoded on demand, converted to `channels`,
  // resized bilinearly to height x width and scaled to [0, 1]. Files whose header does not decode are
  // skipped with a warning on stderr (counted in storage().skipped). Unsupported without decoders.
  static Dataset from_image_directory(const std::string& dir, int64_t height, int64_t width, int64_t channels);
  // Samples of shape x_shape decoded by `source` on demand; labels y (samples * numel(y_shape)) in memory.
  static Dataset from_source(std::shared_ptr<const SampleSource> source, const Shape& x_shape, std::vector<float> y,
                             const Shape& y_shape);

  Dataset take(int64_t n) const;
  Dataset skip(int64_t n) const;
  void shuffle(int64_t buffer_size, uint64_t seed);
  void batch(int64_t global_batch_size, bool drop_remainder);
  // Keeps decoded samples after they are first read: in memory for "", else in the file at path,
  // reused by a later run whose source has the same identity. Nothing to do for in-memory samples.
  void cache(const std::string& path);
  void prefetch(int32_t batches);
  // Appends a map applied to every sample as it is read (after the cache).
  void map(std::shared_ptr<const SampleMap> m);
  // Keras's RandomFlip("horizontal", seed) and RandomCrop(height, width, seed) as maps over image
  // samples (height, width, channels), drawn per sample from (seed, pass, storage index).
  void random_flip(uint64_t seed);
  void random_crop(int64_t height, int64_t width, uint64_t seed);

  int64_t num_samples() const { return count_; }
  int64_t batch_size() const { return batch_size_; }
  bool drop_remainder() const { return drop_remainder_; }
  int64_t shuffle_buffer() const { return shuffle_buffer_; }  // 0: not shuffled
  uint64_t shuffle_seed() const { return shuffle_seed_; }
  int64_t batches_per_pass() const;
  int32_t prefetch_batches() const { return prefetch_; }
  // Whether samples are made as they are read (decoded from files, or mapped) rather than read from
  // storage().x: such datasets reach the step batch by batch through read_sample.
  bool decoded() const { return storage_->source != nullptr || !maps_.empty(); }
  // Sample `index` (a storage index) as read in pass `pass`: from storage, the cache or the source,
  // then through the maps. out: numel(x_shape()) floats. Safe to call concurrently.
  void read_sample(int64_t index, uint64_t pass, float* out) const;
  const Shape& x_shape() const { return x_shape_; }
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
  Shape x_shape_;  // of a sample after the maps
  std::shared_ptr<SampleCache> cache_;
  std::vector<std::shared_ptr<const SampleMap>> maps_;
};

}  // namespace kx
