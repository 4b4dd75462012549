// Datasets: conversion of the caller's arrays to float32, and the take/skip/shuffle/batch pipeline.
#include "kx/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/seed_mix.hpp"
#include "data/sample_cache.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

int64_t checked_elements(const Shape& shape, const char* what) {
  require(!shape.empty(), Status::InvalidArgument, std::string(what) + " needs rank >= 1 (the sample dimension)");
  int64_t n = 1;
  for (int64_t d : shape) {
    require(d > 0, Status::InvalidArgument, std::string(what) + " dimensions must be positive, got " + to_string(shape));
    require(n <= kMaxElements / d, Status::InvalidArgument, std::string(what) + " shape " + to_string(shape) + " is too large");
    n *= d;
  }
  return n;
}

void require_dtype(DType t, const char* what) {
  require(is_valid(t), Status::InvalidArgument,
          std::string("unknown ") + what + " dtype " + std::to_string(static_cast<int>(t)));
}

// Converts n values to float; integers must be exact in float32.
template <class Dst>
void convert(const void* src, DType t, int64_t n, Dst* dst, bool scale_u8, const char* what) {
  switch (t) {
    case DType::F32: {
      const float* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::F64: {  // rounded to the nearest float32
      const double* s = static_cast<const double*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::U8: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      const float k = scale_u8 ? 1.0f / 255.0f : 1.0f;
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]) * k;
      return;
    }
    case DType::I32:
    case DType::I64: {
      constexpr int64_t kExact = int64_t{1} << 24;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = t == DType::I32 ? static_cast<const int32_t*>(src)[i] : static_cast<const int64_t*>(src)[i];
        require(v >= -kExact && v <= kExact, Status::InvalidArgument,
                std::string(what) + " value " + std::to_string(v) + " at index " + std::to_string(i) +
                    " is not exactly representable as float32");
        dst[i] = static_cast<float>(v);
      }
      return;
    }
  }
}

}  // namespace

Dataset::Dataset(std::shared_ptr<const DatasetStorage> s)
    : storage_(std::move(s)), count_(storage_->samples), x_shape_(storage_->x_shape) {}

Dataset Dataset::from_arrays(const void* x, DType x_dtype, const Shape& x_shape, const void* y, DType y_dtype,
                             const Shape& y_shape, const float* sample_weight) {
  require(x && y, Status::InvalidArgument, "x and y must not be NULL");
  require_dtype(x_dtype, "x");
  require_dtype(y_dtype, "y");
  const int64_t nx = checked_elements(x_shape, "x");
  const int64_t ny = checked_elements(y_shape, "y");
  require(x_shape[0] == y_shape[0], Status::InvalidArgument,
          "x has " + std::to_string(x_shape[0]) + " samples but y has " + std::to_string(y_shape[0]));
  auto s = std::make_shared<DatasetStorage>();
  s->samples = x_shape[0];
  s->x_shape.assign(x_shape.begin() + 1, x_shape.end());
  s->y_shape.assign(y_shape.begin() + 1, y_shape.end());
  s->x.resize(static_cast<size_t>(nx));
  s->y.resize(static_cast<size_t>(ny));
  convert(x, x_dtype, nx, s->x.data(), true, "x");
  convert(y, y_dtype, ny, s->y.data(), false, "y");
  if (sample_weight) {
    for (int64_t i = 0; i < s->samples; ++i)
      require(std::isfinite(sample_weight[i]) && sample_weight[i] >= 0, Status::InvalidArgument,
              "sample weight " + std::to_string(sample_weight[i]) + " of sample " + std::to_string(i) +
                  " is not a finite number >= 0");
    s->weight.assign(sample_weight, sample_weight + s->samples);
  }
  return Dataset(std::move(s));
}

Dataset Dataset::from_source(std::shared_ptr<const SampleSource> source, const Shape& x_shape, std::vector<float> y,
                             const Shape& y_shape) {
  require(source != nullptr, Status::InvalidArgument, "the sample source is null");
  Shape one_sample{1};
  one_sample.insert(one_sample.end(), x_shape.begin(), x_shape.end());
  checked_elements(one_sample, "x");
  const int64_t per_label = num_elements(y_shape);
  require(per_label > 0 && !y.empty() && y.size() % static_cast<size_t>(per_label) == 0, Status::InvalidArgument,
          "labels do not divide into samples of shape " + to_string(y_shape));
  auto s = std::make_shared<DatasetStorage>();
  s->samples = static_cast<int64_t>(y.size()) / per_label;
  s->x_shape = x_shape;
  s->y_shape = y_shape;
  s->y = std::move(y);
  s->source = std::move(source);
  return Dataset(std::move(s));
}

std::shared_ptr<const std::vector<float>> Dataset::sample_weights() const {
  if (storage_->weight.empty()) return nullptr;
  return {storage_, &storage_->weight};  // aliasing: alive as long as the storage
}

Dataset Dataset::take(int64_t n) const {
  require(n >= 0, Status::InvalidArgument, "take needs n >= 0, got " + std::to_string(n));
  Dataset d = *this;
  d.count_ = std::min(n, count_);
  return d;
}

Dataset Dataset::skip(int64_t n) const {
  require(n >= 0, Status::InvalidArgument, "skip needs n >= 0, got " + std::to_string(n));
  Dataset d = *this;
  const int64_t k = std::min(n, count_);
  d.begin_ += k;
  d.count_ -= k;
  return d;
}

void Dataset::shuffle(int64_t buffer_size, uint64_t seed) {
  require(buffer_size > 0, Status::InvalidArgument, "shuffle needs buffer_size > 0, got " + std::to_string(buffer_size));
  shuffle_buffer_ = buffer_size;
  shuffle_seed_ = seed;
}

