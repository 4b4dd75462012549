// LSTM, GRU and Bidirectional (keras.layers.*): forward against a float64 run of Keras 3's cell
// formulas and backward (through time) against its finite differences, with and without a sequence
// mask, returning sequences or the last step, going backwards; Keras's configs both ways, what kx
// refuses, and two CPU replicas training as one.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/rounding_math.hpp"
#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "kx/error.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

struct Rnn {
  bool gru = false;
  int64_t steps = 4, features = 2, units = 3;
  bool sequences = false, backwards = false, zero_masked = false, bias = true;
  const char* activation = "tanh";
};

double act(const std::string& a, double x) {
  if (a == "tanh") return std::tanh(x);
  if (a == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (a == "relu") return x > 0 ? x : 0.0;
  return x;
}

size_t n_params(const Rnn& c) {
  const int64_t g = (c.gru ? 3 : 4) * c.units;
  return static_cast<size_t>((c.features + c.units) * g + (c.bias ? (c.gru ? 2 * g : g) : 0));
}

// Keras 3's run of one direction over row r: the output of each step processed, in that order. With
// recurrent_dropout (Keras's implementation 1), gate j reads x times xmask [rows, gates, features] (when
// not empty) and h_{t-1} times hmask [rows, gates, units] (when not empty).
std::vector<Vec> run(const Rnn& c, int64_t r, const Vec& x, const Vec& w, size_t w0, const std::vector<float>& mask,
                     const Vec& xmask = {}, const Vec& hmask = {}) {
  const int64_t T = c.steps, F = c.features, U = c.units, G = (c.gru ? 3 : 4) * U;
  const double* K = w.data() + w0;
  const double* R = K + F * G;
  const double* b = c.bias ? R + U * G : nullptr;
  Vec h(static_cast<size_t>(U), 0.0), cs(static_cast<size_t>(U), 0.0);
  std::vector<Vec> outs;
  for (int64_t k = 0; k < T; ++k) {
    const int64_t t = c.backwards ? T - 1 - k : k;
    Vec xz(static_cast<size_t>(G), 0.0), hr(static_cast<size_t>(G), 0.0);
    for (int64_t j = 0; j < G; ++j) {
      const int64_t gate = r * (G / U) + j / U;
      const auto xm = [&](int64_t f) { return xmask.empty() ? 1.0 : xmask[static_cast<size_t>(gate * F + f)]; };
      const auto hm = [&](int64_t i) { return hmask.empty() ? 1.0 : hmask[static_cast<size_t>(gate * U + i)]; };
      double s = b ? b[j] : 0.0;
      for (int64_t f = 0; f < F; ++f) s += x[static_cast<size_t>((r * T + t) * F + f)] * xm(f) * K[f * G + j];
      double q = c.gru && b ? b[G + j] : 0.0;
      for (int64_t i = 0; i < U; ++i) q += h[static_cast<size_t>(i)] * hm(i) * R[i * G + j];
      xz[static_cast<size_t>(j)] = s;
      hr[static_cast<size_t>(j)] = q;
    }
    Vec hn(static_cast<size_t>(U)), cn(static_cast<size_t>(U));
    for (int64_t j = 0; j < U; ++j) {
      const auto at = [&](const Vec& v, int64_t gate) { return v[static_cast<size_t>(gate * U + j)]; };
      if (c.gru) {
        const double z = act("sigmoid", at(xz, 0) + at(hr, 0)), rg = act("sigmoid", at(xz, 1) + at(hr, 1));
        const double hh = act(c.activation, at(xz, 2) + rg * at(hr, 2));
        hn[static_cast<size_t>(j)] = z * h[static_cast<size_t>(j)] + (1 - z) * hh;
      } else {
        const double i = act("sigmoid", at(xz, 0) + at(hr, 0)), f = act("sigmoid", at(xz, 1) + at(hr, 1));
        const double g = act(c.activation, at(xz, 2) + at(hr, 2)), o = act("sigmoid", at(xz, 3) + at(hr, 3));
        cn[static_cast<size_t>(j)] = f * cs[static_cast<size_t>(j)] + i * g;
        hn[static_cast<size_t>(j)] = o * act(c.activation, cn[static_cast<size_t>(j)]);
      }
    }
    const bool kept = mask.empty() || mask[static_cast<size_t>(r * T + t)] != 0.0f;
    if (kept) {
      h = hn;
      cs = cn;
      outs.push_back(h);
    } else {
      outs.push_back(c.zero_masked ? Vec(static_cast<size_t>(U), 0.0) : h);
    }
  }
  return outs;
}

Vec reference(const Rnn& c, int64_t rows, const Vec& x, const Vec& w, const std::vector<float>& mask,
              const Vec& xmask = {}, const Vec& hmask = {}) {
  Vec y;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<Vec> outs = run(c, r, x, w, 0, mask, xmask, hmask);
    if (!c.sequences) {
      y.insert(y.end(), outs.back().begin(), outs.back().end());
      continue;
    }
    for (const Vec& o : outs) y.insert(y.end(), o.begin(), o.end());
  }
  return y;
}

