// EfficientNetB0 built as keras.applications builds it: the weight counts Keras 3.15 gives, Keras's
// layer names in Keras's order at both ends, a prediction of probabilities, a JSON round trip, and
// the arguments kx_model_create_application refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kx/applications.hpp"
#include "kx/model.hpp"
#include "reference.hpp"

namespace kx {
namespace {

TEST(EfficientNetApplication, HasKerasWeightsAndNames) {
  struct Case {
    const char* options;
    int64_t keras_params;  // keras.applications.EfficientNetB0(weights=None, ...).count_params()
    size_t keras_layers;   // len(model.layers) - 1
    const char* last;
  };
  for (const Case& c : {Case{R"({"input_shape": [32, 32, 3], "classes": 4})", 4054695, 239, "predictions"},
                        Case{R"({"input_shape": [64, 64, 3], "include_top": false, "pooling": "avg"})", 4049571, 237,
                             "avg_pool"}}) {
    SCOPED_TRACE(c.options);
    Model m = applications::application(Strategy::mirrored({"cpu"}), "EfficientNetB0", c.options);
    EXPECT_EQ(m.num_params() + 1, c.keras_params);  // Keras also counts Normalization's adapt() count
    const std::vector<std::string> names = m.layer_names();
    ASSERT_EQ(names.size(), c.keras_layers);
    const std::vector<std::string> first{"rescaling", "normalization", "stem_conv_pad", "stem_conv", "stem_bn",
                                         "stem_activation", "block1a_dwconv", "block1a_bn"};
    EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 8), first);
    EXPECT_EQ(names.back(), c.last);
  }
}

TEST(EfficientNetApplication, PredictsProbabilitiesAndRoundTripsJson) {
  Model m = applications::application(Strategy::mirrored({"cpu"}), "EfficientNetB0",
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
  Model back = Model::from_json(Strategy::mirrored({"cpu"}), m.to_json());
  EXPECT_EQ(back.layer_names(), m.layer_names());
  EXPECT_EQ(back.num_params(), m.num_params());
  back.compile(o);
  back.set_weights(m.get_weights());
  const std::vector<float> again = back.predict(x.data(), 2);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(again[i], y[i]);
}

TEST(EfficientNetApplication, RefusesWhatKerasRefuses) {
  const auto status = [](const char* options) {
    return test::status_of([&] { applications::application(Strategy::mirrored({"cpu"}), "EfficientNetB0", options); });
  };
  EXPECT_EQ(status(R"({"input_shape": [16, 16, 3]})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"classes": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"pooling": "min", "include_top": false})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"alpha": 1.0})"), Status::InvalidArgument);  // not an EfficientNetB0 argument
  EXPECT_EQ(status(R"({"weights": "imagenet"})"), Status::Unsupported);
}

}  // namespace
}  // namespace kx
