// Training in a mixed policy: float16's dynamic loss scale (Keras's LossScaleOptimizer), checkpoints
// that stay float32 across policies, and N replicas against one.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "backend/loss_scale_math.hpp"
#include "core/train/train_position.hpp"
#include "io/safetensors.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kx_mixed_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(LossScale, TheStateMachineIsKerasLossScaleOptimizers) {
  backend::LossScaleState s;  // 2^15, 2000 growth steps
  for (int i = 0; i < 1999; ++i) {
    backend::update_loss_scale(s);
    ASSERT_EQ(s.scale, 32768.0f);
    ASSERT_EQ(s.applied, 1.0f);
    ASSERT_EQ(s.grad_factor, 1.0f / 32768.0f);
  }
  backend::update_loss_scale(s);  // the 2000th finite step in a row
  EXPECT_EQ(s.scale, 65536.0f);
  EXPECT_EQ(s.good_steps, 0);
  EXPECT_EQ(s.grad_factor, 1.0f / 32768.0f);  // this step's gradients were scaled by the old scale
  backend::update_loss_scale(s);
  s.finite = 0.0f;  // as loss_scale_check leaves it on an overflow
  backend::update_loss_scale(s);
  EXPECT_EQ(s.scale, 32768.0f);
  EXPECT_EQ(s.good_steps, 0);
  EXPECT_EQ(s.applied, 0.0f);
  EXPECT_EQ(s.grad_factor, 0.0f);
  EXPECT_EQ(s.finite, 1.0f);  // ready for the next step
}

Model small_model(Precision p, uint64_t seed = 5, OptimizerKind opt = OptimizerKind::Adam) {
  Strategy s = Strategy::default_strategy();
  s.set_num_threads(1);
  Model m = Model::sequential(s, {6});
  m.add_dense(8, Activation::Relu);
  m.add_dense(3, Activation::Softmax);
  CompileOptions co;
  co.seed = seed;
  co.precision = p;
  co.optimizer.kind = opt;
  m.compile(co);
  return m;
}

int64_t saved_steps(const Model& m, const std::string& file) {
  m.save(file);
  return core::peek_global_step(file);
}

// A batch that overflows float16 (an input of 1e6 is infinite there) is skipped whole: the weights
// stay bitwise as they were, the optimizer's step count does not move, the scale halves and its count
// of finite steps restarts; the next batch trains as usual.
TEST(LossScale, AnOverflowSkipsExactlyThatStepAndHalvesTheScale) {
  const std::string file = temp_path("overflow.kx");
  Model m = small_model(Precision::MixedFloat16);
  const std::vector<float> xa = test::random_floats(4 * 6, 1), xb = test::random_floats(4 * 6, 2);
  std::vector<float> bad = xa;
  bad[5] = 1e6f;
  const std::vector<float> y = {0, 1, 2, 1};
  EXPECT_EQ(m.loss_scale(), 32768.0);
  m.train_on_batch(xa.data(), y.data(), 4);
  const std::vector<float> after_a = m.get_weights();
  EXPECT_EQ(saved_steps(m, file), 1);
  m.train_on_batch(bad.data(), y.data(), 4);
  EXPECT_TRUE(m.get_weights() == after_a) << "the overflowing step changed the weights";
  EXPECT_EQ(m.loss_scale(), 16384.0);
  EXPECT_EQ(saved_steps(m, file), 1) << "a skipped step is no optimizer iteration";
  EXPECT_EQ(io::SafetensorsFile::decode(io::read_file(file), file).meta("loss_scale_good_steps"), "0");
  m.train_on_batch(xb.data(), y.data(), 4);
  EXPECT_FALSE(m.get_weights() == after_a);
  EXPECT_EQ(saved_steps(m, file), 2);

  // The same two good batches without the bad one: the skipped step left nothing behind (Adam's slots
  // and step count included). The scales differ by a power of two, which moves no float16 rounding of
  // these (normal) gradients: the weights agree.
  Model twin = small_model(Precision::MixedFloat16);
  twin.train_on_batch(xa.data(), y.data(), 4);
  twin.train_on_batch(xb.data(), y.data(), 4);
  const double d = test::relative_difference(m.get_weights(), twin.get_weights());
  std::printf("with and without the skipped step: relative weight difference %.3g\n", d);
  EXPECT_LE(d, 1e-6);
  std::filesystem::remove(file);
}

TEST(LossScale, TwoThousandFiniteStepsDoubleIt) {
  Model m = small_model(Precision::MixedFloat16, 9, OptimizerKind::Sgd);
  const std::vector<float> x = test::random_floats(4 * 6, 3), y = {0, 1, 2, 1};
  for (int i = 0; i < 1999; ++i) m.train_on_batch(x.data(), y.data(), 4);
  EXPECT_EQ(m.loss_scale(), 32768.0);
  m.train_on_batch(x.data(), y.data(), 4);
  EXPECT_EQ(m.loss_scale(), 65536.0);
}