// Bidirectional (concat): the forward run's output, then the backward run's, its steps turned back.
Vec bidirectional_reference(Rnn c, int64_t rows, const Vec& x, const Vec& w, const std::vector<float>& mask) {
  c.zero_masked = c.sequences;
  Rnn back = c;
  back.backwards = true;
  const size_t half = n_params(c);
  Vec y;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<Vec> f = run(c, r, x, w, 0, mask), b = run(back, r, x, w, half, mask);
    const int64_t T = c.steps;
    for (int64_t p = 0; p < (c.sequences ? T : 1); ++p) {
      const Vec& fo = c.sequences ? f[static_cast<size_t>(p)] : f.back();
      const Vec& bo = c.sequences ? b[static_cast<size_t>(T - 1 - p)] : b.back();
      y.insert(y.end(), fo.begin(), fo.end());
      y.insert(y.end(), bo.begin(), bo.end());
    }
  }
  return y;
}

std::string config_of(const Rnn& c) {
  return std::string(R"({"units": )") + std::to_string(c.units) + R"(, "return_sequences": )" +
         (c.sequences ? "true" : "false") + R"(, "go_backwards": )" + (c.backwards ? "true" : "false") +
         R"(, "use_bias": )" + (c.bias ? "true" : "false") + R"(, "activation": ")" + c.activation + "\"" +
         (c.zero_masked ? R"(, "zero_output_for_mask": true)" : "") + "}";
}

std::unique_ptr<core::Layer> layer_from(const std::string& class_name, const std::string& config) {
  return core::make_layer(
      core::layer_spec_from_json(json::parse(R"({"class_name": ")" + class_name + R"(", "config": )" + config + "}")));
}

// Row 0 unmasked, row 1 padded at the end, row 2 with holes (its first step masked).
std::vector<float> sample_mask(int64_t rows, int64_t steps) {
  std::vector<float> m(static_cast<size_t>(rows * steps), 1.0f);
  for (int64_t t = 0; t < steps; ++t) {
    if (rows > 1 && t >= steps / 2) m[static_cast<size_t>(steps + t)] = 0.0f;
    if (rows > 2 && t % 2 == 0) m[static_cast<size_t>(2 * steps + t)] = 0.0f;
  }
  return m;
}

std::vector<Rnn> cases(bool gru) {
  std::vector<Rnn> out;
  for (const bool sequences : {false, true})
    for (const bool backwards : {false, true}) {
      Rnn c;
      c.gru = gru;
      c.sequences = sequences;
      c.backwards = backwards;
      out.push_back(c);
    }
  Rnn plain;
  plain.gru = gru;
  plain.bias = false;
  plain.activation = "relu";
  plain.sequences = true;
  out.push_back(plain);
  Rnn zeroed;
  zeroed.gru = gru;
  zeroed.sequences = true;
  zeroed.zero_masked = true;
  out.push_back(zeroed);
  return out;
}

void check_cell(bool gru) {
  const int64_t rows = 3;
  for (const Rnn& c : cases(gru))
    for (const bool masked : {false, true}) {
      const std::string config = config_of(c);
      SCOPED_TRACE(config + (masked ? " masked" : ""));
      auto layer = layer_from(gru ? "GRU" : "LSTM", config);
      const Shape out = layer->build({c.steps, c.features});
      EXPECT_EQ(out, c.sequences ? Shape({c.steps, c.units}) : Shape({c.units}));
      EXPECT_EQ(layer->passes_mask(), c.sequences);
      const std::vector<float> mask = masked ? sample_mask(rows, c.steps) : std::vector<float>{};
      const std::vector<float> w = test::random_floats(n_params(c), 13, -0.8f, 0.8f);
      test::check_layer(
          *layer, {{c.steps, c.features}}, rows, w,
          [&](const std::vector<Vec>& x, const Vec& wd) { return reference(c, rows, x[0], wd, mask); }, 1e-4, true,
          mask);
    }
}

