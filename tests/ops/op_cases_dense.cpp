// The cases of the dense kernels: GEMM, activations, the bias gradient, the loss and batch
// normalisation's statistics.
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "backend/pointwise_activation_math.hpp"
#include "backend/rounding_math.hpp"
#include "ops/op_case_setups.hpp"

namespace kx::test::ops {

using backend::Backend;
using backend::Epilogue;
using backend::Rounding;
using backend::Trans;

namespace {

// Every activation and every loss get a sub-case: a new one fails these until it is listed.
constexpr Activation kActivations[] = {
    Activation::None,    Activation::Relu, Activation::Sigmoid,  Activation::Tanh, Activation::Softmax,
    Activation::Relu6,   Activation::Silu, Activation::HardSilu, Activation::HardSigmoid, Activation::Gelu,
    Activation::GeluTanh, Activation::Elu, Activation::LeakyRelu, Activation::Softplus};
constexpr LossKind kLossKinds[] = {LossKind::SparseCategoricalCrossentropy, LossKind::CategoricalCrossentropy,
                                   LossKind::BinaryCrossentropy, LossKind::MeanSquaredError,
                                   LossKind::MeanAbsoluteError,  LossKind::Huber};
static_assert(static_cast<int>(std::size(kActivations)) == kActivationCount, "kActivations lists every Activation");
static_assert(static_cast<int>(std::size(kLossKinds)) == kLossKindCount, "kLossKinds lists every LossKind");

struct Shape {
  int64_t rows, cols;
  std::string text() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};

// C = op(A) op(B) (+ beta C) of fresh A and B, row-major with `pad` spare columns in every matrix.
// A product over 16-bit values gets them rounded (the caller's duty, backend.hpp's Epilogue).
struct Product {
  Trans ta, tb;
  int64_t M, N, K;
  float beta;
  int64_t pad = 0;
  Epilogue ep{};
};

OpCall gemm_call(OpIo& io, const std::string& name, Product p, Check check = {}) {
  const int64_t lda = (p.ta == Trans::No ? p.K : p.M) + p.pad, ldb = (p.tb == Trans::No ? p.N : p.K) + p.pad,
                ldc = p.N + p.pad;
  const auto operand = [&](int64_t rows, int64_t ld) {
    std::vector<float> v = io.random(count(rows * ld));
    for (float& x : v) x = backend::round_value(x, p.ep.rounding);
    return io.in(v);
  };
  const float* A = operand(p.ta == Trans::No ? p.M : p.K, lda);
  const float* B = operand(p.tb == Trans::No ? p.K : p.N, ldb);
  float* C = p.beta == 0 ? io.out(name, count(p.M * ldc), check) : io.inout(name, io.random(count(p.M * ldc)), check);
  return [=](Backend& be) { be.gemm(p.ta, p.tb, p.M, p.N, p.K, A, lda, B, ldb, p.beta, C, ldc, p.ep); };
}

// The losses of values against values (no logits, no probabilities).
bool regression(LossKind kind) {
  return kind == LossKind::MeanSquaredError || kind == LossKind::MeanAbsoluteError || kind == LossKind::Huber;
}

// Labels of a loss: class indices, one-hot rows, 0/1 targets or values, as the kind takes them.
std::vector<float> loss_targets(OpIo& io, LossKind kind, int64_t rows, int64_t cols) {
  if (regression(kind)) return io.random(count(rows * cols), -3.0f, 3.0f);  // Huber's both sides of delta
  if (kind == LossKind::SparseCategoricalCrossentropy) {
    std::vector<float> labels(count(rows));
    for (float& l : labels) l = static_cast<float>(io.random_index(cols));
    return labels;
  }
  std::vector<float> t(count(rows * cols));
  if (kind == LossKind::BinaryCrossentropy) {
    for (float& v : t) v = static_cast<float>(io.random_index(2));
  } else {
    for (int64_t r = 0; r < rows; ++r) t[count(r * cols + io.random_index(cols))] = 1.0f;
  }
  return t;
}

AccuracyKind accuracy_of(LossKind kind) {
  switch (kind) {
    case LossKind::SparseCategoricalCrossentropy: return AccuracyKind::SparseCategorical;
    case LossKind::BinaryCrossentropy: return AccuracyKind::Binary;
    default: return AccuracyKind::Categorical;
  }
}

// The moments of each column of x [rows, cols] in float64, rounded to float32: what training-mode
// batch normalisation hands its backward.
void column_moments_of(const std::vector<float>& x, int64_t rows, int64_t cols, std::vector<float>& mean,
                       std::vector<float>& var) {
  mean.assign(count(cols), 0.0f);
  var.assign(count(cols), 0.0f);
  for (int64_t c = 0; c < cols; ++c) {
    double m = 0, v = 0;
    for (int64_t r = 0; r < rows; ++r) m += x[count(r * cols + c)];
    m /= static_cast<double>(rows);
    for (int64_t r = 0; r < rows; ++r) v += std::pow(x[count(r * cols + c)] - m, 2);
    mean[count(c)] = static_cast<float>(m);
    var[count(c)] = static_cast<float>(v / static_cast<double>(rows));
  }
}

}  // namespace

// Every transpose pair, beta 0, 1/2 and 1, padded leading dimensions, the fused bias + ReLU and bias
// gradient epilogues, and the 16-bit products of mixed precision.
OpCall setup_gemm(OpIo& io) {
  std::vector<OpCall> calls;
  const float* bias = io.in(io.random(17));
  calls.push_back(
      gemm_call(io, "C = relu(A B + bias)", {Trans::No, Trans::No, 13, 17, 19, 0, 0, {bias, Activation::Relu}}));
  calls.push_back(gemm_call(io, "C = A^T B + C/2, padded", {Trans::Yes, Trans::No, 11, 7, 23, 0.5f, 3}));
  const float* bias14 = io.in(io.random(14));
  calls.push_back(gemm_call(io, "C = A B^T + bias, padded", {Trans::No, Trans::Yes, 9, 14, 10, 0, 2, {bias14}}));
  calls.push_back(gemm_call(io, "C = A^T B^T + C", {Trans::Yes, Trans::Yes, 6, 5, 8, 1.0f}));
  Epilogue with_bias_grad;
  with_bias_grad.bias_grad = io.out("bias gradient beside dW", 10);
  calls.push_back(gemm_call(io, "dW = X^T dY", {Trans::Yes, Trans::No, 12, 10, 30, 0, 0, with_bias_grad}));
  Epilogue bf16;
  bf16.bias = io.in(io.random(12));
  bf16.rounding = Rounding::BFloat16;
  // Products of 16-bit values are exact in float32; the sums round to the type: an ulp of it apart.
  calls.push_back(gemm_call(io, "C = A B + bias in bfloat16", {Trans::No, Trans::No, 10, 12, 40, 0, 0, bf16},
                            {.tolerance = 0x1p-7}));
  Epilogue fp16_partial;
  fp16_partial.rounding = Rounding::Float16;
  fp16_partial.keep_float32 = true;
  calls.push_back(
      gemm_call(io, "C = A B^T of float16, kept float32", {Trans::No, Trans::Yes, 7, 9, 33, 0, 0, fp16_partial}));
  return in_order(std::move(calls));
}

OpCall setup_activation_forward(OpIo& io) {
  const int64_t rows = 7, cols = 11;
  std::vector<OpCall> calls;
  for (Activation act : kActivations) {
    float* y = io.inout(std::string("y ") + activation_name(act), io.random(count(rows * cols), -4, 4),
                        {.written = act != Activation::None});
    calls.push_back([=](Backend& be) { be.activation_forward(act, rows, cols, y); });
  }
  return in_order(std::move(calls));
}

// Each activation whose gradient comes from its output into its own dz, and ReLU and softmax with dz over dy (allowed to alias).
OpCall setup_activation_backward(OpIo& io) {
  const int64_t rows = 6, cols = 9;
  const size_t n = count(rows * cols);
  std::vector<OpCall> calls;
  for (Activation act : kActivations) {
    if (backend::activation_grad_reads_input(act)) continue;  // pointwise_activation_backward's
    const bool probabilities = act == Activation::Sigmoid || act == Activation::Softmax;
    const float* y = io.in(io.random(n, probabilities ? 0.0f : -1.0f, 1.0f));
    const float* dy = io.in(io.random(n));
    float* dz = io.out(std::string("dz ") + activation_name(act), n);
    calls.push_back([=](Backend& be) { be.activation_backward(act, rows, cols, y, dy, dz); });
  }
  for (Activation act : {Activation::Relu, Activation::Softmax}) {
    const float* y = io.in(io.random(n, act == Activation::Softmax ? 0.0f : -1.0f, 1.0f));
    float* dz = io.inout(std::string("dz over dy ") + activation_name(act), io.random(n));
    calls.push_back([=](Backend& be) { be.activation_backward(act, rows, cols, y, dz, dz); });
  }
  return in_order(std::move(calls));
}

// Past 512 rows the CPU sums chunks of rows and then the chunks; from 32 columns on the GPU gives a
// thread to each column (column_map.cuh), and past 512 rows it sums chunks of rows (column_sums.cuh).
OpCall setup_bias_add(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Shape s : {Shape{3, 5}, Shape{600, 9}, Shape{300, 70}}) {
    const float* bias = io.in(io.random(count(s.cols)));
    float* y = io.inout("y " + s.text(), io.random(count(s.rows * s.cols)));
    calls.push_back([=](Backend& be) { be.bias_add(s.rows, s.cols, bias, y); });
  }
  return in_order(std::move(calls));
}

