// A Keras user's first day (issue 20): the summary of a functional model and rich's cell wrapping,
// ReduceLROnPlateau and LearningRateScheduler sequences, BackupAndRestore after an interrupted fit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "core/callbacks/progress_bar.hpp"
#include "core/model/summary_table.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

namespace fs = std::filesystem;

LayerSpec layer(LayerKind kind, const char* name = "") {
  LayerSpec s;
  s.kind = kind;
  s.name = name;
  return s;
}

// input (8, 8, 3) -> conv2d -> batch_normalization; add(conv2d, batch_normalization) -> global
// average pooling -> dense(2). At Keras's 76 characters the four columns are 21 / 19 / 12 / 19 wide
// with their padding (positions 0.3 / 0.56 / 0.74 / 1.0 of 76, plus 2 each, then rich's reduction of
// 13 = 3 + 3 + 4 + 3); cells wrap at spaces, and a word wider than its column ends in "…".
TEST(Summary, FunctionalModelAsKerasPrintsIt) {
  Model m = Model::functional(Strategy::default_strategy(), {8, 8, 3});
  LayerSpec conv = layer(LayerKind::Conv2D);
  conv.filters = 4;
  conv.kernel_h = conv.kernel_w = 3;
  conv.padding = Padding::Same;
  m.add(conv, {"input_layer"});
  m.add(layer(LayerKind::BatchNormalization), {"conv2d"});
  m.add(layer(LayerKind::Add), {"conv2d", "batch_normalization"});
  m.add(layer(LayerKind::GlobalAveragePooling2D), {"add"});
  LayerSpec dense = layer(LayerKind::Dense);
  dense.units = 2;
  m.add(dense, {"global_average_pooling2d"});
  const char* const want =
      "Model: \"functional\"\n"
      "┏━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┓\n"
      "┃ Layer (type)        ┃ Output Shape      ┃    Param # ┃ Connected to      ┃\n"
      "┡━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━┩\n"
      "│ input_layer         │ (None, 8, 8, 3)   │          0 │ -                 │\n"
      "│ (InputLayer)        │                   │            │                   │\n"
      "├─────────────────────┼───────────────────┼────────────┼───────────────────┤\n"
      "│ conv2d (Conv2D)     │ (None, 8, 8, 4)   │        112 │ input_layer[0][0] │\n"
      "├─────────────────────┼───────────────────┼────────────┼───────────────────┤\n"
      "│ batch_normalization │ (None, 8, 8, 4)   │         16 │ conv2d[0][0]      │\n"
      "│ (BatchNormalizatio… │                   │            │                   │\n"
      "├─────────────────────┼───────────────────┼────────────┼───────────────────┤\n"
      "│ add (Add)           │ (None, 8, 8, 4)   │          0 │ conv2d[0][0],     │\n"
      "│                     │                   │            │ batch_normalizat… │\n"
      "├─────────────────────┼───────────────────┼────────────┼───────────────────┤\n"
      "│ global_average_poo… │ (None, 4)         │          0 │ add[0][0]         │\n"
      "│ (GlobalAveragePool… │                   │            │                   │\n"
      "├─────────────────────┼───────────────────┼────────────┼───────────────────┤\n"
      "│ dense (Dense)       │ (None, 2)         │         10 │ global_average_p… │\n"
      "└─────────────────────┴───────────────────┴────────────┴───────────────────┘\n"
      " Total params: 138 (552.00 B)\n"
      " Trainable params: 130 (520.00 B)\n"
      " Non-trainable params: 8 (32.00 B)\n";
  EXPECT_EQ(m.summary(76), want);
  EXPECT_EQ(m.num_params(), 138);
}