TEST(RecurrentLayers, LstmMatchesKerasFormulasAndFiniteDifferences) { check_cell(false); }
TEST(RecurrentLayers, GruMatchesKerasFormulasAndFiniteDifferences) { check_cell(true); }

TEST(RecurrentLayers, BidirectionalMatchesBothDirectionsAndFiniteDifferences) {
  const int64_t rows = 3;
  for (const bool gru : {false, true})
    for (const bool sequences : {false, true})
      for (const bool masked : {false, true}) {
        Rnn c;
        c.gru = gru;
        c.sequences = sequences;
        SCOPED_TRACE(std::string(gru ? "GRU" : "LSTM") + (sequences ? " sequences" : "") + (masked ? " masked" : ""));
        auto layer = layer_from("Bidirectional", std::string(R"({"layer": {"class_name": ")") +
                                                     (gru ? "GRU" : "LSTM") + R"(", "config": )" + config_of(c) + "}}");
        const Shape out = layer->build({c.steps, c.features});
        EXPECT_EQ(out, sequences ? Shape({c.steps, 2 * c.units}) : Shape({2 * c.units}));
        const std::vector<float> mask = masked ? sample_mask(rows, c.steps) : std::vector<float>{};
        const std::vector<float> w = test::random_floats(2 * n_params(c), 17, -0.8f, 0.8f);
        test::check_layer(
            *layer, {{c.steps, c.features}}, rows, w,
            [&](const std::vector<Vec>& x, const Vec& wd) { return bidirectional_reference(c, rows, x[0], wd, mask); },
            1e-4, true, mask);
      }
}

TEST(RecurrentLayers, WeightsAreNamedAndKeptAsKerasDoes) {
  auto lstm = layer_from("LSTM", R"({"name": "lstm", "units": 4})");
  lstm->build({5, 3});
  const std::vector<core::ParamSpec> p = lstm->params();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].name, "lstm_cell/kernel");
  EXPECT_EQ(p[0].shape, Shape({3, 16}));
  EXPECT_EQ(p[1].shape, Shape({4, 16}));
  EXPECT_EQ(p[2].keras_file_path, "cell/vars/2");
  // unit_forget_bias: the forget gate's bias starts at 1.
  EXPECT_EQ(p[2].values[4], 1.0f);
  EXPECT_EQ(p[2].values[3], 0.0f);
  auto gru = layer_from("GRU", R"({"name": "gru", "units": 2})");
  gru->build({5, 8});
  EXPECT_EQ(gru->params()[2].shape, Shape({2, 6}));  // reset_after: input and recurrent biases
  EXPECT_EQ(gru->params()[0].name, "gru_cell/kernel");
  auto bi = layer_from("Bidirectional", R"({"name": "bidirectional", "layer": {"class_name": "LSTM",
                                            "config": {"name": "lstm", "units": 4}}})");
  bi->build({5, 3});
  const std::vector<core::ParamSpec> b = bi->params();
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b[0].name, "forward_lstm/lstm_cell/kernel");
  EXPECT_EQ(b[3].name, "backward_lstm/lstm_cell/kernel");
  EXPECT_EQ(b[4].keras_file_path, "backward_layer/cell/vars/1");
}

