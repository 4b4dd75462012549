// kx_dataset_*: construction and the pipeline settings.
#include <algorithm>
#include <cstdint>

#include "capi/src/handles.hpp"

using kx::capi::guarded;
using kx::capi::require_arg;

namespace {

kx::Shape checked_shape(const int64_t* shape, size_t rank, const char* name, const char* function) {
  require_arg(shape, name, function);
  kx::require(rank >= 1 && rank <= 8, kx::Status::InvalidArgument,
              std::string(function) + ": " + name + " rank must be 1..8, got " + std::to_string(rank));
  return kx::Shape(shape, shape + rank);
}

kx::DType checked_dtype(const kx_dtype& t, const char* name, const char* function) {
  const int32_t v = kx::capi::enum_value(t);
  kx::require(v >= KX_DTYPE_F32 && v <= KX_DTYPE_F64, kx::Status::InvalidArgument,
              std::string(function) + ": unknown " + name + " dtype " + std::to_string(v));
  return static_cast<kx::DType>(v);
}

}  // namespace

extern "C" {

kx_status kx_dataset_from_arrays(const void* x, kx_dtype x_dtype, const int64_t* x_shape, size_t x_rank, const void* y,
                                 kx_dtype y_dtype, const int64_t* y_shape, size_t y_rank, kx_dataset** out) {
  return kx_dataset_from_arrays_weighted(x, x_dtype, x_shape, x_rank, y, y_dtype, y_shape, y_rank, nullptr, out);
}

kx_status kx_dataset_from_arrays_weighted(const void* x, kx_dtype x_dtype, const int64_t* x_shape, size_t x_rank,
                                          const void* y, kx_dtype y_dtype, const int64_t* y_shape, size_t y_rank,
                                          const float* sample_weight, kx_dataset** out) {
  return guarded([&] {
    const char* fn = sample_weight ? "kx_dataset_from_arrays_weighted" : "kx_dataset_from_arrays";
    require_arg(x, "x", fn);
    require_arg(y, "y", fn);
    require_arg(out, "out", fn);
    const kx::Shape xs = checked_shape(x_shape, x_rank, "x_shape", fn);
    const kx::Shape ys = checked_shape(y_shape, y_rank, "y_shape", fn);
    auto d = kx::Dataset::from_arrays(x, checked_dtype(x_dtype, "x", fn), xs, y, checked_dtype(y_dtype, "y", fn), ys,
                                      sample_weight);
    return kx::capi::hand_out(std::make_unique<kx_dataset>(kx_dataset{std::move(d)}), out);
  });
}

kx_status kx_dataset_from_idx(const char* images_path, const char* labels_path, kx_dataset** out) {
  return guarded([&] {
    require_arg(images_path, "images_path", "kx_dataset_from_idx");
    require_arg(labels_path, "labels_path", "kx_dataset_from_idx");
    require_arg(out, "out", "kx_dataset_from_idx");
    return kx::capi::hand_out(
        std::make_unique<kx_dataset>(kx_dataset{kx::Dataset::from_idx(images_path, labels_path)}), out);
  });
}

kx_status kx_dataset_take(const kx_dataset* d, int64_t n, kx_dataset** out) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_take");
    require_arg(out, "out", "kx_dataset_take");
    return kx::capi::hand_out(std::make_unique<kx_dataset>(kx_dataset{d->dataset.take(n)}), out);
  });
}

kx_status kx_dataset_skip(const kx_dataset* d, int64_t n, kx_dataset** out) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_skip");
    require_arg(out, "out", "kx_dataset_skip");
    return kx::capi::hand_out(std::make_unique<kx_dataset>(kx_dataset{d->dataset.skip(n)}), out);
  });
}

kx_status kx_dataset_shuffle(kx_dataset* d, int64_t buffer_size, uint64_t seed) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_shuffle");
    d->dataset.shuffle(buffer_size, seed);
    return KX_OK;
  });
}

kx_status kx_dataset_batch(kx_dataset* d, int64_t global_batch_size, int32_t drop_remainder) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_batch");
    d->dataset.batch(global_batch_size, drop_remainder != 0);
    return KX_OK;
  });
}

kx_status kx_dataset_cache(kx_dataset* d, const char* path_or_null) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_cache");
    kx::require(!path_or_null || path_or_null[0] != '\0', kx::Status::InvalidArgument,
                "kx_dataset_cache: path is empty (pass NULL to cache in memory)");
    d->dataset.cache(path_or_null ? path_or_null : "");
    return KX_OK;
  });
}

