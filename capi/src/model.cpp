// kx_model_*: building, compiling, JSON, the summary, layers, files.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "capi/src/handles.hpp"

using kx::capi::guarded;
using kx::capi::require_arg;

namespace {

kx::Activation checked_activation(const kx_activation& act, const char* function) {
  const int32_t a = kx::capi::enum_value(act);
  kx::require(a >= KX_ACT_NONE && a <= KX_ACT_SOFTMAX, kx::Status::InvalidArgument,
              std::string(function) + ": unknown activation " + std::to_string(a));
  return static_cast<kx::Activation>(a);
}

void require_not_compiled(const kx_model* m, const char* function) {
  kx::require(!m->model.compiled(), kx::Status::Misuse,
              std::string(function) + ": cannot add a layer to a compiled model");
}

// Appends spec to m for the C function `function`, with its argument checks.
kx_status add_layer(kx_model* m, const char* function, const kx::LayerSpec& spec) {
  return guarded([&] {
    require_arg(m, "m", function);
    require_not_compiled(m, function);
    m->model.add(spec);
    return KX_OK;
  });
}

// use_bias from KX_LAYER_* flags; InvalidArgument for a bit kx does not know.
bool use_bias_of(uint32_t flags, const char* function) {
  kx::require((flags & ~KX_LAYER_NO_BIAS) == 0, kx::Status::InvalidArgument,
              std::string(function) + ": unknown flags " + std::to_string(flags & ~KX_LAYER_NO_BIAS));
  return (flags & KX_LAYER_NO_BIAS) == 0;
}

kx_status add_dense(kx_model* m, int64_t units, const kx_activation& act, uint32_t flags, const char* function) {
  return guarded([&] {
    require_arg(m, "m", function);
    require_not_compiled(m, function);
    const bool use_bias = use_bias_of(flags, function);
    m->model.add_dense(units, checked_activation(act, function), use_bias);
    return KX_OK;
  });
}

// The enums by reference: the caller's value is read only through enum_value (it may be out of range).
kx_status add_conv2d(kx_model* m, int64_t filters, int32_t kernel_h, int32_t kernel_w, int32_t stride,
                     const kx_padding& padding, const kx_activation& act, uint32_t flags, const char* function) {
  return guarded([&] {
    require_arg(m, "m", function);
    require_not_compiled(m, function);
    const int pad = kx::capi::enum_value(padding);
    kx::require(pad == KX_PADDING_VALID || pad == KX_PADDING_SAME, kx::Status::InvalidArgument,
                std::string(function) + ": unknown padding " + std::to_string(pad));
    const bool use_bias = use_bias_of(flags, function);
    m->model.add_conv2d(filters, kernel_h, kernel_w, stride, static_cast<kx::Padding>(pad),
                        checked_activation(act, function), use_bias);
    return KX_OK;
  });
}

kx::LayerSpec spec_of(kx::LayerKind kind) {
  kx::LayerSpec s;
  s.kind = kind;
  return s;
}

// The checks a model's creation makes of its arguments; returns the input shape.
kx::Shape input_shape_of(const kx_strategy* s, const int64_t* input_shape, size_t rank, kx_model** out,
                         const char* function) {
  require_arg(s, "s", function);
  require_arg(input_shape, "input_shape", function);
  require_arg(out, "out", function);
  kx::require(rank > 0 && rank <= 8, kx::Status::InvalidArgument,
              std::string(function) + ": rank must be 1..8, got " + std::to_string(rank));
  return kx::Shape(input_shape, input_shape + rank);
}

}  // namespace