TEST(RecurrentLayers, ReadsAndWritesKerasConfig) {
  for (const char* keras : {R"({"class_name": "LSTM", "config": {"name": "l", "units": 5, "return_sequences": true,
                                "activation": "relu", "recurrent_activation": "tanh", "go_backwards": true,
                                "use_bias": false, "dropout": 0.0, "return_state": false}})",
                            R"({"class_name": "GRU", "config": {"name": "g", "units": 2, "reset_after": true}})",
                            R"({"class_name": "Bidirectional", "config": {"name": "b", "merge_mode": "concat",
                                "layer": {"class_name": "GRU", "config": {"name": "gru", "units": 3,
                                "return_sequences": true}}}})"}) {
    SCOPED_TRACE(keras);
    auto layer = core::make_layer(core::layer_spec_from_json(json::parse(keras)));
    const Shape out = layer->build({4, 3});
    const json::Value written = layer->to_json();
    auto again = core::make_layer(core::layer_spec_from_json(written));
    EXPECT_EQ(again->build({4, 3}), out);
    EXPECT_EQ(again->to_json().dump(), written.dump());
    EXPECT_EQ(again->params().size(), layer->params().size());
  }
  auto lstm = layer_from("LSTM", R"({"units": 5, "activation": "relu", "go_backwards": true})");
  const json::Value config = lstm->to_json().at("config", "");
  EXPECT_EQ(config.at("activation", "").as_string(""), "relu");
  EXPECT_TRUE(config.at("go_backwards", "").as_bool(""));
  EXPECT_EQ(config.at("units", "").as_number(""), 5);
}

TEST(RecurrentLayers, RefusesWhatItCannotDoAndSaysSo) {
  const auto status = [](const std::string& cls, const std::string& config) {
    try {
      layer_from(cls, config);
    } catch (const Error& e) {
      return e.status();
    }
    return Status::Ok;
  };
  EXPECT_EQ(status("LSTM", R"({"units": 3, "return_state": true})"), Status::Unsupported);
  EXPECT_EQ(status("LSTM", R"({"units": 3, "dropout": 0.2})"), Status::Ok);
  EXPECT_EQ(status("LSTM", R"({"units": 3, "dropout": 1.0})"), Status::InvalidArgument);
  EXPECT_EQ(status("GRU", R"({"units": 3, "dropout": -0.1})"), Status::InvalidArgument);
  EXPECT_EQ(status("LSTM", R"({"units": 3, "dropout": 0.2, "recurrent_dropout": 0.2})"), Status::Ok);
  EXPECT_EQ(status("GRU", R"({"units": 3, "recurrent_dropout": 0.1})"), Status::Ok);
  EXPECT_EQ(status("GRU", R"({"units": 3, "recurrent_dropout": 1.0})"), Status::InvalidArgument);
  EXPECT_EQ(status("LSTM", R"({"units": 3, "recurrent_dropout": -0.5})"), Status::InvalidArgument);
  EXPECT_EQ(status("GRU", R"({"units": 3, "reset_after": false})"), Status::Unsupported);
  EXPECT_EQ(status("LSTM", R"({"units": 3, "stateful": true})"), Status::Unsupported);
  EXPECT_EQ(status("LSTM", R"({"units": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status("LSTM", R"({})"), Status::InvalidArgument);
  EXPECT_EQ(status("LSTM", R"({"units": 3, "activation": "softmax"})"), Status::Unsupported);
  // Activations the cell kernels do not compute are refused, not run as linear.
  EXPECT_EQ(status("LSTM", R"({"units": 3, "recurrent_activation": "hard_sigmoid"})"), Status::Unsupported);
  EXPECT_EQ(status("GRU", R"({"units": 3, "activation": "elu"})"), Status::Unsupported);
  EXPECT_EQ(status("GRU", R"({"units": 3, "activation": "relu", "recurrent_activation": "linear"})"), Status::Ok);
  EXPECT_EQ(status("Bidirectional", R"({"merge_mode": "sum", "layer": {"class_name": "LSTM", "config": {"units": 2}}})"),
            Status::Unsupported);
  EXPECT_EQ(status("Bidirectional", R"({"layer": {"class_name": "Dense", "config": {"units": 2}}})"),
            Status::Unsupported);
  auto lstm = layer_from("LSTM", R"({"units": 3})");
  EXPECT_THROW(lstm->build({5}), Error);
}

// A whole text model: Keras's summary rows and parameter count, and its JSON back to the same model.
TEST(RecurrentLayers, TextModelHasKerasSummaryAndJsonRoundTrip) {
  Model m = Model::sequential(Strategy::default_strategy(), {10});
  m.add_layer(R"({"class_name": "Embedding", "config": {"input_dim": 20, "output_dim": 8, "mask_zero": true}})");
  m.add_layer(R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "LSTM", "config": {"units": 6}}}})");
  m.add_layer(R"({"class_name": "Dense", "config": {"units": 3}})");
  m.compile(CompileOptions{});
  // Embedding 20 * 8, two LSTMs of (8 + 6 + 1) * 24, Dense 12 * 3 + 3 (Keras's count).
  EXPECT_EQ(m.num_params(), 160 + 2 * 360 + 39);
  const std::string summary = m.summary();
  for (const char* row : {"embedding (Embedding)", "bidirectional (Bidirectional)", "(None, 10, 8)", "(None, 12)", "720"})
    EXPECT_NE(summary.find(row), std::string::npos) << row << " in\n" << summary;
  Model again = Model::from_json(Strategy::default_strategy(), m.to_json());
  EXPECT_EQ(again.to_json(), m.to_json());
  EXPECT_EQ(again.num_params(), m.num_params());
  std::vector<std::string> names;
  for (const WeightInfo& w : m.weights()) names.push_back(w.name);
  EXPECT_EQ(names[1], "bidirectional/forward_lstm/lstm_cell/kernel");
  EXPECT_EQ(names[6], "bidirectional/backward_lstm/lstm_cell/bias");
}

