// Model files and checkpoints: the safetensors layout, rejection of damaged files, restore onto any
// replica count, resume, and the callbacks that come with them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/callbacks/path_template.hpp"
#include "io/durable_write.hpp"
#include "io/safetensors.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("kx-test-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Dataset toy(int64_t n = 96, uint32_t seed = 3) {
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n * 6), seed);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>((x[static_cast<size_t>(i * 6)] > 0) + (x[static_cast<size_t>(i * 6 + 1)] > 0));
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 6}, y.data(), DType::F32, {n});
  d.shuffle(n, 9);
  d.batch(8, false);
  return d;
}

Model toy_model(int replicas = 1, int64_t hidden = 16, OptimizerKind opt = OptimizerKind::Adam, double momentum = 0.9) {
  Model m = Model::sequential(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(replicas), "cpu")), {6});
  m.add_dense(hidden, Activation::Relu);
  m.add_dropout(0.2f);
  m.add_dense(3, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.optimizer.kind = opt;
  co.optimizer.momentum = opt == OptimizerKind::Sgd || opt == OptimizerKind::RmsProp ? momentum : 0.0;
  co.optimizer.centered = opt == OptimizerKind::RmsProp;  // all three of its slots
  co.seed = 21;
  m.compile(co);
  return m;
}

TEST(Checkpoint, SavedModelLoadsAndTrainsOnExactlyLikeTheOriginal) {
  TempDir dir;
  for (OptimizerKind opt : {OptimizerKind::Adam, OptimizerKind::Sgd, OptimizerKind::AdamW, OptimizerKind::RmsProp}) {
    SCOPED_TRACE(static_cast<int>(opt));
    Dataset d = toy();
    Model a = toy_model(1, 16, opt);
    ASSERT_EQ(a.fit(d, FitOptions{}, nullptr, nullptr), Status::Ok);
    a.save(dir / "m.kx");
    const EvalResult ea = a.evaluate(d);
    for (int replicas : {1, 2, 3}) {
      Model b = Model::load(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(replicas), "cpu")),
                            dir / "m.kx");
      EXPECT_EQ(b.to_json(), a.to_json());
      EXPECT_TRUE(b.get_weights() == a.get_weights());
      EXPECT_NEAR(b.evaluate(d).loss, ea.loss, 1e-6);
    }
    // The optimizer state came along: one more epoch gives the same weights, bit for bit.
    Model b = Model::load(Strategy::default_strategy(), dir / "m.kx");
    Dataset d1 = toy(), d2 = toy();
    ASSERT_EQ(a.fit(d1, FitOptions{}, nullptr, nullptr), Status::Ok);
    ASSERT_EQ(b.fit(d2, FitOptions{}, nullptr, nullptr), Status::Ok);
    EXPECT_TRUE(a.get_weights() == b.get_weights());
  }
}

TEST(Checkpoint, UncompiledModelsCannotBeSaved) {
  Model m = Model::sequential(Strategy::default_strategy(), {6});
  m.add_dense(3);
  TempDir dir;
  EXPECT_EQ(test::status_of([&] { m.save(dir / "m.kx"); }), Status::Misuse);
  EXPECT_EQ(test::status_of([&] { Model::load(Strategy::default_strategy(), dir / "missing.kx"); }), Status::Io);
  EXPECT_EQ(test::status_of([&] { Model::load(Strategy::default_strategy(), dir.path.string()); }), Status::Io);
}

TEST(Checkpoint, AFailedSaveLeavesNoTemporaryFileBehind) {
  Model m = toy_model();
  TempDir dir;
  std::filesystem::create_directory(dir / "taken");  // the rename onto a directory fails
  EXPECT_EQ(test::status_of([&] { m.save(dir / "taken"); }), Status::Io);
  EXPECT_FALSE(std::filesystem::exists(dir / "taken.tmp"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "taken"));
}