// Checkpoints hold float32 weights and name the policy only in the compile config: a file trained
// mixed loads into a float32 model and back, resumes across policies, and float16's loss scale
// survives a save.
TEST(MixedCheckpoint, WeightsCrossPoliciesAndTheLossScaleIsKept) {
  const std::string file = temp_path("cross.kx");
  Model mixed = small_model(Precision::MixedFloat16);
  const std::vector<float> x = test::random_floats(4 * 6, 4), y = {2, 1, 0, 1};
  std::vector<float> bad = x;
  bad[0] = 1e9f;
  mixed.train_on_batch(x.data(), y.data(), 4);
  mixed.train_on_batch(bad.data(), y.data(), 4);  // the scale halves
  mixed.save(file);
  const io::SafetensorsFile f = io::SafetensorsFile::decode(io::read_file(file), file);
  for (const io::TensorEntry& e : f.tensors())  // float32 tensors (the reader accepts no other dtype)
    EXPECT_EQ(e.end - e.begin, num_elements(e.shape) * 4) << e.name;
  EXPECT_EQ(f.meta("loss_scale"), "16384");

  Model again = Model::load(Strategy::default_strategy(), file);
  EXPECT_EQ(again.loss_scale(), 16384.0);
  EXPECT_TRUE(again.get_weights() == mixed.get_weights());
  EXPECT_TRUE(again.predict(x.data(), 4) == mixed.predict(x.data(), 4)) << "the policy came back with the file";

  Model f32 = small_model(Precision::Float32, 77);
  f32.load_weights(file, false);
  EXPECT_TRUE(f32.get_weights() == mixed.get_weights());
  EXPECT_EQ(f32.loss_scale(), 1.0);

  // And back: a float32 file (no loss scale in it) into a float16 model starts from the initial scale.
  f32.train_on_batch(x.data(), y.data(), 4);
  f32.save(file);
  Model back = small_model(Precision::MixedBfloat16, 78);
  back.load_weights(file, false);
  EXPECT_TRUE(back.get_weights() == f32.get_weights());
  std::filesystem::remove(file);
}

TEST(MixedCheckpoint, AFit16ResumesFromAFloat32CheckpointWithTheInitialScale) {
  const std::string dir = temp_path("resume");
  std::filesystem::create_directories(dir);
  const std::vector<float> x = test::random_floats(32 * 6, 6);
  std::vector<float> y(32);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {32, 6}, y.data(), DType::F32, {32});
  d.batch(8, false);
  Model f32 = small_model(Precision::Float32);
  Callbacks cb;
  cb.add_model_checkpoint(dir + "/ckpt-{step}.kx", 2, 0);
  FitOptions fo;
  fo.epochs = 1;
  ASSERT_EQ(f32.fit(d, fo, &cb, nullptr), Status::Ok);
  Model f16 = small_model(Precision::MixedFloat16, 5);
  fo.epochs = 2;
  fo.resume_from = dir;
  ASSERT_EQ(f16.fit(d, fo, nullptr, nullptr), Status::Ok);
  EXPECT_EQ(f16.loss_scale(), 32768.0);
  std::filesystem::remove_all(dir);
}

// N replicas compute one device's update under a mixed policy too: each step taken from the state one
// device reached (through a saved file, which keeps the policy), up to rounding in the 16-bit type
// (each replica rounds its own share of the weight gradients before they are summed in float32). SGD,
// whose update is the gradient: Adam's first steps move each weight by about +-lr whatever the size of
// its gradient, so a gradient rounded to 0 one way and not the other changes its whole update.
TEST(MixedMirrored, ReplicasComputeTheUpdateOfOneDeviceStepByStep) {
  const std::string file = temp_path("mirrored.kx");
  for (Precision p : {Precision::MixedBfloat16, Precision::MixedFloat16}) {
    Strategy one_device = Strategy::mirrored({"cpu"}), two = Strategy::mirrored({"cpu", "cpu"});
    one_device.set_num_threads(1);
    two.set_num_threads(2);
    Model one = Model::sequential(one_device, {20});
    one.add_dense(32, Activation::Relu);
    one.add_dense(32, Activation::Tanh);
    one.add_dense(4, Activation::Softmax);
    CompileOptions co;
    co.seed = 7;
    co.precision = p;
    co.optimizer.kind = OptimizerKind::Sgd;
    co.optimizer.learning_rate = 0.1;
    one.compile(co);
    const int64_t batch = 24;
    const std::vector<float> x = test::random_floats(batch * 20 * 20, 8);
    std::vector<float> y(batch * 20);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i * 7) % 4);
    double worst = 0;
    for (int step = 0; step < 20; ++step) {
      one.save(file);
      Model other = Model::load(two, file);
      const std::vector<float> before = one.get_weights();
      one.train_on_batch(x.data() + step * batch * 20, y.data() + step * batch, batch);
      other.train_on_batch(x.data() + step * batch * 20, y.data() + step * batch, batch);
      std::vector<float> d1(before.size()), d2(before.size());
      for (size_t i = 0; i < before.size(); ++i) {
        d1[i] = one.get_weights()[i] - before[i];
        d2[i] = other.get_weights()[i] - before[i];
      }
      worst = std::max(worst, test::relative_difference(d2, d1));
    }
    std::printf("%s: 2 replicas vs 1, max relative difference of the updates %.3g over 20 steps\n",
                precision_name(p), worst);
    EXPECT_LE(worst, p == Precision::MixedBfloat16 ? 0x1p-6 : 0x1p-9) << precision_name(p);
  }
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace kx