void Dataset::batch(int64_t global_batch_size, bool drop_remainder) {
  require(global_batch_size > 0, Status::InvalidArgument,
          "batch size must be positive, got " + std::to_string(global_batch_size));
  batch_size_ = global_batch_size;
  drop_remainder_ = drop_remainder;
}

void Dataset::prefetch(int32_t batches) {
  require(batches >= 0, Status::InvalidArgument, "prefetch needs batches >= 0, got " + std::to_string(batches));
  prefetch_ = batches;
}

void Dataset::cache(const std::string& path) {
  if (!storage_->source) return;  // the samples are in memory already
  cache_ = std::make_shared<SampleCache>(path, storage_->source->identity(), storage_->samples,
                                         num_elements(storage_->x_shape));
}

void Dataset::map(std::shared_ptr<const SampleMap> m) {
  require(m != nullptr, Status::InvalidArgument, "map is null");
  x_shape_ = m->output_shape(x_shape_);
  maps_.push_back(std::move(m));
}

void Dataset::read_sample(int64_t index, uint64_t pass, float* out) const {
  const DatasetStorage& s = *storage_;
  const int64_t n = num_elements(s.x_shape);
  // The stored (or decoded) sample goes straight to out without maps, else through two scratch rows.
  std::vector<float> a, b;
  float* first = out;
  if (!maps_.empty()) {
    a.resize(static_cast<size_t>(n));
    first = a.data();
  }
  if (!s.source) {
    std::copy_n(s.x.data() + index * n, n, first);
  } else if (!cache_ || !cache_->get(index, first)) {
    s.source->read(index, first);
    if (cache_) cache_->put(index, first);
  }
  Shape shape = s.x_shape;
  for (size_t k = 0; k < maps_.size(); ++k) {
    const Shape next = maps_[k]->output_shape(shape);
    float* dst = out;
    if (k + 1 < maps_.size()) {
      b.resize(static_cast<size_t>(num_elements(next)));
      dst = b.data();
    }
    maps_[k]->apply(a.data(), shape, dst, pass, index);
    std::swap(a, b);
    shape = next;
  }
}

int64_t Dataset::batches_per_pass() const {
  return drop_remainder_ ? count_ / batch_size_ : (count_ + batch_size_ - 1) / batch_size_;
}

FeatureMoments Dataset::feature_moments(int64_t channels) const {
  const int64_t last = x_shape().empty() ? 1 : x_shape().back();
  require(channels == 1 || channels == last, Status::InvalidArgument,
          "feature moments are per channel (" + std::to_string(last) + ") or over all values (1), not " +
              std::to_string(channels));
  require(count_ > 0, Status::InvalidArgument, "feature moments of an empty dataset");
  const int64_t per_sample = num_elements(x_shape());
  FloatBuffer decoded;
  if (this->decoded()) {  // the samples as the step sees them (first pass)
    decoded.resize(static_cast<size_t>(count_ * per_sample));
    for (int64_t i = 0; i < count_; ++i) read_sample(begin_ + i, 0, decoded.data() + i * per_sample);
  }
  const float* x = this->decoded() ? decoded.data() : storage_->x.data() + begin_ * per_sample;
  const int64_t n = count_ * per_sample;
  const auto C = static_cast<size_t>(channels);
  // Two passes (mean, then squared deviations): no cancellation for data far from zero.
  std::vector<double> sum(C, 0.0), squares(C, 0.0);
  for (int64_t i = 0; i < n; ++i) sum[static_cast<size_t>(i % channels)] += x[i];
  const double per_channel = static_cast<double>(n / channels);
  for (double& s : sum) s /= per_channel;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - sum[static_cast<size_t>(i % channels)];
    squares[static_cast<size_t>(i % channels)] += d * d;
  }
  FeatureMoments m;
  for (size_t c = 0; c < C; ++c) {
    m.mean.push_back(static_cast<float>(sum[c]));
    m.variance.push_back(static_cast<float>(squares[c] / per_channel));
  }
  return m;
}

std::vector<int64_t> Dataset::in_storage_order() const {
  std::vector<int64_t> idx(static_cast<size_t>(count_));
  std::iota(idx.begin(), idx.end(), begin_);
  return idx;
}

std::vector<int64_t> Dataset::order(uint64_t pass) const {
  std::vector<int64_t> in = in_storage_order();
  if (shuffle_buffer_ == 0) return in;
  // tf.data's shuffle: a buffer of `shuffle_buffer_` samples; each output is a uniformly chosen buffer
  // slot, refilled from the input stream. A buffer as large as the data is a uniform permutation.
  const uint64_t seed = backend::mix_seed(shuffle_seed_, pass);
  uint64_t counter = 0;
  auto below = [&](uint64_t n) {  // uniform in [0, n) without modulo bias worth noting (n << 2^64)
    const unsigned __int128 r = static_cast<unsigned __int128>(backend::mix_seed(seed, counter++)) * n;
    return static_cast<uint64_t>(r >> 64);
  };
  const size_t n = in.size();
  const size_t buf = static_cast<size_t>(std::min<int64_t>(shuffle_buffer_, count_));
  std::vector<int64_t> out;
  out.reserve(n);
  std::vector<int64_t> buffer(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(buf));
  size_t next = buf;
  while (!buffer.empty()) {
    const size_t k = static_cast<size_t>(below(buffer.size()));
    out.push_back(buffer[k]);
    if (next < n) {
      buffer[k] = in[next++];
    } else {
      buffer[k] = buffer.back();
      buffer.pop_back();
    }
  }
  return out;
}

}  // namespace kx
