#include "core/train/data_feed.hpp"

#include <algorithm>
#include <cstring>

#include "kx/error.hpp"

namespace kx::core {

namespace {
// Data seen before is compared by owner: the address of a freed dataset may come back.
template <class T>
bool same_owner(const std::weak_ptr<const T>& seen, const std::shared_ptr<const T>& p) {
  return !seen.expired() && !seen.owner_before(p) && !p.owner_before(seen);
}

// The device copy of `source` in cache (entries remember their source in Entry::*source_of): found, or
// made by allocate(entry) then upload(entry); null when allocate runs out of device memory. Freed
// sources go first, then the oldest, keeping the most recent other one (training data while
// validating, and back).
template <class Entry, class Source, class Allocate, class Upload>
const Entry* find_or_copy(std::vector<Entry>& cache, size_t capacity, std::weak_ptr<const Source> Entry::*source_of,
                          const std::shared_ptr<const Source>& source, Allocate&& allocate, Upload&& upload) {
  auto same = [&](const Entry& c) { return same_owner(c.*source_of, source); };
  if (auto hit = std::find_if(cache.begin(), cache.end(), same); hit != cache.end()) return &*hit;
  std::erase_if(cache, [&](const Entry& c) { return (c.*source_of).expired(); });
  if (cache.size() >= capacity) cache.erase(cache.begin());
  Entry c;
  try {
    allocate(c);
  } catch (const Error& e) {
    if (e.status() != Status::OutOfMemory) throw;
    return nullptr;
  }
  upload(c);
  c.*source_of = source;
  cache.push_back(std::move(c));
  return &cache.back();
}
}  // namespace

Slice replica_slice(int replica, int replicas, int64_t rows) {
  const int64_t n = replicas, k = replica;
  const int64_t base = rows / n, extra = rows % n;
  return {k * base + std::min(k, extra), base + (k < extra ? 1 : 0)};
}

void ReplicaFeed::stage(backend::Backend& be, const std::shared_ptr<const DatasetStorage>& storage,
                        const SampleWeights& weights, RowSizes row, int64_t batch_rows, bool always_stream,
                        bool decoded) {
  row_ = row;
  streamed_.reset();
  streamed_weights_.reset();
  w_src_ = nullptr;
  rows_ = nullptr;
  decoded_ = decoded;
  if (always_stream || decoded) {
    stream(be, storage, weights, batch_rows);
    return;
  }
  if (be.host_accessible()) {
    x_src_ = storage->x.data();
    y_src_ = storage->y.data();
    w_src_ = weights ? weights->data() : nullptr;
    return;
  }
  const CachedDataset* copy = device_copy(be, storage);
  const CachedWeights* weights_copy = copy && weights ? device_copy(be, weights) : nullptr;
  if (!copy || (weights && !weights_copy)) {
    stream(be, storage, weights, batch_rows);  // too large for the device: batch by batch
    return;
  }
  x_src_ = copy->x.data();
  y_src_ = copy->y.data();
  w_src_ = weights_copy ? weights_copy->w.data() : nullptr;
}

const CachedWeights* ReplicaFeed::device_copy(backend::Backend& be, const SampleWeights& weights) {
  const size_t bytes = weights->size() * sizeof(float);
  return find_or_copy(
      weight_cache_, kCachedDatasets, &CachedWeights::source, weights,
      [&](CachedWeights& c) { c.w = be.allocate(bytes); },
      [&](CachedWeights& c) { be.to_device(weights->data(), bytes, c.w.data()); });
}

const CachedDataset* ReplicaFeed::device_copy(backend::Backend& be,
                                              const std::shared_ptr<const DatasetStorage>& storage) {
  const size_t x_bytes = storage->x.size() * sizeof(float), y_bytes = storage->y.size() * sizeof(float);
  return find_or_copy(
      cache_, kCachedDatasets, &CachedDataset::storage, storage,
      [&](CachedDataset& c) {
        c.x = be.allocate(x_bytes);
        c.y = be.allocate(y_bytes);
      },
      [&](CachedDataset& c) {
        be.to_device(storage->x.data(), x_bytes, c.x.data());
        be.to_device(storage->y.data(), y_bytes, c.y.data());
      });
}

void ReplicaFeed::stream(backend::Backend& be, const std::shared_ptr<const DatasetStorage>& storage,
                         const SampleWeights& weights, int64_t batch_rows) {
  if (!ring_x_ || ring_rows_ < batch_rows || (weights && !ring_w_)) {
    ring_x_.reset();
    ring_y_.reset();
    ring_w_.reset();
    ring_x_ = be.make_transfer_ring(kRingSlots, static_cast<size_t>(batch_rows * row_.sample) * sizeof(float));
    ring_y_ = be.make_transfer_ring(kRingSlots, static_cast<size_t>(batch_rows * row_.label) * sizeof(float));
    if (weights) ring_w_ = be.make_transfer_ring(kRingSlots, static_cast<size_t>(batch_rows) * sizeof(float));
    ring_rows_ = batch_rows;
    next_slot_ = 0;
  }
  streamed_ = storage;
  streamed_weights_ = weights;
  x_src_ = static_cast<const float*>(ring_x_->device_slots());
  y_src_ = static_cast<const float*>(ring_y_->device_slots());
  w_src_ = weights ? static_cast<const float*>(ring_w_->device_slots()) : nullptr;
}

void ReplicaFeed::feed(backend::Backend& be, const int64_t* idx, Slice s, int64_t* batch_index) {
  if (!streamed_) {
    be.to_device(idx + s.first, static_cast<size_t>(s.rows) * sizeof(int64_t), batch_index);
    return;
  }
  const int slot = next_slot_;
  next_slot_ = (slot + 1) % kRingSlots;
  const int64_t in = row_.sample, ls = row_.label;
  ring_x_->wait_host_writable(slot);
  ring_y_->wait_host_writable(slot);
  if (streamed_weights_) ring_w_->wait_host_writable(slot);
  auto* xs = static_cast<float*>(ring_x_->host_slot(slot));
  auto* ys = static_cast<float*>(ring_y_->host_slot(slot));
  float* ws = streamed_weights_ ? static_cast<float*>(ring_w_->host_slot(slot)) : nullptr;
  const DatasetStorage& d = *streamed_;
  if (decoded_)
    require(rows_ && s.first >= rows_->first && s.first + s.rows <= rows_->first + rows_->rows, Status::Internal,
            "a decoded dataset was fed without its batch's decoded rows");
  // Where row i of the slice is: the decoded rows by position in the batch, else storage by index.
  const auto sample = [&](int64_t i) {
    return decoded_ ? rows_->x.data() + (s.first + i - rows_->first) * in
                 : d.x.data() + static_cast<size_t>(idx[s.first + i]) * static_cast<size_t>(in);
  };
  ring_index_.resize(static_cast<size_t>(s.rows));
  // The host fills the slot while the device still computes the step before (steps are queued, not
  // waited for); large batches are copied by every core, so the copy keeps up with the device.
  constexpr int64_t kParallelFloats = int64_t{1} << 18;
#pragma omp parallel for if (s.rows * (in + ls) >= kParallelFloats)
  for (int64_t i = 0; i < s.rows; ++i) {
    const auto row = static_cast<size_t>(idx[s.first + i]);
    std::memcpy(xs + i * in, sample(i), static_cast<size_t>(in) * sizeof(float));
    std::memcpy(ys + i * ls, d.y.data() + row * static_cast<size_t>(ls), static_cast<size_t>(ls) * sizeof(float));
    if (ws) ws[i] = (*streamed_weights_)[row];
    ring_index_[static_cast<size_t>(i)] = slot * ring_rows_ + i;  // the step gathers from the slot
  }
  ring_x_->upload(slot, static_cast<size_t>(s.rows * in) * sizeof(float));
  ring_y_->upload(slot, static_cast<size_t>(s.rows * ls) * sizeof(float));
  if (ws) ring_w_->upload(slot, static_cast<size_t>(s.rows) * sizeof(float));
  be.to_device(ring_index_.data(), static_cast<size_t>(s.rows) * sizeof(int64_t), batch_index);
  fed_slot_ = slot;
}

void ReplicaFeed::release() {
  if (!streamed_ || fed_slot_ < 0) return;
  ring_x_->release(fed_slot_);
  ring_y_->release(fed_slot_);
  if (streamed_weights_) ring_w_->release(fed_slot_);
  fed_slot_ = -1;
}

}  // namespace kx::core