extern "C" {

kx_status kx_model_create_sequential(kx_strategy* s, const int64_t* input_shape, size_t rank, kx_model** out) {
  return guarded([&] {
    const kx::Shape shape = input_shape_of(s, input_shape, rank, out, "kx_model_create_sequential");
    return kx::capi::hand_out(std::make_unique<kx_model>(kx_model{kx::Model::sequential(s->strategy, shape)}), out);
  });
}

kx_status kx_model_create_functional(kx_strategy* s, const int64_t* input_shape, size_t rank, const char* input_name,
                                     kx_model** out) {
  return guarded([&] {
    const kx::Shape shape = input_shape_of(s, input_shape, rank, out, "kx_model_create_functional");
    const std::string name = input_name ? input_name : "input_layer";
    return kx::capi::hand_out(std::make_unique<kx_model>(kx_model{kx::Model::functional(s->strategy, shape, name)}),
                              out);
  });
}

kx_status kx_model_add_layer(kx_model* m, const char* layer_json, const char* const* inputs, size_t num_inputs,
                             char** name) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_add_layer");
    require_arg(layer_json, "layer_json", "kx_model_add_layer");
    require_not_compiled(m, "kx_model_add_layer");
    if (num_inputs > 0) require_arg(inputs, "inputs", "kx_model_add_layer");
    std::vector<std::string> inbound;
    for (size_t i = 0; i < num_inputs; ++i) {
      kx::require(inputs[i] != nullptr, kx::Status::InvalidArgument,
                  "kx_model_add_layer: inputs[" + std::to_string(i) + "] is NULL");
      inbound.emplace_back(inputs[i]);
    }
    // The name's memory is taken before the layer is added, so that running out of it leaves the model
    // as it was. The name is the config's (no longer than the JSON that spells it) or a generated stem
    // with a count.
    constexpr size_t kGeneratedNameBytes = 64;
    std::unique_ptr<char, decltype(&std::free)> buffer(nullptr, &std::free);
    const size_t capacity = std::strlen(layer_json) + kGeneratedNameBytes;
    if (name) {
      buffer.reset(static_cast<char*>(std::malloc(capacity)));
      if (!buffer) throw std::bad_alloc();
    }
    const std::string added = m->model.add_layer(layer_json, inbound);
    if (name) {
      kx::require(added.size() < capacity, kx::Status::Internal, "kx_model_add_layer: the layer's name outgrew its buffer");
      std::memcpy(buffer.get(), added.c_str(), added.size() + 1);
      *name = buffer.release();
    }
    return KX_OK;
  });
}

const char* kx_layer_class_name(size_t index) { return kx::layer_class_name(index); }

kx_status kx_model_add_dense(kx_model* m, int64_t units, kx_activation act) {
  return add_dense(m, units, act, 0, "kx_model_add_dense");
}

kx_status kx_model_add_dense_flags(kx_model* m, int64_t units, kx_activation act, uint32_t flags) {
  return add_dense(m, units, act, flags, "kx_model_add_dense_flags");
}

kx_status kx_model_add_conv2d(kx_model* m, int64_t filters, int32_t kernel_h, int32_t kernel_w, int32_t stride,
                              kx_padding padding, kx_activation act) {
  return add_conv2d(m, filters, kernel_h, kernel_w, stride, padding, act, 0, "kx_model_add_conv2d");
}

kx_status kx_model_add_conv2d_flags(kx_model* m, int64_t filters, int32_t kernel_h, int32_t kernel_w, int32_t stride,
                                    kx_padding padding, kx_activation act, uint32_t flags) {
  return add_conv2d(m, filters, kernel_h, kernel_w, stride, padding, act, flags, "kx_model_add_conv2d_flags");
}

kx_status kx_model_add_max_pool2d(kx_model* m, int32_t pool_h, int32_t pool_w) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_add_max_pool2d");
    require_not_compiled(m, "kx_model_add_max_pool2d");
    m->model.add_max_pool2d(pool_h, pool_w);
    return KX_OK;
  });
}

kx_status kx_model_add_flatten(kx_model* m) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_add_flatten");
    require_not_compiled(m, "kx_model_add_flatten");
    m->model.add_flatten();
    return KX_OK;
  });
}

kx_status kx_model_add_dropout(kx_model* m, float rate) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_add_dropout");
    require_not_compiled(m, "kx_model_add_dropout");
    m->model.add_dropout(rate);
    return KX_OK;
  });
}

kx_status kx_model_from_json(kx_strategy* s, const char* json, kx_model** out) {
  return guarded([&] {
    require_arg(s, "s", "kx_model_from_json");
    require_arg(json, "json", "kx_model_from_json");
    require_arg(out, "out", "kx_model_from_json");
    return kx::capi::hand_out(std::make_unique<kx_model>(kx_model{kx::Model::from_json(s->strategy, json)}), out);
  });
}

kx_status kx_model_to_json(const kx_model* m, char** out_json) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_to_json");
    require_arg(out_json, "out_json", "kx_model_to_json");
    *out_json = kx::capi::malloc_string(m->model.to_json());
    return KX_OK;
  });
}

kx_status kx_model_summary_width(const kx_model* m, int32_t line_length, char** out_text) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_summary_width");
    require_arg(out_text, "out_text", "kx_model_summary_width");
    *out_text = kx::capi::malloc_string(m->model.summary(line_length));
    return KX_OK;
  });
}

kx_status kx_model_summary(const kx_model* m, char** out_text) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_summary");
    require_arg(out_text, "out_text", "kx_model_summary");
    // What Keras prints without a terminal, or on one 80 columns wide: min(default, 80 - 4).
    *out_text = kx::capi::malloc_string(m->model.summary(76));
    return KX_OK;
  });
}