// Mixed precision: ids beyond bfloat16's integers (it holds 257 as 256) reach the Embedding as they
// are, every output is a value of the 16-bit type, near float32's, and training stays finite.
TEST(RecurrentLayers, MixedPrecisionKeepsIdsAndStoresTheType) {
  const auto model = [](Precision p) {
    Model m = Model::sequential(Strategy::default_strategy(), {6});
    m.add_layer(R"({"class_name": "Embedding", "config": {"input_dim": 1000, "output_dim": 5, "mask_zero": true}})");
    m.add_layer(R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "GRU", "config": {"units": 4}}}})");
    CompileOptions co;
    co.loss.kind = LossKind::MeanSquaredError;
    co.precision = p;
    co.seed = 4;
    m.compile(co);
    return m;
  };
  const std::vector<float> ids = {999, 257, 3, 0, 0, 0, 1, 998, 2, 513, 77, 0};
  Model f32 = model(Precision::Float32);
  const std::vector<float> want = f32.predict(ids.data(), 2);
  for (Precision p : {Precision::MixedBfloat16, Precision::MixedFloat16}) {
    SCOPED_TRACE(precision_name(p));
    Model mixed = model(p);
    const std::vector<float> got = mixed.predict(ids.data(), 2);
    ASSERT_EQ(got.size(), want.size());
    const backend::Rounding r = p == Precision::MixedBfloat16 ? backend::Rounding::BFloat16 : backend::Rounding::Float16;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], backend::round_value(got[i], r)) << i;
      EXPECT_NEAR(got[i], want[i], p == Precision::MixedBfloat16 ? 0.03 : 0.005) << i;
    }
    const std::vector<float> y(16, 0.5f);
    for (int step = 0; step < 3; ++step) mixed.train_on_batch(ids.data(), y.data(), 2);
    for (float w : mixed.get_weights()) ASSERT_TRUE(std::isfinite(w));
  }
}

// One training call of a recurrent layer on random inputs, weights and output gradient, as the
// dropout tests make it: the buffers, and a context set for training with a fixed step seed.
struct TrainingCall {
  TrainingCall(const core::Layer& layer, const Rnn& c, int64_t rows)
      : be(backend::make_cpu_backend(2)),
        nx(rows * c.steps * c.features),
        ny(rows * c.steps * c.units),
        x(test::to_buffer(test::random_floats(static_cast<size_t>(nx), 21))),
        w(test::to_buffer(test::random_floats(n_params(c), 13, -0.8f, 0.8f))),
        y(static_cast<size_t>(ny)),
        scratch(static_cast<size_t>(layer.scratch_floats(rows))),
        workspace(static_cast<size_t>(layer.workspace_floats_on(*be, rows))),
        dy(test::to_buffer(test::random_floats(static_cast<size_t>(ny), 22))),
        dx(static_cast<size_t>(nx)),
        dw(w.size()) {
    ctx.be = be.get();
    ctx.rows = rows;
    ctx.x = x.data();
    ctx.xs = &ctx.x;
    ctx.y = y.data();
    ctx.w = w.data();
    ctx.scratch = scratch.data();
    ctx.workspace = workspace.data();
    ctx.training = true;
    ctx.step_seed = &step_seed;
    ctx.seed_stream = 3;
  }
  TrainingCall(const TrainingCall&) = delete;  // the context points into the object
  TrainingCall& operator=(const TrainingCall&) = delete;

