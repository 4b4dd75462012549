// Sizes beyond reason are refused with InvalidArgument before anything multiplies them: the checked
// helpers themselves, and layers given such sizes through C++, JSON and Keras configs (under UBSan a
// signed overflow in a layer's arithmetic halts the test).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "core/checked_size.hpp"
#include "kx/error.hpp"
#include "kx/model.hpp"
#include "reference.hpp"

namespace kx {
namespace {

constexpr int64_t kHuge = int64_t{1} << 31;

TEST(CheckedSizes, ProductsStopAtTheLimitWithoutOverflow) {
  EXPECT_EQ(core::checked_product({3, 4, 5}, "p"), 60);
  EXPECT_EQ(core::checked_product({}, "p"), 1);
  EXPECT_EQ(core::checked_product({kMaxElements, 1}, "p"), kMaxElements);
  EXPECT_EQ(test::status_of([] { core::checked_product({kMaxElements, 2}, "p"); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { core::checked_product({kHuge, kHuge, kHuge, kHuge}, "p"); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { core::checked_product({std::numeric_limits<int64_t>::max(), 2}, "p"); }),
            Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { core::checked_product({-1, 2}, "p"); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { core::checked_elements({kHuge, kHuge, kHuge}, "s"); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { core::checked_dimension(0, 1, "d"); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { core::checked_dimension(kMaxElements + 1, 1, "d"); }), Status::InvalidArgument);
  EXPECT_EQ(core::checked_dimension(7, 1, "d"), 7);
}

Status adding(const Shape& input, const std::string& layer_json) {
  return test::status_of([&] {
    Model m = Model::sequential(Strategy::mirrored({"cpu"}), input);
    m.add_layer(layer_json);
  });
}

TEST(CheckedSizes, LayersRefuseSizesWhoseProductsOverflow) {
  // Same padding keeps the output small, so only the kernel's products are absurd.
  const std::string huge = std::to_string(kHuge);
  EXPECT_EQ(adding({8, 8, 3}, R"({"class_name": "Conv2D", "config": {"filters": 4, "padding": "same", "kernel_size": [)" +
                                  huge + "," + huge + "]}}"),
            Status::InvalidArgument);
  EXPECT_EQ(adding({8, 8, 3}, R"({"class_name": "Conv2D", "config": {"filters": 1e15, "kernel_size": 3, "padding": "same"}})"),
            Status::InvalidArgument);
  EXPECT_EQ(adding({8, 8, 3}, R"({"class_name": "Conv2D", "config": {"filters": 4, "kernel_size": 3, "strides": 9e18}})"),
            Status::InvalidArgument);
  EXPECT_EQ(adding({1 << 20}, R"({"class_name": "Dense", "config": {"units": )" + std::to_string(int64_t{1} << 30) + "}}"),
            Status::InvalidArgument);
  EXPECT_EQ(adding({8}, R"({"class_name": "Dense", "config": {"units": 9e18}})"), Status::InvalidArgument);
  EXPECT_EQ(adding({8, 8, 3}, R"({"class_name": "MaxPooling2D", "config": {"pool_size": 2, "strides": 9e18}})"),
            Status::InvalidArgument);
  EXPECT_EQ(adding({8, 8, 3}, R"({"class_name": "ZeroPadding2D", "config": {"padding": 9e18}})"), Status::InvalidArgument);
  EXPECT_EQ(adding({8, 8, 3}, R"({"class_name": "ZeroPadding2D", "config": {"padding": [[)" + huge + "," + huge +
                                  "],[" + huge + "," + huge + "]]}}"),
            Status::InvalidArgument);
  // Reasonable sizes still work.
  EXPECT_EQ(adding({8, 8, 3}, R"({"class_name": "Conv2D", "config": {"filters": 4, "kernel_size": 3}})"), Status::Ok);
}

TEST(CheckedSizes, TheCppApiRefusesAHugeKernel) {
  Model m = Model::sequential(Strategy::mirrored({"cpu"}), {8, 8, 3});
  EXPECT_EQ(test::status_of([&] { m.add_conv2d(4, kHuge, kHuge, 1, Padding::Same); }), Status::InvalidArgument);
  EXPECT_TRUE(m.layer_names().empty());
}

}  // namespace
}  // namespace kx
