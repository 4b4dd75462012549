// kx's side of the peer comparison (bench/peers/compare.py): trains one workload on synthetic data and
// prints one JSON line with the same fields as bench/peers/peer_train.py, so the harness treats kx and
// each peer alike (it also takes each process's peak RSS from the kernel, as for the peers).
//
//   bench_workload --workload mlp|cnn|resnet50|mobilenetv2|efficientnetb0|transformer|lstm --batch B [--steps N]
//                  [--warmup W] [--threads T] [--gemm auto|builtin|blas]
//
// The workloads: the Fashion-MNIST MLP (784-256-256-10) and CNN of bench_common.hpp, ResNet50 at
// 64x64x3, MobileNetV2 (alpha 1.0) and EfficientNetB0 (its dropout and drop-connect included) at
// 96x96x3 with 10 classes, a 2-block transformer encoder on
// sequences [64, 32] (Dense 128 per step; per block MultiHeadAttention 4 heads of 32 + Add +
// LayerNormalization, Dense 256 relu + Dense 128 + Add + LayerNormalization; Flatten, Dense 10
// softmax), and LSTM(128) over 50 steps of 40 features then Dense(10, softmax); Adam (Keras's
// epsilon), sparse categorical cross-entropy, accuracy. The data are 32 batches of uniform [0, 1)
// inputs and labels 0..9 from a fixed seed, cycled.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kx/applications.hpp"
#include "kx/kx.hpp"
#include "kx/version.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

kx::Model build(const std::string& workload, const kx::Strategy& s, kx::Shape& sample) {
  if (workload == "mlp") {
    sample = {784};
    return kx::bench::fashion_mlp(s);
  }
  if (workload == "cnn") {
    sample = {28, 28, 1};
    return kx::bench::fashion_cnn(s);
  }
  if (workload == "resnet50") {
    sample = {64, 64, 3};
    kx::Model m = kx::applications::resnet50(s, sample, true, 10);
    kx::CompileOptions co;
    co.accuracy = true;
    m.compile(co);
    return m;
  }
  if (workload == "mobilenetv2") {
    kx::applications::MobileNetV2Options o;
    o.input_shape = sample = {96, 96, 3};
    o.classes = 10;
    kx::Model m = kx::applications::mobilenet_v2(s, o);
    kx::CompileOptions co;
    co.accuracy = true;
    m.compile(co);
    return m;
  }
  if (workload == "efficientnetb0") {
    kx::applications::EfficientNetOptions o;
    o.input_shape = sample = {96, 96, 3};
    o.classes = 10;
    kx::Model m = kx::applications::efficientnet_b0(s, o);
    kx::CompileOptions co;
    co.accuracy = true;
    m.compile(co);
    return m;
  }
  if (workload == "lstm") {
    sample = {50, 40};
    kx::Model m = kx::Model::sequential(s, sample);
    m.add_layer(R"({"class_name": "LSTM", "config": {"units": 128}})");
    m.add_layer(R"({"class_name": "Dense", "config": {"units": 10, "activation": "softmax"}})");
    kx::CompileOptions co;
    co.accuracy = true;
    m.compile(co);
    return m;
  }
  if (workload == "transformer") {
    sample = {64, 32};
    kx::Model m = kx::Model::functional(s, sample, "input_layer");
    std::string x = m.add_layer(R"({"class_name": "Dense", "config": {"units": 128}})", {"input_layer"});
    for (int block = 0; block < 2; ++block) {
      const std::string a =
          m.add_layer(R"({"class_name": "MultiHeadAttention", "config": {"num_heads": 4, "key_dim": 32}})", {x, x});
      x = m.add_layer(R"({"class_name": "LayerNormalization", "config": {"epsilon": 1e-6}})",
                      {m.add_layer(R"({"class_name": "Add", "config": {}})", {x, a})});
      const std::string f = m.add_layer(
          R"({"class_name": "Dense", "config": {"units": 128}})",
          {m.add_layer(R"({"class_name": "Dense", "config": {"units": 256, "activation": "relu"}})", {x})});
      x = m.add_layer(R"({"class_name": "LayerNormalization", "config": {"epsilon": 1e-6}})",
                      {m.add_layer(R"({"class_name": "Add", "config": {}})", {x, f})});
    }
    m.add_layer(R"({"class_name": "Dense", "config": {"units": 10, "activation": "softmax"}})",
                {m.add_layer(R"({"class_name": "Flatten", "config": {}})", {x})});
    kx::CompileOptions co;
    co.accuracy = true;
    m.compile(co);
    return m;
  }
  throw kx::Error(kx::Status::InvalidArgument,
                  "unknown workload " + workload + " (mlp, cnn, resnet50, mobilenetv2, efficientnetb0, transformer, lstm)");
}

}  // namespace