OpCall setup_bias_grad(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Shape s : {Shape{3, 5}, Shape{600, 9}, Shape{1000, 40}}) {
    const float* dz = io.in(io.random(count(s.rows * s.cols)));
    // The CPU sums each column in float32 over runs of rows, a GPU in double: over hundreds of rows
    // they differ by about sqrt(rows) float32 roundings of the partial sums, more than the case's 1e-5.
    const Check long_sum{.tolerance = s.rows > 100 ? 1e-4 : -1};
    float* db = io.out("db " + s.text(), count(s.cols), long_sum);
    calls.push_back([=](Backend& be) { be.bias_grad(s.rows, s.cols, dz, db); });
  }
  return in_order(std::move(calls));
}

// Every loss kind, from logits and from probabilities where it takes both, without and with sample
// weights (three positions per sample, some weights zero); one call without a gradient.
OpCall setup_loss(OpIo& io) {
  const int64_t rows = 12;
  std::vector<OpCall> calls;
  for (LossKind kind : kLossKinds)
    for (bool logits : {true, false})
      for (bool weighted : {false, true}) {
        if (regression(kind) && logits) continue;
        const int64_t cols = kind == LossKind::BinaryCrossentropy ? 3 : 5;
        const int64_t y_cols = kind == LossKind::SparseCategoricalCrossentropy ? 1 : cols;
        backend::LossSpec spec{kind, logits, accuracy_of(kind), weighted ? 3 : 1};
        const bool probabilities = !logits && !regression(kind);
        const float* out = io.in(probabilities ? io.random(count(rows * cols), 0.01f, 1.0f)
                                               : io.random(count(rows * cols), -3.0f, 3.0f));
        const float* y = io.in(loss_targets(io, kind, rows, cols));
        const float* weights = nullptr;
        if (weighted) {
          std::vector<float> w = io.random(count(rows / spec.positions), 0.0f, 2.0f);
          w[1] = 0.0f;  // a sample that does not count
          weights = io.in(w);
        }
        float* dout = io.out(std::string("dout ") + loss_name(kind) + (logits ? " logits" : "") +
                                 (weighted ? " weighted" : ""),
                             count(rows * cols));
        calls.push_back([=](Backend& be) { be.loss(spec, rows, cols, out, y, y_cols, weights, 1.0f / rows, dout); });
      }
  const int64_t cols = 4;
  const float* out = io.in(io.random(count(rows * cols), -3.0f, 3.0f));
  const float* y = io.in(loss_targets(io, LossKind::SparseCategoricalCrossentropy, rows, cols));
  const backend::LossSpec spec{LossKind::SparseCategoricalCrossentropy, true, AccuracyKind::SparseCategorical, 1};
  calls.push_back([=](Backend& be) { be.loss(spec, rows, cols, out, y, 1, nullptr, 1.0f, nullptr); });
  return in_order(std::move(calls));
}