void kx_compile_options_init(kx_compile_options* o, size_t struct_size) { kx::capi::init_options(o, struct_size); }

kx_status kx_model_compile(kx_model* m, const kx_compile_options* o) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_compile");
    const kx_compile_options opt = kx::capi::read_options(o, "kx_model_compile");
    const int32_t optimizer = kx::capi::enum_value(opt.optimizer), loss = kx::capi::enum_value(opt.loss);
    kx::require(optimizer >= KX_OPTIMIZER_ADAM && optimizer <= KX_OPTIMIZER_RMSPROP, kx::Status::InvalidArgument,
                "kx_model_compile: unknown optimizer " + std::to_string(optimizer));
    kx::require(loss >= KX_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY && loss <= KX_LOSS_HUBER,
                kx::Status::InvalidArgument, "kx_model_compile: unknown loss " + std::to_string(loss));
    kx::require((opt.metrics & ~KX_METRIC_ACCURACY) == 0, kx::Status::InvalidArgument,
                "kx_model_compile: unknown metric bits " + std::to_string(opt.metrics & ~KX_METRIC_ACCURACY));
    constexpr uint32_t known_zeros = KX_COMPILE_ZERO_LEARNING_RATE | KX_COMPILE_ZERO_BETA1 | KX_COMPILE_ZERO_BETA2 |
                                     KX_COMPILE_ZERO_EPSILON | KX_COMPILE_ZERO_EMA_MOMENTUM |
                                     KX_COMPILE_ZERO_WEIGHT_DECAY | KX_COMPILE_ZERO_RHO;
    kx::require((opt.zero_is_value & ~known_zeros) == 0, kx::Status::InvalidArgument,
                "kx_model_compile: unknown zero_is_value bits " + std::to_string(opt.zero_is_value & ~known_zeros));
    kx::CompileOptions c;
    c.optimizer.kind = static_cast<kx::OptimizerKind>(optimizer);
    // A zero is the default unless its bit says the zero is meant (a zeroed struct keeps meaning defaults).
    const auto set = [&](double value, uint32_t zero_bit, auto& field) {
      if (value != 0 || (opt.zero_is_value & zero_bit)) field = value;
    };
    set(opt.learning_rate, KX_COMPILE_ZERO_LEARNING_RATE, c.optimizer.learning_rate);
    set(opt.beta1, KX_COMPILE_ZERO_BETA1, c.optimizer.beta1);
    set(opt.beta2, KX_COMPILE_ZERO_BETA2, c.optimizer.beta2);
    set(opt.epsilon, KX_COMPILE_ZERO_EPSILON, c.optimizer.epsilon);
    c.optimizer.momentum = opt.momentum;
    c.optimizer.use_ema = opt.use_ema != 0;
    set(opt.ema_momentum, KX_COMPILE_ZERO_EMA_MOMENTUM, c.optimizer.ema_momentum);
    set(opt.weight_decay, KX_COMPILE_ZERO_WEIGHT_DECAY, c.optimizer.weight_decay);
    set(opt.rho, KX_COMPILE_ZERO_RHO, c.optimizer.rho);
    c.optimizer.centered = opt.centered != 0;
    c.loss.kind = static_cast<kx::LossKind>(loss);
    c.loss.from_logits = opt.from_logits != 0;
    c.accuracy = (opt.metrics & KX_METRIC_ACCURACY) != 0;
    c.seed = opt.seed;
    kx::require(opt.precision >= KX_PRECISION_FLOAT32 && opt.precision <= KX_PRECISION_MIXED_FLOAT16,
                kx::Status::InvalidArgument, "kx_model_compile: unknown precision " + std::to_string(opt.precision));
    c.precision = static_cast<kx::Precision>(opt.precision);
    m->model.compile(c);
    return KX_OK;
  });
}

int64_t kx_model_num_params(const kx_model* m) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    kx::capi::require_arg(m, "m", "kx_model_num_params");
    return static_cast<int64_t>(m->model.num_params());
  });
}

int64_t kx_model_input_size(const kx_model* m) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    kx::capi::require_arg(m, "m", "kx_model_input_size");
    return static_cast<int64_t>(kx::num_elements(m->model.input_shape()));
  });
}

int64_t kx_model_output_size(const kx_model* m) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    kx::capi::require_arg(m, "m", "kx_model_output_size");
    return static_cast<int64_t>(kx::num_elements(m->model.output_shape()));
  });
}

kx_status kx_model_save(kx_model* m, const char* path) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_save");
    require_arg(path, "path", "kx_model_save");
    m->model.save(path);
    return KX_OK;
  });
}