TEST(Checkpoint, EveryTruncationAndEveryBitFlipIsRejectedAsCorrupt) {
  TempDir dir;
  Model m = toy_model(1, 4);
  m.save(dir / "m.kx");
  const std::string good = read_bytes(dir / "m.kx");
  ASSERT_EQ(io::SafetensorsFile::decode(good, "m.kx").tensors().size(), 12u);  // 4 parameters, m and v each
  const auto status_of_bytes = [&](const std::string& bytes) {
    return test::status_of([&] { io::SafetensorsFile::decode(bytes, "m.kx"); });
  };
  for (size_t len = 0; len < good.size(); ++len)
    ASSERT_EQ(status_of_bytes(good.substr(0, len)), Status::Corrupt) << "truncated to " << len << " bytes";
  EXPECT_EQ(status_of_bytes(good + std::string(4, '\0')), Status::Corrupt);
  for (size_t byte = 0; byte < good.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = good;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      ASSERT_EQ(status_of_bytes(flipped), Status::Corrupt) << "bit " << bit << " of byte " << byte;
    }
  // Through the public API too, with the file's name in the message.
  write_bytes(dir / "bad.kx", good.substr(0, good.size() / 2));
  try {
    Model::load(Strategy::default_strategy(), dir / "bad.kx");
    ADD_FAILURE() << "a truncated file loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Corrupt);
    EXPECT_NE(std::string(e.what()).find("bad.kx"), std::string::npos) << e.what();
  }
  write_bytes(dir / "empty.kx", "");
  EXPECT_EQ(test::status_of([&] { Model::load(Strategy::default_strategy(), dir / "empty.kx"); }), Status::Corrupt);
}

TEST(Checkpoint, ResumeFromADirectorySkipsACorruptNewestFile) {
  TempDir dir;
  Dataset d = toy();
  Model full = toy_model();
  FitOptions fo;
  fo.epochs = 4;
  ASSERT_EQ(full.fit(d, fo, nullptr, nullptr), Status::Ok);

  Model first = toy_model();
  Callbacks cb;
  cb.add_model_checkpoint(dir / "ckpt/c-{step:04d}.kx", 5, 0);
  fo.epochs = 2;
  ASSERT_EQ(first.fit(d, fo, &cb, nullptr), Status::Ok);  // 24 steps: files at steps 5, 10, 15, 20
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir.path / "ckpt")) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 4u);
  // Damage the newest (step 20): resume must use step 15 and still end where the full run ended.
  std::string bytes = read_bytes(files.back());
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  write_bytes(files.back(), bytes);
  write_bytes(dir / "ckpt/c-9999.kx.tmp", "half a file");  // a crash mid-write: ignored

  Model resumed = toy_model();
  fo.epochs = 4;
  fo.resume_from = (dir.path / "ckpt").string();
  int64_t first_step = -1;
  Callbacks watch;
  watch.add([&](const Event& e) {
    if (e.kind == EventKind::TrainBegin) first_step = e.global_step;
    return false;
  });
  ASSERT_EQ(resumed.fit(d, fo, &watch, nullptr), Status::Ok);
  EXPECT_EQ(first_step, 15);
  EXPECT_TRUE(resumed.get_weights() == full.get_weights());
}

TEST(Checkpoint, ACheckpointOfTwoReplicasContinuesOnOneAndOnThree) {
  TempDir dir;
  Dataset d = toy(120);
  Model two = toy_model(2);
  Callbacks cb;
  cb.add_model_checkpoint(dir / "c.kx", 7, 0);  // overwritten at steps 7 and 14
  FitOptions fo;
  fo.epochs = 2;
  fo.steps_per_epoch = 8;
  ASSERT_EQ(two.fit(d, fo, &cb, nullptr), Status::Ok);
  for (int replicas : {1, 3}) {
    Model other = toy_model(replicas);
    FitOptions ro = fo;
    ro.resume_from = dir / "c.kx";
    History h;
    ASSERT_EQ(other.fit(d, ro, nullptr, &h), Status::Ok);
    EXPECT_EQ(h.num_epochs(), 1);  // only the second epoch's last 2 steps were left
    EXPECT_LE(test::relative_difference(other.get_weights(), two.get_weights()), 1e-6) << replicas << " replicas";
  }
}

// A callback that saves without reading batch metrics: the loss of the steps before it may still be
// on the device (kx reads it lazily), and the checkpoint must hold it all the same.
class SaveAtStep final : public Callback {
 public:
  SaveAtStep(std::string path, int64_t step) : path_(std::move(path)), step_(step) {}
  bool reads_batch_metrics() const override { return false; }
  bool on_event(const Event& e, TrainingControl& control) override {
    if (e.kind == EventKind::BatchEnd && e.global_step == step_) control.save_checkpoint(path_);
    return false;
  }

 private:
  std::string path_;
  int64_t step_;
};