OpCall setup_column_moments(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Shape s : {Shape{40, 6}, Shape{700, 3}, Shape{1000, 40}}) {
    const float* x = io.in(io.random(count(s.rows * s.cols), -2.0f, 3.0f));
    float* mean = io.out("mean " + s.text(), count(s.cols));
    float* var = io.out("var " + s.text(), count(s.cols));
    calls.push_back([=](Backend& be) { be.column_moments(s.rows, s.cols, x, mean, var); });
  }
  return in_order(std::move(calls));
}

// The activations a batch normalisation applies for the layer after it in Keras's mobile models, and one
// whose gradient is not a mask.
constexpr Activation kFusedActivations[] = {Activation::Relu, Activation::Relu6, Activation::Silu,
                                            Activation::HardSilu, Activation::Gelu};

// With gamma and beta, and with neither (1 and 0); narrow and wide (see setup_bias_add); then each
// activation it may apply.
OpCall setup_batch_norm_apply(OpIo& io) {
  std::vector<OpCall> calls;
  const auto add = [&](Shape s, bool affine, Activation act) {
    const int64_t rows = s.rows, cols = s.cols;
    const float* x = io.in(io.random(count(rows * cols), -2.0f, 2.0f));
    const float* mean = io.in(io.random(count(cols)));
    const float* var = io.in(io.random(count(cols), 0.1f, 2.0f));
    const float* gamma = affine ? io.in(io.random(count(cols), 0.5f, 1.5f)) : nullptr;
    const float* beta = affine ? io.in(io.random(count(cols))) : nullptr;
    const std::string name = std::string(affine ? "y " : "y without gamma and beta ") + activation_name(act) + " ";
    float* y = io.out(name + s.text(), count(rows * cols));
    calls.push_back([=](Backend& be) { be.batch_norm_apply(rows, cols, x, mean, var, 1e-3f, gamma, beta, act, y); });
  };
  for (const Shape s : {Shape{20, 5}, Shape{300, 40}})
    for (bool affine : {true, false}) add(s, affine, Activation::None);
  for (Activation act : kFusedActivations) add(Shape{300, 40}, true, act);
  return in_order(std::move(calls));
}