TEST(Summary, CellsWrapAsRich) {
  // Keras's toy ResNet: "(None, 30, 30, 32)" in a column of 17.
  EXPECT_EQ(core::wrap_summary_cell("(None, 30, 30, 32)", 17, false),
            (std::vector<std::string>{"(None, 30, 30,   ", "32)              "}));
  EXPECT_EQ(core::wrap_summary_cell("1,290", 8, true), (std::vector<std::string>{"   1,290"}));
  EXPECT_EQ(core::wrap_summary_cell("abcdefghij", 4, false), (std::vector<std::string>{"abc…"}));
  EXPECT_EQ(core::with_thousands(1234567), "1,234,567");
  EXPECT_EQ(core::readable_memory_size(1024.0 * 1024 * 3.5), "3.50 MB");
  EXPECT_EQ(core::readable_memory_size(1023), "1023.00 B");
}

TEST(Summary, OptimizerParamsOnceTrained) {
  Model m = Model::sequential(Strategy::default_strategy(), {3});
  m.add_dense(2);
  m.compile(CompileOptions{});  // Adam
  EXPECT_EQ(m.summary().find("Optimizer params"), std::string::npos);
  const std::vector<float> x = test::random_floats(6, 1), y = {0, 1};
  m.train_on_batch(x.data(), y.data(), 2);
  // Adam's iteration (int64) and learning rate, then m and v for each of the 8 trained values.
  EXPECT_NE(m.summary().find(" Optimizer params: 18 (76.00 B)\n"), std::string::npos);
  EXPECT_NE(m.summary().find(" Total params: 26 (108.00 B)\n"), std::string::npos);
}

// A TrainingControl with a learning rate and nothing else, for callbacks fed scripted events.
class RateOnly final : public TrainingControl {
 public:
  explicit RateOnly(double lr) : lr_(lr) {}
  void save_checkpoint(const std::string&) override {}
  std::vector<float> get_weights() const override { return {}; }
  void set_weights(const std::vector<float>&) override {}
  double initial_learning_rate() const override { return 0.1; }
  double learning_rate() const override { return lr_; }
  void set_learning_rate(double lr) override { lr_ = lr; }
  bool has_validation() const override { return true; }
  bool has_accuracy() const override { return true; }
  std::vector<NamedTensor> named_weights() const override { return {}; }

 private:
  double lr_;
};

// Feeds val_loss (or val_accuracy) values epoch by epoch; returns the rate after each epoch's end.
std::vector<double> rates_after(const ReduceLrOnPlateau& r, const std::vector<double>& values, double lr0) {
  Callbacks cbs;
  cbs.add_reduce_lr_on_plateau(r);
  RateOnly control(lr0);
  Event begin;
  begin.kind = EventKind::TrainBegin;
  cbs.dispatch(begin, control);
  std::vector<double> rates;
  for (size_t i = 0; i < values.size(); ++i) {
    Event e;
    e.kind = EventKind::EpochEnd;
    e.epoch = static_cast<int32_t>(i);
    e.val_loss = e.val_accuracy = values[i];
    cbs.dispatch(e, control);
    rates.push_back(control.learning_rate());
  }
  return rates;
}

TEST(ReduceLrOnPlateau, FollowsKerasThroughPatienceCooldownAndMinLr) {
  ReduceLrOnPlateau r;
  r.factor = 0.5;
  r.patience = 2;
  r.cooldown = 1;
  r.min_delta = 0;
  r.min_lr = 0.02;
  // By hand, Keras's on_epoch_end: the rate is read as float32 (0.1f = 0.10000000149...) and halved
  // in double; min_lr bounds it; once at min_lr (float32 equal) nothing more changes.
  const double a = static_cast<double>(0.1f), b = static_cast<double>(static_cast<float>(a * 0.5)) * 0.5;
  const std::vector<double> loss = {1.0, 0.9, 0.95, 0.93, 0.92, 0.89, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95};
  const std::vector<double> want = {0.1, 0.1, 0.1,  a * 0.5, a * 0.5, a * 0.5, a * 0.5,
                                    b,   b,   0.02, 0.02,    0.02,    0.02};
  //  epoch 0, 1 improve; 2, 3 wait 1, 2 -> halve, cooldown 1; 4 cools down (wait reset, then 1);
  //  5 improves; 6, 7 wait -> halve; 8 cools down; 9 waits 2 -> max(b / 2, 0.02) = 0.02; then no change.
  EXPECT_EQ(rates_after(r, loss, 0.1), want);
}