int main(int argc, char** argv) {
  std::string workload = "mlp";
  int64_t batch = 32, steps = 100, warmup = 20;
  int threads = 2;
  kx::CpuGemm gemm = kx::CpuGemm::Auto;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--workload") workload = v;
    else if (a == "--batch") batch = std::atoll(v.c_str());
    else if (a == "--steps") steps = std::atoll(v.c_str());
    else if (a == "--warmup") warmup = std::atoll(v.c_str());
    else if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--gemm" && (v == "auto" || v == "builtin" || v == "blas"))
      gemm = v == "auto" ? kx::CpuGemm::Auto : v == "builtin" ? kx::CpuGemm::Builtin : kx::CpuGemm::Blas;
    else {
      std::fprintf(stderr,
                   "usage: %s --workload mlp|cnn|resnet50|mobilenetv2|efficientnetb0|transformer|lstm --batch B [--steps N] [--warmup W] "
                   "[--threads T] [--gemm auto|builtin|blas]\n",
                   argv[0]);
      return 2;
    }
  }
  if (batch < 1 || steps < 1 || warmup < 1 || threads < 1) {
    std::fprintf(stderr, "batch, steps, warmup and threads must be positive\n");
    return 2;
  }
  try {
    kx::Strategy s = kx::Strategy::default_strategy();
    s.set_num_threads(threads);
    s.set_cpu_gemm(gemm);
    kx::Shape sample;
    kx::Model model = build(workload, s, sample);
    int64_t per_sample = 1;
    for (int64_t d : sample) per_sample *= d;
    const int64_t samples = 32 * batch;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(samples * per_sample)), y(static_cast<size_t>(samples));
    for (float& v : x) v = uniform(rng);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(rng() % 10);
    kx::Shape x_shape{samples};
    x_shape.insert(x_shape.end(), sample.begin(), sample.end());
    kx::Dataset train = kx::Dataset::from_arrays(x.data(), kx::DType::F32, x_shape, y.data(), kx::DType::F32, {samples});
    train.batch(batch, true);

    kx::FitOptions one;
    one.steps_per_epoch = 1;
    const auto first = Clock::now();
    model.fit(train, one, nullptr, nullptr);
    const double first_ms = ms_since(first);
    const double ms = kx::bench::ms_per_step(model, train, steps, warmup - 1 > 0 ? warmup - 1 : 1);
    std::printf("{\"framework\": \"kx\", \"config\": \"default\", \"version\": \"%s\", \"workload\": \"%s\", "
                "\"batch\": %lld, \"threads\": %d, \"first_step_ms\": %.3f, \"ms_per_step\": %.4f, "
                "\"peak_rss_mb\": %.1f}\n",
                KX_VERSION_STRING, workload.c_str(), static_cast<long long>(batch), threads, first_ms, ms, peak_rss_mb());
    return 0;
  } catch (const kx::Error& e) {
    std::fprintf(stderr, "bench_workload: %s\n", e.what());
    return 1;
  }
}