// Training mode (mean and var the moments of x): with dx, and without it (the gradient of gamma and beta
// alone); then through each activation it may apply (dy becomes the gradient at the activation's input).
OpCall setup_batch_norm_backward(OpIo& io) {
  std::vector<OpCall> calls;
  const auto add = [&](Shape s, bool with_dx, Activation act) {
    const int64_t rows = s.rows, cols = s.cols;
    const std::vector<float> xs = io.random(count(rows * cols), -2.0f, 2.0f);
    std::vector<float> mean_of_x, var_of_x;
    column_moments_of(xs, rows, cols, mean_of_x, var_of_x);
    const float* x = io.in(xs);
    const float* mean = io.in(mean_of_x);
    const float* var = io.in(var_of_x);
    const std::string which = (with_dx ? " " : " without dx ") + std::string(activation_name(act)) + " " + s.text();
    float* dy = act == Activation::None ? io.in(io.random(count(rows * cols)))
                                        : io.inout("dy" + which, io.random(count(rows * cols)));
    const float* gamma = io.in(io.random(count(cols), 0.5f, 1.5f));
    const float* beta = io.in(io.random(count(cols), -0.5f, 0.5f));
    float* dx = with_dx ? io.out("dx" + which, count(rows * cols)) : nullptr;
    float* dgamma = io.out("dgamma" + which, count(cols));
    float* dbeta = io.out("dbeta" + which, count(cols));
    calls.push_back([=](Backend& be) {
      be.batch_norm_backward(rows, cols, x, dy, mean, var, 1e-3f, gamma, beta, act, dx, dgamma, dbeta);
    });
  };
  for (const Shape s : {Shape{24, 4}, Shape{1000, 40}})
    for (bool with_dx : {true, false}) add(s, with_dx, Activation::None);
  for (Activation act : kFusedActivations) add(Shape{1000, 40}, true, act);
  return in_order(std::move(calls));
}

}  // namespace kx::test::ops