TEST(ReduceLrOnPlateau, AutoModeMaximisesAccuracyAndMinDeltaCounts) {
  ReduceLrOnPlateau r;
  r.monitor = "val_accuracy";
  r.factor = 0.1;
  r.patience = 1;  // min_delta 1e-4 by default: 0.60005 is no improvement on 0.6
  const double a = static_cast<double>(0.01f) * 0.1;
  EXPECT_EQ(rates_after(r, {0.5, 0.6, 0.60005, 0.7}, 0.01),
            (std::vector<double>{0.01, 0.01, a, a}));
  r.mode = ReduceLrOnPlateau::Mode::Min;  // the same numbers read as a loss: only the first improves
  const std::vector<double> rates = rates_after(r, {0.5, 0.6, 0.60005, 0.7}, 0.01);
  EXPECT_EQ(rates[0], 0.01);
  EXPECT_EQ(rates[1], static_cast<double>(0.01f) * 0.1);
}

TEST(ReduceLrOnPlateau, RefusesWhatKerasRefuses) {
  Callbacks cbs;
  ReduceLrOnPlateau r;
  r.factor = 1.0;
  EXPECT_THROW(cbs.add_reduce_lr_on_plateau(r), Error);
  r.factor = 0.5;
  r.monitor = "val_los";
  EXPECT_THROW(cbs.add_reduce_lr_on_plateau(r), Error);
}

struct Toy {
  std::vector<float> x, y;
};

Toy toy(int64_t n, int64_t in) {
  Toy t{test::random_floats(static_cast<size_t>(n * in), 7), std::vector<float>(static_cast<size_t>(n))};
  for (int64_t i = 0; i < n; ++i) t.y[static_cast<size_t>(i)] = t.x[static_cast<size_t>(i * in)] > 0 ? 1.0f : 0.0f;
  return t;
}