TEST(Checkpoint, ASaveMidEpochHoldsTheLossOfEveryStepBeforeIt) {
  TempDir dir;
  Dataset d = toy(96);  // 12 steps per epoch
  Model full = toy_model();
  Callbacks cb;
  cb.add(std::make_shared<SaveAtStep>(dir / "mid.kx", 5));
  History whole;
  ASSERT_EQ(full.fit(d, FitOptions{}, &cb, &whole), Status::Ok);
  Model resumed = toy_model();
  FitOptions ro;
  ro.resume_from = dir / "mid.kx";
  History rest;
  ASSERT_EQ(resumed.fit(d, ro, nullptr, &rest), Status::Ok);
  // The resumed epoch's loss is over all 12 steps: the 5 before the save come from the checkpoint.
  EXPECT_DOUBLE_EQ(rest.get("loss", 0), whole.get("loss", 0));
  EXPECT_DOUBLE_EQ(rest.get("accuracy", 0), whole.get("accuracy", 0));
  EXPECT_TRUE(resumed.get_weights() == full.get_weights());
}

TEST(Checkpoint, EpochMetricsDoNotDependOnWhenTheLossIsRead) {
  Dataset d1 = toy(96), d2 = toy(96);
  Model lazy = toy_model(), eager = toy_model();
  History h_lazy, h_eager;
  FitOptions fo;
  fo.epochs = 2;
  ASSERT_EQ(lazy.fit(d1, fo, nullptr, &h_lazy), Status::Ok);
  Callbacks reader;  // a function callback reads every batch's metrics
  int batches = 0;
  reader.add([&](const Event& e) {
    if (e.kind == EventKind::BatchEnd) {
      EXPECT_TRUE(std::isfinite(e.loss)) << ++batches;
    }
    return false;
  });
  ASSERT_EQ(eager.fit(d2, fo, &reader, &h_eager), Status::Ok);
  EXPECT_EQ(h_lazy.values(), h_eager.values());
  EXPECT_TRUE(lazy.get_weights() == eager.get_weights());
}

TEST(Checkpoint, AnotherModelOrOtherDataCannotResume) {
  TempDir dir;
  Dataset d = toy();
  Model m = toy_model();
  Callbacks cb;
  cb.add_model_checkpoint(dir / "c.kx", 0, 0);
  ASSERT_EQ(m.fit(d, FitOptions{}, &cb, nullptr), Status::Ok);
  FitOptions ro;
  ro.epochs = 2;
  ro.resume_from = dir / "c.kx";

  Model wider = toy_model(1, 17);
  try {
    wider.fit(d, ro, nullptr, nullptr);
    ADD_FAILURE() << "resumed another model";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("units"), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::status_of([&] { Model sgd = toy_model(1, 16, OptimizerKind::Sgd); sgd.fit(d, ro, nullptr, nullptr); }),
            Status::InvalidArgument);
  Dataset rebatched = toy();
  rebatched.batch(16, false);
  Model same = toy_model();
  const std::vector<float> before = same.get_weights();
  EXPECT_EQ(test::status_of([&] { same.fit(rebatched, ro, nullptr, nullptr); }), Status::InvalidArgument);
  EXPECT_TRUE(same.get_weights() == before);  // nothing changed
  Dataset reshuffled = toy();
  reshuffled.shuffle(96, 10);
  EXPECT_EQ(test::status_of([&] { same.fit(reshuffled, ro, nullptr, nullptr); }), Status::InvalidArgument);
  m.save(dir / "model.kx");
  ro.resume_from = dir / "model.kx";  // a model file has no training position
  EXPECT_EQ(test::status_of([&] { same.fit(d, ro, nullptr, nullptr); }), Status::InvalidArgument);
  ro.resume_from = dir / "nothing-here";  // nothing to resume from: a fresh start
  EXPECT_EQ(same.fit(d, ro, nullptr, nullptr), Status::Ok);
}

TEST(Checkpoint, KeepLastKeepsTheNewestFiles) {
  TempDir dir;
  Dataset d = toy();
  Model m = toy_model();
  Callbacks cb;
  std::vector<std::string> saved;
  cb.add_model_checkpoint(dir / "k/ck-{epoch:02d}-{step}-{loss:.3f}.kx", 4, 2);
  cb.add([&](const Event& e) {
    if (e.kind == EventKind::CheckpointSaved) saved.push_back(e.path);
    return false;
  });
  fs::create_directories(dir.path / "k");
  write_bytes(dir / "k/notes.txt", "not a checkpoint");  // never touched
  FitOptions fo;
  fo.epochs = 2;
  ASSERT_EQ(m.fit(d, fo, &cb, nullptr), Status::Ok);
  ASSERT_EQ(saved.size(), 6u);  // steps 4, 8, ..., 24
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path / "k")) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  ASSERT_EQ(left.size(), 3u);
  EXPECT_EQ(left[2], "notes.txt");
  EXPECT_EQ(dir / ("k/" + left[0]), saved[4]);
  EXPECT_EQ(dir / ("k/" + left[1]), saved[5]);
  EXPECT_EQ(left[1].rfind("ck-02-24-", 0), 0u) << left[1];
}