kx_status kx_dataset_prefetch(kx_dataset* d, int32_t batches) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_prefetch");
    d->dataset.prefetch(batches);
    return KX_OK;
  });
}

kx_status kx_dataset_feature_moments(const kx_dataset* d, float* mean, float* variance, size_t n) {
  return guarded([&] {
    const char* function = "kx_dataset_feature_moments";
    require_arg(d, "d", function);
    require_arg(mean, "mean", function);
    require_arg(variance, "variance", function);
    const kx::FeatureMoments m = d->dataset.feature_moments(static_cast<int64_t>(std::min<size_t>(n, INT64_MAX)));
    std::copy(m.mean.begin(), m.mean.end(), mean);
    std::copy(m.variance.begin(), m.variance.end(), variance);
    return KX_OK;
  });
}

int64_t kx_dataset_num_samples(const kx_dataset* d) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    kx::capi::require_arg(d, "d", "kx_dataset_num_samples");
    return static_cast<int64_t>(d->dataset.num_samples());
  });
}

void kx_dataset_destroy(kx_dataset* d) { std::unique_ptr<kx_dataset> owned(d); }

kx_status kx_dataset_from_npy(const char* x_path, const char* y_path, kx_dataset** out) {
  return guarded([&] {
    require_arg(x_path, "x_path", "kx_dataset_from_npy");
    require_arg(y_path, "y_path", "kx_dataset_from_npy");
    require_arg(out, "out", "kx_dataset_from_npy");
    return kx::capi::hand_out(std::make_unique<kx_dataset>(kx_dataset{kx::Dataset::from_npy(x_path, y_path)}), out);
  });
}

kx_status kx_dataset_from_csv(const char* path, const char* label_column, kx_dataset** out) {
  return guarded([&] {
    require_arg(path, "path", "kx_dataset_from_csv");
    require_arg(label_column, "label_column", "kx_dataset_from_csv");
    require_arg(out, "out", "kx_dataset_from_csv");
    return kx::capi::hand_out(std::make_unique<kx_dataset>(kx_dataset{kx::Dataset::from_csv(path, label_column)}),
                              out);
  });
}

}  // extern "C"

extern "C" {

kx_status kx_dataset_from_image_directory(const char* dir, int64_t height, int64_t width, int64_t channels,
                                          kx_dataset** out) {
  return guarded([&] {
    require_arg(dir, "dir", "kx_dataset_from_image_directory");
    require_arg(out, "out", "kx_dataset_from_image_directory");
    return kx::capi::hand_out(
        std::make_unique<kx_dataset>(kx_dataset{kx::Dataset::from_image_directory(dir, height, width, channels)}),
        out);
  });
}

int64_t kx_dataset_num_classes(const kx_dataset* d) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    require_arg(d, "d", "kx_dataset_num_classes");
    return static_cast<int64_t>(d->dataset.storage().class_names.size());
  });
}

kx_status kx_dataset_class_name(const kx_dataset* d, int64_t i, const char** name) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_class_name");
    require_arg(name, "name", "kx_dataset_class_name");
    const std::vector<std::string>& names = d->dataset.storage().class_names;
    kx::require(i >= 0 && i < static_cast<int64_t>(names.size()), kx::Status::InvalidArgument,
                "kx_dataset_class_name: class " + std::to_string(i) + " is not in [0, " + std::to_string(names.size()) +
                    ")");
    *name = names[static_cast<size_t>(i)].c_str();
    return KX_OK;
  });
}

kx_status kx_dataset_random_flip(kx_dataset* d, uint64_t seed) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_random_flip");
    d->dataset.random_flip(seed);
    return KX_OK;
  });
}

kx_status kx_dataset_random_crop(kx_dataset* d, int64_t height, int64_t width, uint64_t seed) {
  return guarded([&] {
    require_arg(d, "d", "kx_dataset_random_crop");
    d->dataset.random_crop(height, width, seed);
    return KX_OK;
  });
}

int64_t kx_dataset_num_skipped(const kx_dataset* d) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    require_arg(d, "d", "kx_dataset_num_skipped");
    return d->dataset.storage().skipped;
  });
}

}  // extern "C"