Model small_model() {
  Model m = Model::sequential(Strategy::default_strategy(), {5});
  m.add_dense(8, Activation::Relu);
  m.add_dense(2, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  m.compile(co);
  return m;
}

TEST(LearningRateScheduler, SetsEachEpochsRateFromTheFunction) {
  const Toy t = toy(40, 5);
  Dataset d = Dataset::from_arrays(t.x.data(), DType::F32, {40, 5}, t.y.data(), DType::F32, {40});
  d.batch(10, false);
  Model m = small_model();
  Callbacks cbs;
  std::vector<double> seen;
  cbs.add_learning_rate_scheduler([&](int32_t epoch, double lr) {
    seen.push_back(lr);
    return epoch < 1 ? lr : lr * 0.5;
  });
  std::vector<double> rates;
  cbs.add([&](const Event& e) {
    if (e.kind == EventKind::EpochEnd) rates.push_back(e.learning_rate);
    return false;
  });
  History h;
  FitOptions fo;
  fo.epochs = 3;
  ASSERT_EQ(m.fit(d, fo, &cbs, &h), Status::Ok);
  const double lr0 = static_cast<float>(1e-3);
  EXPECT_EQ(seen, (std::vector<double>{lr0, lr0, static_cast<float>(lr0 * 0.5)}));
  EXPECT_EQ(rates, (std::vector<double>{lr0, lr0 * 0.5, static_cast<float>(lr0 * 0.5) * 0.5}));
  EXPECT_EQ(h.get("learning_rate", 2), static_cast<float>(static_cast<float>(lr0 * 0.5) * 0.5));
}

// BackupAndRestore: a fit interrupted by an error resumes, in a new fit with the same callback, from
// the last backup and ends bitwise where an uninterrupted fit ends; the backup is gone afterwards.
void interrupted_then_resumed(int64_t every_n_batches, EventKind fail_at, int64_t fail_when) {
  const Toy t = toy(50, 5);
  Dataset d = Dataset::from_arrays(t.x.data(), DType::F32, {50, 5}, t.y.data(), DType::F32, {50});
  d.shuffle(50, 3);
  d.batch(8, false);  // 7 steps per epoch, the last one partial
  FitOptions fo;
  fo.epochs = 4;
  Model straight = small_model();
  ASSERT_EQ(straight.fit(d, fo, nullptr, nullptr), Status::Ok);

  const fs::path dir = fs::temp_directory_path() / ("kx-backup-test-" + std::to_string(::getpid()) + "-" +
                                                    std::to_string(every_n_batches));
  fs::remove_all(dir);
  Model m = small_model();
  Callbacks first;
  first.add_backup_and_restore(dir.string(), every_n_batches);
  first.add([&](const Event& e) {
    const int64_t when = fail_at == EventKind::EpochBegin ? e.epoch : e.global_step;
    if (e.kind == fail_at && when == fail_when) throw Error(Status::Io, "the machine went away");
    return false;
  });
  EXPECT_THROW(m.fit(d, fo, &first, nullptr), Error);
  EXPECT_TRUE(fs::exists(dir));  // an error keeps the backup

  Callbacks second;
  second.add_backup_and_restore(dir.string(), every_n_batches);
  int64_t first_step = -1;
  second.add([&](const Event& e) {
    if (e.kind == EventKind::BatchEnd && first_step < 0) first_step = e.global_step;
    return false;
  });
  History h;
  ASSERT_EQ(m.fit(d, fo, &second, &h), Status::Ok);
  EXPECT_EQ(m.get_weights(), straight.get_weights());
  EXPECT_FALSE(fs::exists(dir));
  if (fail_at == EventKind::EpochBegin) {
    EXPECT_EQ(h.num_epochs(), 4 - fail_when);  // resumed at the epoch that failed to start
    EXPECT_EQ(first_step, fail_when * 7 + 1);
  } else {
    EXPECT_EQ(first_step, fail_when / every_n_batches * every_n_batches + 1);  // the batch after the backup
  }
}

TEST(BackupAndRestore, ResumesAtTheEpochAfterTheLastBackup) { interrupted_then_resumed(0, EventKind::EpochBegin, 2); }

TEST(BackupAndRestore, ResumesAtTheBatchAfterTheLastBackup) { interrupted_then_resumed(3, EventKind::BatchEnd, 17); }

TEST(BackupAndRestore, RefusesAnEmptyDirectory) {
  Callbacks cbs;
  EXPECT_THROW(cbs.add_backup_and_restore("", 0), Error);
  EXPECT_THROW(cbs.add_backup_and_restore("x", -1), Error);
}

// Keras 3's Progbar lines, from progbar.py's formats (the issue's sample: " 1563/1563
// ━━━━━━━━━━━━━━━━━━━━ 7s 4ms/step - loss: … - val_loss: …").
TEST(ProgressBar, LinesAsKeras3PrintsThem) {
  using core::ProgressBar;
  const std::string full = "━━━━━━━━━━━━━━━━━━━━";
  const core::Metrics m = {{"accuracy", 0.88841}, {"loss", 0.38304}, {"val_accuracy", 0.9574}, {"val_loss", 0.1361},
                           {"learning_rate", 1e-4}};
  // The end of an epoch: the time taken rounded (7.5 s is "8s"), 4 decimals, e-notation at 1e-3 and below.
  EXPECT_EQ(ProgressBar::format_line(1, false, 1563, 1563, 7.5, 0.0044, m),
            "1563/1563 " + full + " 8s 4ms/step - accuracy: 0.8884 - loss: 0.3830 - val_accuracy: 0.9574 - "
            "val_loss: 0.1361 - learning_rate: 1.0000e-04");
  // Python's {:.0f} rounds halves to even: 6.5 s is "6s", 0.5 ms/step "500us/step".
  EXPECT_EQ(ProgressBar::format_line(2, false, 60, 60, 6.5, 0.0005, {{"loss", 0.25}}),
            "60/60 - 6s - 500us/step - loss: 0.2500");
  // verbose 2 compares the value itself with 1e-3: a negative loss prints in e-notation there only.
  EXPECT_EQ(ProgressBar::format_line(2, false, 3, 3, 1, 1.5, {{"loss", -0.5}}), "3/3 - 1s - 2s/step - loss: -5.0000e-01");
  EXPECT_EQ(ProgressBar::format_line(1, false, 3, 3, 1, 1.5, {{"loss", -0.5}}),
            "3/3 " + full + " 1s 2s/step - loss: -0.5000");
  // While running: the count padded to the total's digits, the time left truncated, "m:ss", "h:mm:ss".
  EXPECT_EQ(ProgressBar::format_line(1, false, 7, 100, 1, 0.7, {}), "  7/100 ━" + std::string(19, ' ') + " 1:05 700ms/step");
  EXPECT_EQ(ProgressBar::format_line(1, false, 1, 10, 1, 500, {}), " 1/10 ━━" + std::string(18, ' ') + " 1:15:00 500s/step");
  EXPECT_EQ(ProgressBar::format_line(1, false, 1, 10, 1, 0.0059, {}), " 1/10 ━━" + std::string(18, ' ') + " 0s 6ms/step");
  // On a terminal, Keras's colours: bold count and time, green done, white to do.
  EXPECT_EQ(ProgressBar::format_line(1, true, 1, 2, 1, 1, {}),
            "\x1b[1m1/2\x1b[0m \x1b[32m━━━━━━━━━━\x1b[0m\x1b[37m━━━━━━━━━━\x1b[0m \x1b[1m1s\x1b[0m 1s/step");
}

// validation_split holds out the last int(floor(n * (1 - split))) .. n samples in storage order, as
// Keras 3's train_validation_split, shuffled or not: fit with it equals fit on take(split_at) with
// skip(split_at) as validation data. 0.56 of 25 is a case where float64 matters: Python's
// int(math.floor(25 * (1.0 - 0.56))) is 10 (the product is 10.999999999999998), not the exact 11.
TEST(ValidationSplit, HoldsOutTheLastSamplesAsKeras) {
  const double split = 0.56;
  const int64_t n = 25;
  const int64_t split_at = 10;
  const Toy t = toy(n, 5);
  Dataset all = Dataset::from_arrays(t.x.data(), DType::F32, {n, 5}, t.y.data(), DType::F32, {n});
  all.shuffle(n, 9);
  all.batch(16, false);
  Model a = small_model(), b = small_model();
  FitOptions fo;
  fo.epochs = 2;
  fo.validation_split = split;
  History ha, hb;
  ASSERT_EQ(a.fit(all, fo, nullptr, &ha), Status::Ok);
  Dataset first = all.take(split_at), last = all.skip(split_at);
  FitOptions explicit_split;
  explicit_split.epochs = 2;
  explicit_split.validation = &last;
  ASSERT_EQ(b.fit(first, explicit_split, nullptr, &hb), Status::Ok);
  EXPECT_EQ(a.get_weights(), b.get_weights());
  EXPECT_EQ(ha.get("val_loss", 1), hb.get("val_loss", 1));
  EXPECT_EQ(ha.get("val_accuracy", 1), b.evaluate(last).accuracy);
  // Either part empty: Keras's error.
  fo.validation_split = 1e-17;  // 1.0 - 1e-17 == 1.0: nothing held out
  EXPECT_THROW(a.fit(all, fo, nullptr, nullptr), Error);
  fo.validation_split = 0.99;  // floor(0.25): nothing to train on
  EXPECT_THROW(a.fit(all, fo, nullptr, nullptr), Error);
  fo.validation_split = 1.0;
  EXPECT_THROW(a.fit(all, fo, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace kx
