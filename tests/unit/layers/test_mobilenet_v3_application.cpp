// MobileNetV3Small and MobileNetV3Large built as keras.applications builds them: the weight counts Keras
// 3.15 gives (64x64x3 input, 10 classes), Keras's layer and operation names, a prediction of
// probabilities, and the arguments kx_model_create_application refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kx/applications.hpp"
#include "kx/model.hpp"
#include "reference.hpp"

namespace kx {
namespace {

struct Case {
  const char* name;
  const char* options;
  int64_t keras_params;  // keras.applications.<name>(weights=None, ...).count_params()
  size_t keras_nodes;    // len(model.get_config()["layers"]) - 1: layers and operations
};

TEST(MobileNetV3Application, HasKerasWeightsAndNames) {
  for (const Case& c : {Case{"MobileNetV3Small", R"({"input_shape": [64, 64, 3], "classes": 10})", 1540218, 181},
                        Case{"MobileNetV3Large", R"({"input_shape": [64, 64, 3], "classes": 10})", 4239242, 209},
                        Case{"MobileNetV3Small",
                             R"({"input_shape": [64, 64, 3], "classes": 10, "minimalistic": true, "alpha": 0.75})",
                             727442, 109},
                        Case{"MobileNetV3Large",
                             R"({"input_shape": [64, 64, 3], "classes": 10, "include_top": false, "pooling": "avg"})",
                             2996352, 203}}) {
    SCOPED_TRACE(std::string(c.name) + " " + c.options);
    Model m = applications::application(Strategy::mirrored({"cpu"}), c.name, c.options);
    EXPECT_EQ(m.num_params(), c.keras_params);
    const std::vector<std::string> names = m.layer_names();
    EXPECT_EQ(names.size(), c.keras_nodes);
    for (const char* keras_name : {"conv", "conv_bn", "expanded_conv_depthwise", "expanded_conv_1_expand", "conv_1"})
      EXPECT_NE(std::find(names.begin(), names.end(), keras_name), names.end()) << keras_name;
  }
}

TEST(MobileNetV3Application, PredictsProbabilities) {
  Model m = applications::application(Strategy::mirrored({"cpu"}), "MobileNetV3Small",
                                      R"({"input_shape": [32, 32, 3], "classes": 4})");
  CompileOptions o;
  o.seed = 3;
  m.compile(o);
  const std::vector<float> x = test::random_floats(2 * 32 * 32 * 3, 5, 0.0f, 255.0f);
  const std::vector<float> y = m.predict(x.data(), 2);
  ASSERT_EQ(y.size(), 8u);
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
      EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(r * 4 + k)]));
      sum += y[static_cast<size_t>(r * 4 + k)];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(MobileNetV3Application, RefusesWhatKerasRefuses) {
  const auto status = [](const char* options) {
    return test::status_of([&] { applications::application(Strategy::mirrored({"cpu"}), "MobileNetV3Small", options); });
  };
  EXPECT_EQ(status(R"({"input_shape": [16, 16, 3]})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"alpha": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"dropout_rate": 1.0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"pooling": "min", "include_top": false})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"alhpa": 1.0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"weights": "imagenet"})"), Status::Unsupported);
}

}  // namespace
}  // namespace kx
