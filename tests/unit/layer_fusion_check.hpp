// What the layer-fusion tests share (test_activation_fusion.cpp, test_padding_absorption.cpp): models
// compiled with and without fusion (the no_layer_fusion hook), trained alike, must end with equal values.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "config/test_hooks.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx::test {

// Models compiled while it lives run every layer themselves.
class FusionOff {
 public:
  explicit FusionOff(bool off) { config::test_hooks().no_layer_fusion = off; }
  ~FusionOff() { config::test_hooks().no_layer_fusion = false; }
  FusionOff(const FusionOff&) = delete;
  FusionOff& operator=(const FusionOff&) = delete;
};

struct Trained {
  std::vector<float> weights, predictions;
  double loss = 0;
  int64_t arena = 0;
};

// The model `make` builds (on two CPU replicas or one device), compiled with fusion or without, after
// two epochs of Adam (rate 0.01) in batches of 8 on n samples of `sample` shape (values in [-2, 2],
// labels i % classes); `frozen` layers train in inference mode.
inline Trained train_fused_or_apart(const std::function<Model(const Strategy&)>& make, bool fusion, const Shape& sample,
                                    int64_t n, int64_t classes, const std::vector<std::string>& frozen = {},
                                    bool two_replicas = false) {
  const FusionOff hook(!fusion);
  Strategy s = two_replicas ? Strategy::mirrored({"cpu", "cpu"}) : Strategy::default_strategy();
  Model m = make(s);
  for (const std::string& layer : frozen) m.set_trainable(layer, false);
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Adam;
  co.optimizer.learning_rate = 0.01;
  m.compile(co);
  int64_t size = 1;
  for (int64_t d : sample) size *= d;
  std::vector<float> x = random_floats(static_cast<size_t>(n * size), 11, -2.0f, 2.0f), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % classes);
  Shape shape{n};
  shape.insert(shape.end(), sample.begin(), sample.end());
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, shape, y.data(), DType::F32, {n});
  d.batch(8, false);
  FitOptions fo;
  fo.epochs = 2;
  History h;
  EXPECT_EQ(m.fit(d, fo, nullptr, &h), Status::Ok);
  Trained t;
  t.weights = m.get_weights();
  t.predictions = m.predict(x.data(), n);
  t.loss = h.get("loss", 1);
  t.arena = m.training_memory(8).step_arena;
  return t;
}

// Equal values (a fused ReLU may give 0 where the layer gave -0: equal, not the same bits).
inline void expect_equal_values(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i])) << what << " [" << i << "]";
    ASSERT_EQ(a[i], b[i]) << what << " [" << i << "]";
  }
}

}  // namespace kx::test