TEST(Checkpoint, PathTemplatesFormatAndMatchLikeKeras) {
  core::PathTemplate t("run/ck-{epoch:02d}-{step:05d}-{loss:.2f}-{val_loss:.1e}.kx");
  EXPECT_EQ(t.format({3, 120, 0.12345, 0.5}), "run/ck-03-00120-0.12-5.0e-01.kx");
  EXPECT_TRUE(t.matches_file_name("ck-03-00120-0.12-5.0e-01.kx"));
  EXPECT_FALSE(t.matches_file_name("ck-03-00120-0.12-5.0e-01.kx.tmp"));
  EXPECT_FALSE(t.matches_file_name("other.kx"));
  EXPECT_EQ(core::PathTemplate("c-{epoch}.kx").format({12, 0, 0, 0}), "c-12.kx");
  for (const char* bad : {"c-{epoch:02f}.kx", "c-{loss:d}.kx", "c-{step:.3}.kx", "c-{x}.kx", "c-{epoch", "c-}.kx", "",
                          "dir/", "c-{epoch:0999d}.kx"})
    EXPECT_EQ(test::status_of([&] { core::PathTemplate p(bad); }), Status::InvalidArgument) << bad;
}

TEST(Checkpoint, AnIndependentPythonReaderReadsTheFile) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with numpy missing (Debian: python3-numpy)";
  TempDir dir;
  Dataset d = toy();
  Model m = toy_model(2);
  Callbacks cb;
  cb.add_model_checkpoint(dir / "c.kx", 5, 0);
  FitOptions fo;
  fo.steps_per_epoch = 7;
  ASSERT_EQ(m.fit(d, fo, &cb, nullptr), Status::Ok);
  const std::string out = dir / "out.txt";
  const std::string cmd = "/usr/bin/python3 " KX_TEST_TOOLS "/read_safetensors.py " + (dir / "c.kx") + " > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::map<std::string, std::string> lines;
  std::istringstream in(read_bytes(out));
  for (std::string kind, key, rest; in >> kind >> key && std::getline(in, rest);) lines[kind + " " + key] = rest;
  // The checkpoint holds the weights of step 5; compare the file's sums with the model's at that step.
  Model at5 = toy_model(2);
  FitOptions five;
  five.steps_per_epoch = 5;
  ASSERT_EQ(at5.fit(d, five, nullptr, nullptr), Status::Ok);
  const std::vector<float> w = at5.get_weights();
  double kernel_sum = 0;
  for (size_t i = 0; i < 6 * 16; ++i) kernel_sum += w[i];
  ASSERT_TRUE(lines.count("tensor dense/kernel"));
  double file_sum = 0;
  std::string shape;
  std::istringstream(lines["tensor dense/kernel"]) >> shape >> file_sum;
  EXPECT_EQ(shape, "6x16");
  EXPECT_NEAR(file_sum, kernel_sum, 1e-6 * (1 + std::fabs(kernel_sum)));
  EXPECT_TRUE(lines.count("tensor optimizer/m/dense_1/bias"));
  EXPECT_TRUE(lines.count("tensor optimizer/v/dense/kernel"));
  EXPECT_EQ(lines["meta layers"], " 4");  // InputLayer, Dense, Dropout, Dense
  EXPECT_EQ(lines["meta optimizer_steps"], " 5");
  EXPECT_EQ(lines["meta step_in_epoch"], " 5");
  EXPECT_EQ(lines["meta replicas"], " 2");
}

