// The small models and data the loader fuzzers feed their inputs to, shared with the seed writer
// (loader_seed_writer.cpp) so that its seeds are valid inputs of exactly these.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

#include "kx/kx.hpp"

namespace kx::fuzz {

// fuzz_load_weights: Dense, BatchNormalization and Dense, so that names, shapes and the moving
// statistics (untrained weights) all matter.
inline Model weights_model() {
  Model m = Model::sequential(Strategy::default_strategy(), {5});
  m.add_layer(R"({"class_name": "Dense", "config": {"units": 4, "activation": "relu"}})");
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {}})");
  m.add_layer(R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})");
  CompileOptions co;
  co.seed = 11;
  m.compile(co);
  return m;
}

// fuzz_resume: a tiny model, and 16 samples in batches of 8 (2 steps an epoch); a fit of 2 epochs
// resumes from the input, so that it takes a step or two after the restore.
inline Model resume_model() {
  Model m = Model::sequential(Strategy::default_strategy(), {3});
  m.add_dense(4, Activation::Relu);
  m.add_dropout(0.25f);
  m.add_dense(2, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.seed = 5;
  m.compile(co);
  return m;
}

inline Dataset resume_data() {
  std::vector<float> x(16 * 3), y(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) / 11.0f;
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 2);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {16, 3}, y.data(), DType::F32, {16});
  d.shuffle(16, 2);
  d.batch(8, false);
  return d;
}

inline FitOptions resume_options(const std::string& path) {
  FitOptions o;
  o.epochs = 2;
  o.resume_from = path;
  return o;
}

// A file of this process's own for the inputs that must be files (removed at exit).
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& suffix) {
    path_ = "/tmp/kx-fuzz-" + std::to_string(::getpid()) + "-" + suffix;
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }
  const std::string& write(const void* data, size_t size) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (f) {
      if (size) std::fwrite(data, 1, size, f);
      std::fclose(f);
    }
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace kx::fuzz
