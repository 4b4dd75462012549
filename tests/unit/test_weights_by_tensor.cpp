// Weights tensor by tensor: names, shapes and order as Keras's model.weights, and get/set by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kx/kx.hpp"

namespace kx {
namespace {

std::vector<std::string> names_of(const std::vector<WeightInfo>& ws) {
  std::vector<std::string> out;
  for (const WeightInfo& w : ws) out.push_back(w.name);
  return out;
}

TEST(WeightsByTensor, TheMlpListsKerasNamesShapesAndOffsets) {
  Model m = Model::sequential(Strategy::mirrored({"cpu"}), {28, 28});
  m.add_flatten();
  m.add_dense(256, Activation::Relu);
  m.add_dense(256, Activation::Relu);
  m.add_dense(10, Activation::Softmax);
  const std::vector<WeightInfo> ws = m.weights();  // before compile too
  // keras.Sequential([Flatten(), Dense(256), Dense(256), Dense(10)]).weights
  EXPECT_EQ(names_of(ws), (std::vector<std::string>{"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias",
                                                    "dense_2/kernel", "dense_2/bias"}));
  const std::vector<Shape> shapes{{784, 256}, {256}, {256, 256}, {256}, {256, 10}, {10}};
  int64_t offset = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    EXPECT_EQ(ws[i].shape, shapes[i]) << ws[i].name;
    EXPECT_EQ(ws[i].offset, offset) << ws[i].name;
    EXPECT_TRUE(ws[i].trainable);
    offset += num_elements(ws[i].shape);
  }
  EXPECT_EQ(offset, m.num_params());
}

TEST(WeightsByTensor, TheCnnListsKerasNamesAndShapes) {
  Model m = Model::sequential(Strategy::mirrored({"cpu"}), {28, 28, 1});
  m.add_conv2d(32, 3, 3, 1, Padding::Valid, Activation::Relu);
  m.add_max_pool2d(2, 2);
  m.add_conv2d(64, 3, 3, 1, Padding::Same, Activation::Relu);
  m.add_flatten();
  m.add_dense(10, Activation::Softmax);
  const std::vector<WeightInfo> ws = m.weights();
  EXPECT_EQ(names_of(ws), (std::vector<std::string>{"conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias",
                                                    "dense/kernel", "dense/bias"}));
  EXPECT_EQ(ws[0].shape, (Shape{3, 3, 1, 32}));
  EXPECT_EQ(ws[2].shape, (Shape{3, 3, 32, 64}));
  EXPECT_EQ(ws[4].shape, (Shape{13 * 13 * 64, 10}));
}

TEST(WeightsByTensor, ResNet50ListsKerasWeights) {
  Model m = applications::resnet50(Strategy::mirrored({"cpu"}), {32, 32, 3}, true, 1000);
  const std::vector<WeightInfo> ws = m.weights();
  // keras.applications.ResNet50(weights=None): 320 tensors, 106 of them moving statistics.
  ASSERT_EQ(ws.size(), 320u);
  EXPECT_EQ(std::count_if(ws.begin(), ws.end(), [](const WeightInfo& w) { return !w.trainable; }), 106);
  EXPECT_EQ(ws[0].name, "conv1_conv/kernel");
  EXPECT_EQ(ws[0].shape, (Shape{7, 7, 3, 64}));
  EXPECT_EQ(ws[1].name, "conv1_conv/bias");
  EXPECT_EQ(names_of({ws.begin() + 2, ws.begin() + 6}),
            (std::vector<std::string>{"conv1_bn/gamma", "conv1_bn/beta", "conv1_bn/moving_mean",
                                      "conv1_bn/moving_variance"}));
  EXPECT_EQ(ws[6].name, "conv2_block1_1_conv/kernel");
  EXPECT_EQ(ws[6].shape, (Shape{1, 1, 64, 64}));
  EXPECT_EQ(ws[318].name, "predictions/kernel");
  EXPECT_EQ(ws[318].shape, (Shape{2048, 1000}));
  EXPECT_EQ(ws[319].name, "predictions/bias");
  EXPECT_EQ(m.num_params(), 25636712);  // Keras's "Total params"
}

Model small_model(const std::vector<std::string>& devices) {
  Model m = Model::sequential(Strategy::mirrored(devices), {4});
  m.add_dense(3, Activation::Relu);
  m.add_dense(2);
  return m;
}

TEST(WeightsByTensor, GetAndSetOneTensorByNameOnEveryReplica) {
  Model m = small_model({"cpu", "cpu"});
  try {
    m.get_weight("dense/kernel");
    ADD_FAILURE() << "get_weight before compile";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Misuse);
  }
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Sgd;
  co.loss.kind = LossKind::MeanSquaredError;
  m.compile(co);
  const std::vector<float> flat = m.get_weights();
  for (const WeightInfo& w : m.weights()) {
    const std::vector<float> t = m.get_weight(w.name);
    ASSERT_EQ(static_cast<int64_t>(t.size()), num_elements(w.shape));
    EXPECT_TRUE(std::equal(t.begin(), t.end(), flat.begin() + w.offset)) << w.name;
  }
  std::vector<float> kernel(6);
  std::iota(kernel.begin(), kernel.end(), 1.0f);
  for (float& k : kernel) k /= 10;
  m.set_weight("dense_1/kernel", kernel.data(), kernel.size());
  EXPECT_EQ(m.get_weight("dense_1/kernel"), kernel);
  std::vector<float> expected = flat;
  std::copy(kernel.begin(), kernel.end(), expected.begin() + 12 + 3);  // after dense's kernel and bias
  EXPECT_EQ(m.get_weights(), expected);
  for (const auto& [name, count] : std::vector<std::pair<std::string, size_t>>{{"dense_1/kernel", 5}, {"nope/kernel", 6}})
    EXPECT_THROW(m.set_weight(name, kernel.data(), count), Error) << name;
  EXPECT_EQ(m.get_weight("dense_1/kernel"), kernel);  // unchanged by the refused calls

  // Every replica holds the new tensor: one step on two replicas equals one step on one device given
  // the same weights (a replica still holding the old kernel would add a different gradient).
  Model one = small_model({"cpu"});
  one.compile(co);
  one.set_weights(flat);
  one.set_weight("dense_1/kernel", kernel.data(), kernel.size());
  const std::vector<float> x{1, 2, 3, 4, 4, 3, 2, 1, 0, 1, 0, 1, 1, 0, 1, 0};
  const std::vector<float> y{1, 0, 0, 1, 1, 1, 0, 0};
  for (Model* model : {&m, &one}) {
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {4, 4}, y.data(), DType::F32, {4, 2});
    d.batch(4, false);
    FitOptions fo;
    model->fit(d, fo, nullptr, nullptr);
  }
  const std::vector<float> a = m.get_weights(), b = one.get_weights();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6f) << i;
  EXPECT_NE(m.get_weight("dense_1/kernel"), kernel);  // and the step did change it
}

}  // namespace
}  // namespace kx