kx_status kx_model_load(kx_strategy* s, const char* path, kx_model** out) {
  return guarded([&] {
    require_arg(s, "s", "kx_model_load");
    require_arg(path, "path", "kx_model_load");
    require_arg(out, "out", "kx_model_load");
    return kx::capi::hand_out(std::make_unique<kx_model>(kx_model{kx::Model::load(s->strategy, path)}), out);
  });
}

kx_status kx_model_load_keras(kx_strategy* s, const char* path, kx_model** out) {
  return guarded([&] {
    require_arg(s, "s", "kx_model_load_keras");
    require_arg(path, "path", "kx_model_load_keras");
    require_arg(out, "out", "kx_model_load_keras");
    return kx::capi::hand_out(std::make_unique<kx_model>(kx_model{kx::Model::load_keras(s->strategy, path)}), out);
  });
}

kx_status kx_model_save_keras(kx_model* m, const char* path) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_save_keras");
    require_arg(path, "path", "kx_model_save_keras");
    m->model.save_keras(path);
    return KX_OK;
  });
}

void kx_model_destroy(kx_model* m) { std::unique_ptr<kx_model> owned(m); }

kx_status kx_model_add_average_pool2d(kx_model* m, int32_t pool_h, int32_t pool_w, int32_t stride_h,
                                      int32_t stride_w) {
  kx::LayerSpec s = spec_of(kx::LayerKind::AveragePooling2D);
  s.pool_h = pool_h;
  s.pool_w = pool_w;
  s.pool_stride_h = stride_h;
  s.pool_stride_w = stride_w;
  return add_layer(m, "kx_model_add_average_pool2d", s);
}

kx_status kx_model_add_global_average_pool2d(kx_model* m) {
  return add_layer(m, "kx_model_add_global_average_pool2d", spec_of(kx::LayerKind::GlobalAveragePooling2D));
}

kx_status kx_model_add_zero_padding2d(kx_model* m, int32_t top, int32_t bottom, int32_t left, int32_t right) {
  kx::LayerSpec s = spec_of(kx::LayerKind::ZeroPadding2D);
  s.pad_top = top;
  s.pad_bottom = bottom;
  s.pad_left = left;
  s.pad_right = right;
  return add_layer(m, "kx_model_add_zero_padding2d", s);
}

kx_status kx_model_add_batch_normalization(kx_model* m, double momentum, double epsilon) {
  kx::LayerSpec s = spec_of(kx::LayerKind::BatchNormalization);
  s.momentum = momentum;
  s.epsilon = epsilon;
  return add_layer(m, "kx_model_add_batch_normalization", s);
}

kx_status kx_model_add_batch_norm(kx_model* m, float momentum, float epsilon) {
  kx::LayerSpec s = spec_of(kx::LayerKind::BatchNormalization);
  s.momentum = momentum;
  s.epsilon = epsilon;
  return add_layer(m, "kx_model_add_batch_norm", s);
}

kx_status kx_model_add_normalization(kx_model* m, const float* mean, const float* variance, size_t n) {
  return guarded([&] {
    const char* function = "kx_model_add_normalization";
    require_arg(m, "m", function);
    require_arg(mean, "mean", function);
    require_arg(variance, "variance", function);
    require_not_compiled(m, function);
    // One value or one per channel; a count beyond any shape is refused before anything is copied.
    kx::require(n >= 1 && n <= static_cast<size_t>(kx::kMaxElements), kx::Status::InvalidArgument,
                std::string(function) + ": n must be 1 or the channel count, got " + std::to_string(n));
    kx::LayerSpec s = spec_of(kx::LayerKind::Normalization);
    s.mean.assign(mean, mean + n);
    s.variance.assign(variance, variance + n);
    m->model.add(s);
    return KX_OK;
  });
}

kx_status kx_model_add_activation(kx_model* m, kx_activation act) {
  return guarded([&] {
    kx::LayerSpec s = spec_of(kx::LayerKind::Activation);
    s.activation = checked_activation(act, "kx_model_add_activation");
    return add_layer(m, "kx_model_add_activation", s);
  });
}

kx_status kx_model_create_resnet50(kx_strategy* s, const int64_t* input_shape, int32_t include_top, int64_t classes,
                                   kx_model** out) {
  return guarded([&] {
    require_arg(s, "s", "kx_model_create_resnet50");
    require_arg(out, "out", "kx_model_create_resnet50");
    const kx::Shape shape = input_shape ? kx::Shape(input_shape, input_shape + 3) : kx::Shape{224, 224, 3};
    return kx::capi::hand_out(
        std::make_unique<kx_model>(kx_model{kx::applications::resnet50(s->strategy, shape, include_top != 0, classes)}),
        out);
  });
}