TEST(Callbacks, EarlyStoppingStopsAndRestoresTheBestWeights) {
  Dataset d = toy();
  Dataset val = toy(48, 8);
  Model m = toy_model();
  Callbacks cb;
  // min_delta so large that no epoch after the first counts as an improvement.
  cb.add_early_stopping("val_loss", 2, 100.0, true);
  std::vector<std::vector<float>> weights;
  cb.add([&](const Event& e) {
    if (e.kind == EventKind::EpochEnd) weights.push_back(m.get_weights());
    return false;
  });
  FitOptions fo;
  fo.epochs = 10;
  fo.validation = &val;
  History h;
  EXPECT_EQ(m.fit(d, fo, &cb, &h), Status::Stopped);
  EXPECT_EQ(h.num_epochs(), 3);  // epoch 1 is the best; 2 and 3 do not improve; patience 2
  ASSERT_EQ(weights.size(), 3u);
  EXPECT_TRUE(m.get_weights() == weights[0]);

  Model no_val = toy_model();
  Callbacks watch_val;
  watch_val.add_early_stopping("val_accuracy", 1, 0, false);
  EXPECT_EQ(test::status_of([&] { no_val.fit(d, FitOptions{}, &watch_val, nullptr); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { watch_val.add_early_stopping("val_acc", 1, 0, false); }), Status::InvalidArgument);
}

TEST(Callbacks, CsvLoggerWritesOneRowPerEpochAndAppends) {
  TempDir dir;
  Dataset d = toy();
  Dataset val = toy(48, 8);
  Model m = toy_model();
  Callbacks cb;
  cb.add_csv_logger(dir / "log.csv", true);
  FitOptions fo;
  fo.epochs = 2;
  fo.validation = &val;
  History h;
  ASSERT_EQ(m.fit(d, fo, &cb, &h), Status::Ok);
  ASSERT_EQ(m.fit(d, fo, &cb, &h), Status::Ok);
  std::istringstream in(read_bytes(dir / "log.csv"));
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], "epoch,accuracy,loss,val_accuracy,val_loss");
  EXPECT_EQ(rows[1].rfind("0,", 0), 0u);
  double acc = 0, loss = 0;
  ASSERT_EQ(std::sscanf(rows[2].c_str(), "1,%lf,%lf", &acc, &loss), 2);
  EXPECT_DOUBLE_EQ(loss, h.get("loss", 1));
}

TEST(Callbacks, TerminateOnNanFailsWithDivergedAndKeepsTheLastGoodCheckpoint) {
  TempDir dir;
  // Samples 0..15 are ordinary, 16..23 overflow the loss: the third batch diverges.
  std::vector<float> x = test::random_floats(24 * 6, 4);
  for (size_t i = 16 * 6; i < x.size(); ++i) x[i] = 3e38f;
  std::vector<float> y(24 * 3, 0.5f);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {24, 6}, y.data(), DType::F32, {24, 3});
  d.batch(8, false);
  Model m = Model::sequential(Strategy::default_strategy(), {6});
  m.add_dense(3);
  CompileOptions co;
  co.loss.kind = LossKind::MeanSquaredError;
  co.optimizer.kind = OptimizerKind::Sgd;
  m.compile(co);
  Callbacks cb;
  cb.add_model_checkpoint(dir / "c-{step}.kx", 1, 0);
  cb.add_terminate_on_nan();
  try {
    m.fit(d, FitOptions{}, &cb, nullptr);
    ADD_FAILURE() << "no divergence";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Diverged);
  }
  EXPECT_TRUE(fs::exists(dir / "c-2.kx"));
  EXPECT_FALSE(fs::exists(dir / "c-3.kx"));
  const Model good = Model::load(Strategy::default_strategy(), dir / "c-2.kx");
  for (float w : good.get_weights()) EXPECT_TRUE(std::isfinite(w));
}