  // The backward pass after forward, into dx and dw.
  void backward(const core::Layer& layer) {
    ctx.dy = dy.data();
    ctx.dx = dx.data();
    dxs[0] = dx.data();
    ctx.dxs = dxs;
    ctx.dw = dw.data();
    layer.backward(ctx);
  }

  std::unique_ptr<backend::Backend> be;
  int64_t nx, ny;
  FloatBuffer x, w, y, scratch, workspace, dy, dx, dw;
  uint64_t step_seed = 5;
  float* dxs[1] = {};
  core::LayerContext ctx;
};

// Keras's input dropout of LSTM and GRU: in training one mask per sample and feature, the same at every
// step (read back from the input gradient, which is zero exactly where the mask is), kept values scaled
// by 1 / (1 - rate): the run then equals the float64 reference on x times that mask, forward and every
// gradient by finite differences. Rows a replica holds from row 24 on draw the masks the whole batch
// has there, and inference is the run without dropout.
TEST(RecurrentLayers, DropoutKeepsOneMaskPerSampleAndFeatureForEveryStep) {
  const double rate = 0.4;
  const int64_t rows = 48;
  for (const bool gru : {false, true}) {
    SCOPED_TRACE(gru ? "GRU" : "LSTM");
    Rnn c;
    c.gru = gru;
    c.steps = 5;
    c.features = 6;
    c.sequences = true;
    std::string config = config_of(c);
    config.insert(config.size() - 1, R"(, "dropout": 0.4)");
    auto layer = layer_from(gru ? "GRU" : "LSTM", config);
    layer->build({c.steps, c.features});
    EXPECT_NE(layer->to_json().dump().find(R"("dropout": 0.4)"), std::string::npos) << layer->to_json().dump();
    TrainingCall call(*layer, c, rows);
    FloatBuffer &x = call.x, &w = call.w, &y = call.y, &dy = call.dy, &dx = call.dx, &dw = call.dw;
    core::LayerContext& ctx = call.ctx;
    const int64_t nx = call.nx, ny = call.ny;
    layer->forward(ctx);
    call.backward(*layer);
    // The mask from dx: a feature of a sample is dropped at every step or at none.
    Vec mask(static_cast<size_t>(rows * c.features));
    int64_t dropped = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f < c.features; ++f) {
        const auto at = [&](int64_t t) { return dx[static_cast<size_t>((r * c.steps + t) * c.features + f)]; };
        const bool zero = at(0) == 0.0f;
        for (int64_t t = 1; t < c.steps; ++t) ASSERT_EQ(at(t) == 0.0f, zero) << "sample " << r << " feature " << f;
        mask[static_cast<size_t>(r * c.features + f)] = zero ? 0.0 : 1.0 / (1.0 - rate);
        dropped += zero;
      }
    // 288 draws: 5 standard deviations are 0.14.
    EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(rows * c.features), rate, 0.14);
    const auto masked = [&](const Vec& v) {
      Vec out(v);
      for (size_t k = 0; k < out.size(); ++k)
        out[k] *= mask[k / static_cast<size_t>(c.steps * c.features) * static_cast<size_t>(c.features) +
                       k % static_cast<size_t>(c.features)];
      return out;
    };
    const Vec xd = test::to_double(x.data(), x.size()), wd = test::to_double(w.data(), w.size());
    const Vec dyd = test::to_double(dy.data(), dy.size());
    const Vec want = reference(c, rows, masked(xd), wd, {});
    EXPECT_EQ(test::first_mismatch(y, want, want.size(), 1e-5), -1) << "forward";
    const Vec gx = test::numeric_gradient([&](const Vec& v) { return test::dot(dyd, reference(c, rows, masked(v), wd, {})); },
                                          Vec(xd.begin(), xd.end()));
    EXPECT_EQ(test::first_mismatch(dx, gx, gx.size(), 1e-4), -1) << "input gradient";
    const Vec gw = test::numeric_gradient([&](const Vec& v) { return test::dot(dyd, reference(c, rows, masked(xd), v, {})); }, wd);
    EXPECT_EQ(test::first_mismatch(dw, gw, gw.size(), 1e-4), -1) << "parameter gradient";
    // A replica with the rows from 24 on.
    FloatBuffer y_part(static_cast<size_t>(ny / 2));
    ctx.rows = rows / 2;
    ctx.first_row = rows / 2;
    ctx.x = x.data() + nx / 2;
    ctx.y = y_part.data();
    layer->forward(ctx);
    EXPECT_EQ(std::vector<float>(y_part.begin(), y_part.end()), std::vector<float>(y.begin() + ny / 2, y.end()));
    // Inference: no dropout.
    ctx.training = false;
    ctx.rows = rows;
    ctx.first_row = 0;
    ctx.x = x.data();
    ctx.y = y.data();
    layer->forward(ctx);
    const Vec plain = reference(c, rows, xd, wd, {});
    EXPECT_EQ(test::first_mismatch(y, plain, plain.size(), 1e-5), -1) << "inference";
  }
}