kx_status kx_model_create_application(kx_strategy* s, const char* name, const char* options_json, kx_model** out) {
  return guarded([&] {
    require_arg(s, "s", "kx_model_create_application");
    require_arg(name, "name", "kx_model_create_application");
    require_arg(out, "out", "kx_model_create_application");
    return kx::capi::hand_out(std::make_unique<kx_model>(kx_model{kx::applications::application(
                                  s->strategy, name, options_json ? options_json : "")}),
                              out);
  });
}

int64_t kx_model_num_layers(const kx_model* m) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    kx::capi::require_arg(m, "m", "kx_model_num_layers");
    return static_cast<int64_t>(m->model.layer_names().size());
  });
}

kx_status kx_model_layer_name(const kx_model* m, int64_t index, char** out_name) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_layer_name");
    require_arg(out_name, "out_name", "kx_model_layer_name");
    const std::vector<std::string> names = m->model.layer_names();
    kx::require(index >= 0 && index < static_cast<int64_t>(names.size()), kx::Status::InvalidArgument,
                "kx_model_layer_name: index " + std::to_string(index) + " is not in [0, " +
                    std::to_string(names.size()) + ")");
    *out_name = kx::capi::malloc_string(names[static_cast<size_t>(index)]);
    return KX_OK;
  });
}

kx_status kx_model_set_trainable(kx_model* m, const char* layer, int32_t trainable) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_set_trainable");
    require_arg(layer, "layer", "kx_model_set_trainable");
    m->model.set_trainable(layer, trainable != 0);
    return KX_OK;
  });
}

kx_status kx_model_get_trainable(const kx_model* m, const char* layer, int32_t* out_trainable) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_get_trainable");
    require_arg(layer, "layer", "kx_model_get_trainable");
    require_arg(out_trainable, "out_trainable", "kx_model_get_trainable");
    *out_trainable = m->model.trainable(layer) ? 1 : 0;
    return KX_OK;
  });
}

int64_t kx_model_num_trainable_params(const kx_model* m) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    kx::capi::require_arg(m, "m", "kx_model_num_trainable_params");
    return static_cast<int64_t>(m->model.num_trainable_params());
  });
}

kx_status kx_model_export_onnx(const kx_model* m, const char* path) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_export_onnx");
    require_arg(path, "path", "kx_model_export_onnx");
    m->model.export_onnx(path);
    return KX_OK;
  });
}

}  // extern "C"

kx_status kx_model_loss_scale(const kx_model* m, double* out_scale) {
  return kx::capi::guarded([&] {
    kx::capi::require_arg(m, "m", "kx_model_loss_scale");
    kx::capi::require_arg(out_scale, "out_scale", "kx_model_loss_scale");
    *out_scale = m->model.loss_scale();
    return KX_OK;
  });
}

kx_status kx_model_training_memory(const kx_model* m, int64_t batch, kx_training_memory* out) {
  return kx::capi::guarded([&] {
    kx::capi::require_arg(m, "m", "kx_model_training_memory");
    kx::capi::require_arg(out, "out", "kx_model_training_memory");
    // The struct as kx.h first declared it ends with `total`; later versions grow after it.
    constexpr size_t kFirstVersion = offsetof(kx_training_memory, total) + sizeof(int64_t);
    const uint32_t size = out->struct_size;
    kx::require(size >= kFirstVersion, kx::Status::InvalidArgument,
                "kx_model_training_memory: out->struct_size is " + std::to_string(size) +
                    " (set it to sizeof *out before the call)");
    const kx::TrainingMemory r = m->model.training_memory(batch);
    kx_training_memory c;
    std::memset(&c, 0, sizeof c);
    c.batch = r.batch;
    c.rows = r.rows;
    c.weights = r.weights;
    c.weight_gradients = r.weight_gradients;
    c.optimizer_slots = r.optimizer_slots;
    c.step_arena = r.step_arena;
    c.step_arena_without_reuse = r.step_arena_without_reuse;
    c.activations = r.activations;
    c.layer_gradients = r.layer_gradients;
    c.workspace = r.workspace;
    c.scratch = r.scratch;
    c.batch_buffers = r.batch_buffers;
    c.total = r.total();
    // A caller's struct of an older kx.h gets the fields it knows; of a newer one, those kx knows.
    const size_t n = std::min<size_t>(size, sizeof c);
    c.struct_size = static_cast<uint32_t>(n);
    std::memcpy(out, &c, n);
    return KX_OK;
  });
}
