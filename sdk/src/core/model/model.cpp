// kx::Model: building, compiling, JSON and weights. Training lives in core/train/.
#include <algorithm>
#include <cmath>
#include <map>

#include "config/test_hooks.hpp"
#include "core/checked_size.hpp"
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer_registry.hpp"
#include "core/model/call_arguments.hpp"
#include "core/model/model_impl.hpp"
#include "backend/recording_backend.hpp"
#include "distribute/collective_factory.hpp"
#include "io/json.hpp"
#include "kx/error.hpp"
#include "kx/metric.hpp"
#include "kx/version.hpp"

namespace kx {

namespace {

constexpr uint64_t kDefaultSeed = 0x6b78'5f73'6565'6421ull;  // used when the caller gives seed 0

}  // namespace

Model::Impl::Impl(Strategy s, Shape input) : strategy(std::move(s)) {
  require(!input.empty(), Status::InvalidArgument, "input shape needs at least one dimension");
  for (int64_t d : input)
    require(d > 0, Status::InvalidArgument, "input dimensions must be positive, got " + to_string(input));
  core::checked_elements(input, "the input shape");
  distribute::require_supported_replicas(strategy.replicas());
  net.shapes.push_back(std::move(input));
  net.mask_source.push_back(-1);
}

// The members then go in reverse order: steps_ (and its collective), the pool, the replicas.
Model::Impl::~Impl() { release_step_graphs(); }

void Model::Impl::release_step_graphs() noexcept {
  for (Replica& r : replicas) r.graphs.clear();
}

std::string Model::Impl::add(LayerSpec spec, const std::vector<std::string>& inbound) {
  require(!compiled, Status::Misuse, "cannot add a layer to a compiled model");
  require_not_fitting("adding a layer");
  if (spec.name.empty()) {
    const std::string stem = core::layer_entry(spec.kind).name_stem;
    int n = 0;
    for (const auto& l : net.layers)
      if (l->spec().kind == spec.kind) ++n;
    spec.name = n == 0 ? stem : stem + "_" + std::to_string(n);
  }
  require(spec.name != net.input_name, Status::InvalidArgument, "duplicate layer name \"" + spec.name + "\" (the input's)");
  require(net.layer_index(spec.name) < 0, Status::InvalidArgument, "duplicate layer name \"" + spec.name + "\"");
  // The tensors read: the named layers' outputs, or the last layer's (a Sequential model).
  std::vector<int> inputs;
  for (const std::string& from : inbound) {
    const int layer = net.layer_index(from);
    const int t = from == net.input_name ? 0 : layer >= 0 ? layer + 1 : -1;
    require(t >= 0, Status::InvalidArgument,
            "layer \"" + spec.name + "\" reads \"" + from + "\", which is not the input or a layer added before it");
    inputs.push_back(t);
  }
  if (inputs.empty()) inputs.push_back(static_cast<int>(net.layers.size()));
  std::vector<Shape> in_shapes;
  for (int t : inputs) in_shapes.push_back(net.shapes[static_cast<size_t>(t)]);

  auto layer = core::make_layer(spec);
  Shape out = layer->build_inputs(in_shapes);
  std::vector<int> in_masks;
  for (int t : inputs) in_masks.push_back(net.mask_source[static_cast<size_t>(t)]);
  layer->take_input_masks(in_masks);
  const int out_tensor = static_cast<int>(net.layers.size()) + 1;
  const int out_mask = layer->computes_mask() ? out_tensor : layer->passes_mask() ? in_masks.front() : -1;
  core::checked_elements(out, "the output of layer \"" + spec.name + "\"");
  int64_t count = 0;
  for (const auto& p : layer->params()) count += core::checked_elements(p.shape, "a parameter of layer \"" + spec.name + "\"");
  require(net.num_params + count <= kMaxElements, Status::InvalidArgument,
          "layer \"" + spec.name + "\" makes the model larger than kx supports");
  net.param_offset.push_back(net.num_params);
  net.num_params += count;
  net.layers.push_back(std::move(layer));
  net.inputs.push_back(std::move(inputs));
  net.shapes.push_back(std::move(out));
  net.mask_source.push_back(out_mask);
  return spec.name;
}

core::Layer& Model::Impl::layer_named(const std::string& name) const {
  const int i = net.layer_index(name);
  require(i >= 0, Status::InvalidArgument, "the model has no layer \"" + name + "\"");
  return *net.layers[static_cast<size_t>(i)];
}

void Model::Impl::set_trainable(const std::string& layer, bool trainable) {
  core::Layer& l = layer_named(layer);
  if (l.trainable() == trainable) return;
  l.set_trainable(trainable);
  ++net.revision;  // step plans and optimizer spans are rebuilt before the next step
}

bool Model::Impl::trainable(const std::string& layer) const { return layer_named(layer).trainable(); }

int64_t Model::Impl::label_size() const {
  return loss_spec.kind == LossKind::SparseCategoricalCrossentropy ? loss_positions : net.output_size();
}

int64_t Model::Impl::output_classes() const {
  const Shape& out = net.shapes.back();
  return out.empty() ? 1 : out.back();
}

void Model::Impl::compile(const CompileOptions& o) {
  require(!compiled, Status::Misuse, "the model is already compiled");
  require(!net.layers.empty(), Status::Misuse, "the model has no layers to compile");
  net.require_connected();
  require(is_valid(o.loss.kind), Status::InvalidArgument, "unknown loss " + std::to_string(static_cast<int>(o.loss.kind)));
  OptimizerConfig resolved = o.optimizer.resolved();
  const int precision = static_cast<int>(o.precision);
  require(precision >= 0 && precision <= static_cast<int>(Precision::MixedFloat16), Status::InvalidArgument,
          "unknown precision " + std::to_string(precision));
  if (o.precision == Precision::MixedFloat16) {
    require(std::isfinite(o.initial_loss_scale) && o.initial_loss_scale >= 1 && o.initial_loss_scale <= 0x1p100,
            Status::InvalidArgument, "the initial loss scale must be in [1, 2^100]");
    require(o.loss_scale_growth_steps >= 1, Status::InvalidArgument, "the loss scale's growth steps must be positive");
  }

  const int64_t outputs = net.output_size(), classes = output_classes();
  const Activation last = net.layers.back()->output_activation();
  const LossKind lk = o.loss.kind;
  const bool sparse = lk == LossKind::SparseCategoricalCrossentropy;
  const bool categorical = sparse || lk == LossKind::CategoricalCrossentropy;
  require(!sparse || classes >= 2, Status::InvalidArgument,
          std::string(loss_name(lk)) + " needs at least 2 classes on the output's last axis, the model's output is " +
              to_string(net.shapes.back()));
  // Keras computes cross-entropy from the logits under a softmax/sigmoid output: fold it in.
  net.fold_output_activation = !o.loss.from_logits && ((categorical && last == Activation::Softmax) ||
                                                       (lk == LossKind::BinaryCrossentropy && last == Activation::Sigmoid));
  // Batch normalisation applies the activation after it (float32: mixed precision rounds between them),
  // a depthwise convolution the zero padding before it, and a convolution before a batch normalisation
  // sums its batch statistics as it writes them.
  net.fused_activation.clear();
  net.padding_absorbed.clear();
  net.moments_reader.clear();
  if (o.precision == Precision::Float32 && !config::test_hooks().no_layer_fusion) {
    net.fuse_activations();
    net.absorb_paddings();
    net.share_moments();
  }
  require(std::isfinite(o.loss.huber_delta) && o.loss.huber_delta > 0, Status::InvalidArgument,
          "Huber's delta must be positive and finite");
  loss_spec.kind = lk;
  loss_spec.huber_delta = static_cast<float>(o.loss.huber_delta);
  loss_spec.logits = o.loss.from_logits || net.fold_output_activation;
  loss_spec.accuracy = choose_accuracy(lk, classes, sparse ? 1 : classes);
  loss_positions = loss_spec.accuracy == AccuracyKind::Binary ? 1 : outputs / classes;
  loss_spec.positions = loss_positions;

  const int n = static_cast<int>(strategy.replicas().size());  // this process's
  replica_offset = strategy.worker_index() * n;
  total_replicas = strategy.num_replicas();
  // CPU replicas share the machine's cores between them.
  const int cores = strategy.num_threads() > 0 ? strategy.num_threads() : backend::cpu_core_count();
  const int threads = std::max(1, cores / n);
  const size_t bytes = static_cast<size_t>(net.num_params) * sizeof(float);
  const StepGraphs graphs = strategy.effective_step_graphs();
  std::vector<Replica> built(static_cast<size_t>(n));
  for (size_t k = 0; k < built.size(); ++k) {
    Replica& r = built[k];
    r.be = backend::make_backend(strategy.replicas()[k], {.cpu_threads = threads,
                                                          .cpu_gemm = strategy.cpu_gemm(),
                                                          .cpu_bf16_gemm = strategy.cpu_bf16_gemm(),
                                                          .tf32 = strategy.tf32(),
                                                          .cudnn = strategy.effective_cudnn()});
    if (graphs == StepGraphs::Emulate && r.be->host_accessible())
      r.be = backend::make_recording_backend(std::move(r.be));
    r.step_values = r.be->allocate(sizeof(backend::StepValues));  // written before each step
    r.params = r.be->allocate(bytes);
    r.grads = r.be->allocate(bytes);
    if (resolved.uses_slot_m()) r.slot_m = r.be->allocate(bytes);
    if (resolved.uses_slot_v()) r.slot_v = r.be->allocate(bytes);
    if (resolved.uses_slot_a()) r.slot_a = r.be->allocate(bytes);
    if (resolved.use_ema) r.slot_ema = r.be->allocate(bytes);
    if (o.precision != Precision::Float32) r.rounded_params = r.be->allocate(bytes);
    if (o.precision == Precision::MixedFloat16) r.loss_scale = r.be->allocate(sizeof(backend::LossScaleState));
  }
  if (n > 1) pool_ = std::make_unique<distribute::ReplicaPool>(n);
  // The strategy decides how the replicas' gradients are summed; the step runner only calls it.
  std::vector<backend::Backend*> backends;
  for (Replica& r : built) backends.push_back(r.be.get());
  std::unique_ptr<distribute::Collective> collective =
      distribute::collective_factory_of(strategy).make(strategy.replicas(), backends);
  const bool record = graphs != StepGraphs::Off && (!collective || collective->capturable());
  release_step_graphs();  // before the assignment below destroys the collective they may hold
  steps_ = core::StepRunner(std::move(collective), record);
  always_stream_ = strategy.effective_data_streaming() == DataStreaming::Always;
  replicas = std::move(built);
  options = o;
  optimizer = resolved;
  learning_rate = *resolved.learning_rate;
  if (initial_params.empty()) {
    init_weights(o.seed ? o.seed : kDefaultSeed);
  } else {
    set_params(initial_params.data());
    initial_params = {};
  }
  // The parameters of layers that autocast their weights, in runs as long as possible.
  autocast_spans.clear();
  for (size_t i = 0; i < net.layers.size(); ++i) {
    const int64_t first = net.param_offset[i];
    const int64_t count = (i + 1 < net.layers.size() ? net.param_offset[i + 1] : net.num_params) - first;
    if (count == 0 || !net.layers[i]->autocasts_weights()) continue;
    if (!autocast_spans.empty() && autocast_spans.back().first + autocast_spans.back().count == first)
      autocast_spans.back().count += count;
    else
      autocast_spans.push_back({first, count});
  }
  if (loss_scaling()) set_loss_scale(o.initial_loss_scale, 0);
  compiled = true;
}

void Model::Impl::set_params(const float* w) {
  for (Replica& r : replicas) r.be->to_device(w, r.params.bytes(), r.params.data());
}

std::vector<float> Model::Impl::host_slot(const backend::DeviceBuffer Replica::*slot) const {
  const Replica& r = replicas.front();
  const backend::DeviceBuffer& b = r.*slot;
  std::vector<float> host(static_cast<size_t>(b.floats()));
  r.be->to_host(b.data(), b.bytes(), host.data());
  return host;
}

std::vector<float> Model::Impl::host_params() const { return host_slot(&Replica::params); }

void Model::Impl::init_weights(uint64_t seed) {
  std::vector<float> weights(static_cast<size_t>(net.num_params));
  for (size_t i = 0; i < net.layers.size(); ++i) {
    float* p = weights.data() + net.param_offset[i];
    uint64_t layer_seed = core::mix_seed(seed, i);
    for (const auto& spec : net.layers[i]->params()) {
      const int64_t n = num_elements(spec.shape);
      if (!spec.initializer.empty()) {
        core::fill_keras_initializer(spec.initializer, spec.shape, layer_seed, p,
                                     "layer \"" + net.layers[i]->name() + "\" weight " + spec.name);
      } else if (spec.init == core::Init::GlorotUniform) {
        const double limit = std::sqrt(6.0 / static_cast<double>(spec.fan_in + spec.fan_out));
        for (int64_t j = 0; j < n; ++j) {
          const double u = static_cast<double>(core::mix_seed(layer_seed, static_cast<uint64_t>(j)) >> 11) * 0x1.0p-53;
          p[j] = static_cast<float>((2 * u - 1) * limit);
        }
      } else if (spec.init == core::Init::Values) {
        std::copy(spec.values.begin(), spec.values.end(), p);
      } else {
        const float value = spec.init == core::Init::Ones ? 1.0f : 0.0f;
        for (int64_t j = 0; j < n; ++j) p[j] = value;
      }
      p += n;
      layer_seed = core::mix_seed(layer_seed, 0x5eed);
    }
  }
  set_params(weights.data());  // the same initial weights on every replica
}

void Model::Impl::require_compiled(const char* what) const {
  require(compiled, Status::Misuse, std::string(what) + " needs a compiled model: call compile first");
}

// ------------------------------------------------------------------------------------------------

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::sequential(const Strategy& strategy, const Shape& input_shape) {
  return Model(std::make_unique<Impl>(strategy, input_shape));
}

Model Model::functional(const Strategy& strategy, const Shape& input_shape, const std::string& input_name) {
  require(!input_name.empty(), Status::InvalidArgument, "the input needs a name");
  auto impl = std::make_unique<Impl>(strategy, input_shape);
  impl->net.input_name = input_name;
  return Model(std::move(impl));
}

std::vector<std::string> Model::layer_names() const {
  std::vector<std::string> names;
  for (const auto& l : impl_->net.layers) names.push_back(l->name());
  return names;
}

void Model::add(LayerSpec spec) { impl_->add(std::move(spec), {}); }
void Model::add(LayerSpec spec, const std::vector<std::string>& inbound) { impl_->add(std::move(spec), inbound); }
std::string Model::add_layer(const std::string& keras_layer_json, const std::vector<std::string>& inbound) {
  const json::Value layer = json::parse(keras_layer_json);
  LayerSpec spec = core::layer_spec_from_json(layer);
  // Tensors passed by keyword (Keras's {"attention_mask": {"class_name": "__keras_tensor__", ...}}) read
  // their layers after the named inputs; with no inputs named, the last layer added is the first.
  std::vector<std::string> inputs = inbound;
  if (const json::Value* kwargs = layer.find("kwargs")) {
    bool tensors = false;
    for (const auto& entry : kwargs->as_object("kwargs")) tensors = tensors || core::is_keras_tensor(entry.second);
    if (inputs.empty() && tensors)
      inputs.push_back(impl_->net.layers.empty() ? impl_->net.input_name : impl_->net.layers.back()->name());
    const core::CallKeywords k = core::split_call_keywords(
        *kwargs, inputs.size(), core::layer_entry(spec.kind).class_name,
        std::string(core::layer_entry(spec.kind).class_name) + " \"" + spec.name + "\"");
    inputs.insert(inputs.end(), k.tensors.begin(), k.tensors.end());
    spec.call_config = k.call_config;
  }
  return impl_->add(std::move(spec), inputs);
}
void Model::set_trainable(const std::string& layer, bool trainable) { impl_->set_trainable(layer, trainable); }
bool Model::trainable(const std::string& layer) const { return impl_->trainable(layer); }
int64_t Model::num_trainable_params() const { return impl_->net.num_trainable_params(); }
void Model::add_dense(int64_t units, Activation act, bool use_bias) {
  LayerSpec s;
  s.kind = LayerKind::Dense;
  s.units = units;
  s.activation = act;
  s.use_bias = use_bias;
  add(std::move(s));
}
void Model::add_conv2d(int64_t filters, int64_t kernel_h, int64_t kernel_w, int64_t stride, Padding padding,
                       Activation act, bool use_bias) {
  LayerSpec s;
  s.kind = LayerKind::Conv2D;
  s.use_bias = use_bias;
  s.filters = filters;
  s.kernel_h = kernel_h;
  s.kernel_w = kernel_w;
  s.stride = stride;
  s.padding = padding;
  s.activation = act;
  add(std::move(s));
}
void Model::add_max_pool2d(int64_t pool_h, int64_t pool_w) {
  LayerSpec s;
  s.kind = LayerKind::MaxPooling2D;
  s.pool_h = pool_h;
  s.pool_w = pool_w;
  add(std::move(s));
}
void Model::add_normalization(const FeatureMoments& moments) {
  LayerSpec s;
  s.kind = LayerKind::Normalization;
  s.mean = moments.mean;
  s.variance = moments.variance;
  add(std::move(s));
}
void Model::add_flatten() {
  LayerSpec s;
  s.kind = LayerKind::Flatten;
  add(std::move(s));
}
void Model::add_dropout(float rate) {
  LayerSpec s;
  s.kind = LayerKind::Dropout;
  s.rate = rate;
  add(std::move(s));
}

void Model::Impl::require_not_fitting(const char* what) const {
  require(!fitting, Status::Misuse,
          std::string(what) + " on the model being fit, from one of its callbacks: the fit's buffers are in use");
}

void Model::compile(const CompileOptions& options) {
  impl_->require_not_fitting("compile");
  impl_->compile(options);
}
bool Model::compiled() const { return impl_->compiled; }
int64_t Model::num_params() const { return impl_->net.num_params; }
const Shape& Model::input_shape() const { return impl_->net.shapes.front(); }
const Shape& Model::output_shape() const { return impl_->net.shapes.back(); }
std::string Model::to_json() const { return impl_->to_json(); }

std::vector<float> Model::Impl::get_weights() const {
  require_compiled("get_weights");
  return host_params();
}

void Model::Impl::set_weights(const float* w, size_t n) {
  require_compiled("set_weights");
  // The count before the values: a caller's buffer is read only once its length is right.
  require(n == static_cast<size_t>(net.num_params), Status::InvalidArgument,
          "set_weights needs " + std::to_string(net.num_params) + " values, got " + std::to_string(n));
  set_params(w);
}

std::vector<float> Model::get_weights() const { return impl_->get_weights(); }
void Model::set_weights(const std::vector<float>& w) { impl_->set_weights(w.data(), w.size()); }
void Model::set_weights(const float* w, size_t n) { impl_->set_weights(w, n); }

Status Model::fit(Dataset& train, const FitOptions& o, const Callbacks* cb, History* history) {
  impl_->require_not_fitting("fit");
  impl_->feeds_moved_by_nested_call = false;
  impl_->fitting = true;
  const struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{impl_->fitting};
  return impl_->fit(train, o, cb, history);
}
void Model::Impl::require_nested_call_possible(const char* what) const {
  if (!fitting) return;
  require(!multi_worker() && !strategy.parameter_servers(), Status::Misuse,
          std::string(what) + " from a callback of a multi-worker or parameter-server fit (only the chief runs "
                              "callbacks, and this call needs every worker or the ps tasks' state)");
}

EvalResult Model::evaluate(const Dataset& data, int verbose) {
  impl_->require_nested_call_possible("evaluate");
  return impl_->evaluate(data, verbose);
}

std::vector<float> Model::predict(const float* x, int64_t n) {
  require(n >= 0, Status::InvalidArgument, "predict needs n >= 0");
  impl_->require_nested_call_possible("predict");
  std::vector<float> out(static_cast<size_t>(n * impl_->net.output_size()));
  impl_->predict(x, n, out.data());
  return out;
}
void Model::predict_into(const float* x, int64_t n, float* out) {
  impl_->require_nested_call_possible("predict");
  impl_->predict(x, n, out);
}

std::string Model::gemm_kernel() const {
  impl_->require_compiled("gemm_kernel");
  return impl_->replicas.front().be->gemm_kernel_name();
}

}  // namespace kx
