// How batches reach a replica's step: where the dataset being read lives for the replica's backend
// (the host storage itself, a copy in device memory, or transfer rings), and how one replica's slice
// of a batch is made readable there (its storage indices uploaded, and with rings its samples too).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "kx/dataset.hpp"

namespace kx::core {

// Rows [first, first + rows) of a global batch belong to one replica.
struct Slice {
  int64_t first = 0, rows = 0;
};

// Replica k's slice of a global batch of `rows` rows split over `replicas`: as even as possible, the
// first rows % replicas replicas get one row more.
Slice replica_slice(int replica, int replicas, int64_t rows);

// Samples decoded for a batch (core::BatchDecoder): rows [first, first + rows) of the global batch,
// the ones this process's replicas read.
struct DecodedRows {
  int64_t first = 0, rows = 0;
  FloatBuffer x;  // rows * floats per sample
};

// A dataset's samples and labels copied to a device.
struct CachedDataset {
  std::weak_ptr<const DatasetStorage> storage;
  backend::DeviceBuffer x, y;
};

// One weight per stored sample (Keras's sample_weight, or class_weight looked up per label); null: none.
using SampleWeights = std::shared_ptr<const std::vector<float>>;

// Sample weights copied to a device.
struct CachedWeights {
  std::weak_ptr<const std::vector<float>> source;
  backend::DeviceBuffer w;
};

// One replica's source of batches. It reads the samples and labels of the staged dataset where its
// backend can read them: the host storage itself on the CPU, else a copy in device memory, kept for
// the next call that reads the same data; a dataset that does not fit in device memory (or every
// dataset, when streaming is forced) is read through rings of page-locked slots instead (samples,
// labels, and sample weights when there are some), each batch gathered on the host and copied beside
// the compute. A decoded dataset (samples made as they are read) always goes through the rings, its
// samples taken from the rows decoded for the batch (use_rows).
class ReplicaFeed {
 public:
  // The floats of one sample and of one label.
  struct RowSizes {
    int64_t sample = 0, label = 0;
  };

  // Points the feed at storage's samples and labels (and weights, indexed as storage, when not null),
  // copying them to device memory first where the backend cannot read the host's. batch_rows: the most
  // rows of a slice (the step plan's capacity).
  void stage(backend::Backend& be, const std::shared_ptr<const DatasetStorage>& storage,
             const SampleWeights& weights, RowSizes row, int64_t batch_rows, bool always_stream, bool decoded);
  // For a decoded dataset: the rows the next feed() calls take their samples from (borrowed).
  void use_rows(const DecodedRows* rows) { rows_ = rows; }
  // Makes slice s of the batch (storage indices idx + s.first ...) readable by the step: the indices
  // copied to batch_index (the step plan's, in be's memory), and for a streamed dataset the samples
  // and labels copied to a ring slot.
  void feed(backend::Backend& be, const int64_t* idx, Slice s, int64_t* batch_index);
  // After the step that read the batch fed last is queued: its ring slot may be refilled.
  void release();

  // Where the step gathers its rows from, indexed by the uploaded batch index.
  const float* samples() const { return x_src_; }
  const float* labels() const { return y_src_; }
  // Null when the staged data has no sample weights.
  const float* weights() const { return w_src_; }

 private:
  // Stages storage through the rings (streaming) instead of a device copy.
  void stream(backend::Backend& be, const std::shared_ptr<const DatasetStorage>& storage, const SampleWeights& weights,
              int64_t batch_rows);
  // The device copy of storage: found in the cache, else made (null when it does not fit).
  const CachedDataset* device_copy(backend::Backend& be, const std::shared_ptr<const DatasetStorage>& storage);
  // The device copy of weights: found in the cache, else made (null when it does not fit).
  const CachedWeights* device_copy(backend::Backend& be, const SampleWeights& weights);

  static constexpr size_t kCachedDatasets = 2;  // training and validation data
  static constexpr int kRingSlots = 2;

  RowSizes row_;
  const float* x_src_ = nullptr;
  const float* y_src_ = nullptr;
  const float* w_src_ = nullptr;
  std::vector<CachedDataset> cache_;
  std::vector<CachedWeights> weight_cache_;
  std::shared_ptr<const DatasetStorage> streamed_;  // the dataset read through the rings, if any
  bool decoded_ = false;                            // the staged dataset is decoded: samples from rows_
  const DecodedRows* rows_ = nullptr;               // a decoded dataset's current batch
  SampleWeights streamed_weights_;
  std::unique_ptr<backend::TransferRing> ring_x_, ring_y_, ring_w_;
  int64_t ring_rows_ = 0;  // samples per slot
  int next_slot_ = 0, fed_slot_ = -1;
  std::vector<int64_t> ring_index_;
};

}  // namespace kx::core