TEST(Callbacks, LearningRateSchedulesChangeTheSteps) {
  Dataset d = toy();
  // Cosine decay to 0 over the first epoch: the second epoch changes nothing.
  Model cosine = toy_model();
  Callbacks c1;
  c1.add_cosine_decay({12, 0.0});
  std::vector<float> after_first;
  c1.add([&](const Event& e) {
    if (e.kind == EventKind::EpochEnd && e.epoch == 0) after_first = cosine.get_weights();
    return false;
  });
  FitOptions fo;
  fo.epochs = 2;
  ASSERT_EQ(cosine.fit(d, fo, &c1, nullptr), Status::Ok);
  EXPECT_TRUE(cosine.get_weights() == after_first);
  // alpha 1 keeps the rate: the same weights as without a schedule.
  Model flat = toy_model(), plain = toy_model();
  Callbacks c2;
  c2.add_cosine_decay({12, 1.0});
  ASSERT_EQ(flat.fit(d, fo, &c2, nullptr), Status::Ok);
  ASSERT_EQ(plain.fit(d, fo, nullptr, nullptr), Status::Ok);
  EXPECT_TRUE(flat.get_weights() == plain.get_weights());
  // Step decay by 1e-9 after the first epoch: the second epoch barely moves the weights.
  Model step = toy_model(1, 16, OptimizerKind::Sgd, 0.0);
  Callbacks c3;
  c3.add_step_decay({1e-9, 1});
  c3.add([&](const Event& e) {
    if (e.kind == EventKind::EpochEnd && e.epoch == 0) after_first = step.get_weights();
    return false;
  });
  ASSERT_EQ(step.fit(d, fo, &c3, nullptr), Status::Ok);
  EXPECT_LE(test::relative_difference(step.get_weights(), after_first), 1e-7);
  Model undecayed = toy_model(1, 16, OptimizerKind::Sgd, 0.0);
  Callbacks c4;
  c4.add([&](const Event& e) {
    if (e.kind == EventKind::EpochEnd && e.epoch == 0) after_first = undecayed.get_weights();
    return false;
  });
  ASSERT_EQ(undecayed.fit(d, fo, &c4, nullptr), Status::Ok);
  EXPECT_GT(test::relative_difference(undecayed.get_weights(), after_first), 1e-3);
}

// A BatchNormalization model trained a few steps with Adam (slots m and v).
Model batch_norm_model() {
  Model m = Model::sequential(Strategy::mirrored({"cpu"}), {6});
  m.add_dense(8, Activation::Relu);
  LayerSpec bn;
  bn.kind = LayerKind::BatchNormalization;
  m.add(bn);
  m.add_dense(3, Activation::Softmax);
  CompileOptions co;
  co.optimizer.use_ema = true;
  m.compile(co);
  return m;
}

TEST(Checkpoint, MovingStatisticsHaveNoOptimizerSlotsAndOldFilesWithThemStillLoad) {
  TempDir dir;
  Dataset d = toy();
  Model m = batch_norm_model();
  FitOptions fo;
  fo.steps_per_epoch = 4;
  ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  m.save(dir / "new.kx");
  const io::SafetensorsFile f = io::SafetensorsFile::decode(read_bytes(dir / "new.kx"), "new.kx");
  for (const char* prefix : {"optimizer/m/", "optimizer/v/", "optimizer/ema/"}) {
    EXPECT_TRUE(f.find(std::string(prefix) + "batch_normalization/gamma")) << prefix;
    EXPECT_TRUE(f.find(std::string(prefix) + "dense/kernel")) << prefix;
    EXPECT_FALSE(f.find(std::string(prefix) + "batch_normalization/moving_mean")) << prefix;
    EXPECT_FALSE(f.find(std::string(prefix) + "batch_normalization/moving_variance")) << prefix;
  }
  // kx 0.1 wrote zero slots for the moving statistics too: such a file loads to the same model.
  std::vector<std::vector<float>> values;
  std::vector<io::TensorToWrite> tensors;
  values.reserve(f.tensors().size() + 6);
  for (const io::TensorEntry& e : f.tensors()) {
    values.emplace_back(static_cast<size_t>(num_elements(e.shape)));
    f.read(e, values.back().data());
    tensors.push_back({e.name, e.shape, values.back().data()});
  }
  for (const char* prefix : {"optimizer/m/", "optimizer/v/", "optimizer/ema/"})
    for (const char* stat : {"moving_mean", "moving_variance"}) {
      values.emplace_back(8, 0.0f);
      tensors.push_back({std::string(prefix) + "batch_normalization/" + stat, {8}, values.back().data()});
    }
  io::Metadata meta = f.metadata();
  io::write_file_durably(dir / "old.kx", io::encode_safetensors(tensors, meta));
  Model old = Model::load(Strategy::mirrored({"cpu"}), dir / "old.kx");
  EXPECT_EQ(old.get_weights(), m.get_weights());
  // And both continue alike: the slots that matter were restored.
  Model fresh = Model::load(Strategy::mirrored({"cpu"}), dir / "new.kx");
  ASSERT_EQ(old.fit(d, fo, nullptr, nullptr), Status::Ok);
  ASSERT_EQ(fresh.fit(d, fo, nullptr, nullptr), Status::Ok);
  ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  EXPECT_EQ(old.get_weights(), m.get_weights());
  EXPECT_EQ(fresh.get_weights(), m.get_weights());
}

}  // namespace
}  // namespace kx