TEST(RecurrentLayers, TwoReplicasTrainAsOneWithDropout) {
  const std::vector<std::string> layers = {
      R"({"class_name": "LSTM", "config": {"units": 5, "return_sequences": true, "dropout": 0.3}})",
      R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "GRU", "config": {"units": 3, "dropout": 0.5}}}})",
      R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
  };
  const std::vector<float> one = test::weights_after_training({6, 4}, layers, 1);
  const std::vector<float> two = test::weights_after_training({6, 4}, layers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
  // And dropout changes the training (a rate of zero would train as kTrainedLayers-like layers do).
  std::vector<std::string> without = layers;
  without[0] = R"({"class_name": "LSTM", "config": {"units": 5, "return_sequences": true}})";
  without[1] = R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "GRU", "config": {"units": 3}}}})";
  EXPECT_GT(test::relative_difference(one, test::weights_after_training({6, 4}, without, 1)), 1e-4);
}

// Keras's recurrent_dropout (its cell's implementation 1): in training a mask per sample, gate and unit
// on h_{t-1} before the recurrent kernel, and with dropout a mask per sample, gate and feature on the
// inputs, each drawn once per call (the same at every step) with kept values 1 / (1 - rate). The masks
// are read from the end of the layer's scratch (the state's) and after its state (the inputs'); the run
// equals the float64 reference given those masks at every step, forward and every gradient by finite
// differences. Rows a replica holds from row 12 on draw what the whole batch draws there; inference is
// the run without dropout.
TEST(RecurrentLayers, RecurrentDropoutKeepsAMaskPerGateForEveryStep) {
  const double rate = 0.4, input_rate = 0.3;
  const int64_t rows = 24;
  for (const bool gru : {false, true})
    for (const bool inputs_too : {false, true}) {
      SCOPED_TRACE(std::string(gru ? "GRU" : "LSTM") + (inputs_too ? " with dropout" : ""));
      Rnn c;
      c.gru = gru;
      c.steps = 4;
      c.features = 3;
      c.sequences = true;
      std::string config = config_of(c);
      config.insert(config.size() - 1, std::string(R"(, "recurrent_dropout": 0.4)") + (inputs_too ? R"(, "dropout": 0.3)" : ""));
      auto layer = layer_from(gru ? "GRU" : "LSTM", config);
      layer->build({c.steps, c.features});
      EXPECT_NE(layer->to_json().dump().find(R"("recurrent_dropout": 0.4)"), std::string::npos);
      const int64_t gates = gru ? 3 : 4, g = gates * c.units;
      TrainingCall call(*layer, c, rows);
      FloatBuffer &x = call.x, &w = call.w, &y = call.y, &scratch = call.scratch, &dy = call.dy, &dx = call.dx,
                  &dw = call.dw;
      core::LayerContext& ctx = call.ctx;
      const int64_t nx = call.nx, ny = call.ny;
      layer->forward(ctx);
      // The masks as the layer kept them.
      const int64_t state = c.steps * (g + c.units + (gru ? g : c.units));
      const Vec hmask(scratch.end() - rows * gates * c.units, scratch.end());
      const Vec xmask = inputs_too ? Vec(scratch.begin() + rows * state, scratch.begin() + rows * (state + gates * c.features))
                                   : Vec{};
      for (const auto& [m, r] : {std::make_pair(&hmask, rate), std::make_pair(&xmask, input_rate)}) {
        if (m->empty()) continue;
        int64_t dropped = 0;
        for (double v : *m) {
          ASSERT_TRUE(v == 0.0 || std::abs(v - 1.0 / (1.0 - r)) < 1e-6) << v;
          dropped += v == 0.0;
        }
        // 288 or 216 draws: 5 standard deviations are at most 0.17.
        EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(m->size()), r, 0.17);
      }
      const Vec xd = test::to_double(x.data(), x.size()), wd = test::to_double(w.data(), w.size());
      const Vec dyd = test::to_double(dy.data(), dy.size());
      const Vec want = reference(c, rows, xd, wd, {}, xmask, hmask);
      EXPECT_EQ(test::first_mismatch(y, want, want.size(), 1e-5), -1) << "forward";
      // Without the masks the reference differs: the test can fail.
      EXPECT_EQ(test::first_mismatch(y, reference(c, rows, xd, wd, {}), want.size(), 1e-5) == -1, false);
      call.backward(*layer);
      const Vec gx = test::numeric_gradient(
          [&](const Vec& v) { return test::dot(dyd, reference(c, rows, v, wd, {}, xmask, hmask)); }, xd);
      EXPECT_EQ(test::first_mismatch(dx, gx, gx.size(), 1e-4), -1) << "input gradient";
      const Vec gw = test::numeric_gradient(
          [&](const Vec& v) { return test::dot(dyd, reference(c, rows, xd, v, {}, xmask, hmask)); }, wd);
      EXPECT_EQ(test::first_mismatch(dw, gw, gw.size(), 1e-4), -1) << "parameter gradient";
      // A replica with the rows from 12 on.
      FloatBuffer y_part(static_cast<size_t>(ny / 2)), scratch_part(static_cast<size_t>(layer->scratch_floats(rows / 2)));
      ctx.rows = rows / 2;
      ctx.first_row = rows / 2;
      ctx.x = x.data() + nx / 2;
      ctx.y = y_part.data();
      ctx.scratch = scratch_part.data();
      layer->forward(ctx);
      EXPECT_EQ(std::vector<float>(y_part.begin(), y_part.end()), std::vector<float>(y.begin() + ny / 2, y.end()));
      // Inference: no dropout.
      ctx.training = false;
      ctx.rows = rows;
      ctx.first_row = 0;
      ctx.x = x.data();
      ctx.y = y.data();
      ctx.scratch = scratch.data();
      layer->forward(ctx);
      const Vec plain = reference(c, rows, xd, wd, {});
      EXPECT_EQ(test::first_mismatch(y, plain, plain.size(), 1e-5), -1) << "inference";
    }
}

TEST(RecurrentLayers, TwoReplicasTrainAsOneWithRecurrentDropout) {
  const std::vector<std::string> layers = {
      R"({"class_name": "LSTM", "config": {"units": 5, "return_sequences": true, "dropout": 0.2, "recurrent_dropout": 0.3}})",
      R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "GRU", "config": {"units": 3, "recurrent_dropout": 0.5}}}})",
      R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
  };
  const std::vector<float> one = test::weights_after_training({6, 4}, layers, 1);
  const std::vector<float> two = test::weights_after_training({6, 4}, layers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
  std::vector<std::string> without = layers;
  without[0] = R"({"class_name": "LSTM", "config": {"units": 5, "return_sequences": true, "dropout": 0.2}})";
  without[1] = R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "GRU", "config": {"units": 3}}}})";
  EXPECT_GT(test::relative_difference(one, test::weights_after_training({6, 4}, without, 1)), 1e-4);
}

const std::vector<std::string> kTrainedLayers = {
    R"({"class_name": "LSTM", "config": {"units": 5, "return_sequences": true}})",
    R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "GRU", "config": {"units": 3}}}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

TEST(RecurrentLayers, TwoReplicasTrainAsOne) {
  const std::vector<float> one = test::weights_after_training({6, 4}, kTrainedLayers, 1);
  const std::vector<float> two = test::weights_after_training({6, 4}, kTrainedLayers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
