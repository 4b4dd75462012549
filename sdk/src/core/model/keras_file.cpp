// Keras's model files: opening a .keras (Keras 3) or legacy .h5 model as a kx model, saving a kx
// model as a .keras file Keras opens, and Keras weight files for load_weights.
#include <cmath>
#include <ctime>
#include <map>
#include <memory>
#include <optional>

#include "core/layers/layer_registry.hpp"
#include "core/model/keras_config.hpp"
#include "core/model/keras_weights.hpp"
#include "core/model/model_impl.hpp"
#include "core/train/train_position.hpp"
#include "io/durable_write.hpp"
#include "io/hdf5_tree.hpp"
#include "io/hdf5_writer.hpp"
#include "io/stored_zip.hpp"
#include "kx/error.hpp"
#include "kx/version.hpp"

namespace kx {

namespace {

// The model's optimizer slots in the order Keras 3 keeps its optimizer variables: Adam's (AdamW's) m
// and v, SGD's momentum, RMSprop's velocity, momentum and average gradient (those it has).
std::vector<backend::DeviceBuffer Replica::*> keras_slot_order(const OptimizerConfig& o) {
  std::vector<backend::DeviceBuffer Replica::*> order;
  if (o.kind == OptimizerKind::RmsProp) {
    order.push_back(&Replica::slot_v);
    if (o.uses_slot_m()) order.push_back(&Replica::slot_m);
    if (o.uses_slot_a()) order.push_back(&Replica::slot_a);
    return order;
  }
  if (o.uses_slot_m()) order.push_back(&Replica::slot_m);
  if (o.uses_slot_v()) order.push_back(&Replica::slot_v);
  return order;
}

// Keras 3's name of the optimizer variables' group.
const char* keras_optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::Sgd: return "SGD";
    case OptimizerKind::AdamW: return "adamw";
    case OptimizerKind::RmsProp: return "rmsprop";
  }
  return "?";
}

constexpr const char* kWeightsEntry = "model.weights.h5";

// The model's layers in Keras's order, as Keras's weight files know them.
std::vector<core::KerasLayerWeights> keras_layers(const Model::Impl& m) {
  std::vector<core::KerasLayerWeights> out;
  // A functional model's InputLayer is one of its layers for Keras (it counts in the group names).
  if (!m.net.is_chain()) out.push_back({m.net.input_name, "input_layer", {}, true});
  for (const int i : m.net.keras_layer_order()) {
    const core::Layer& l = *m.net.layers[static_cast<size_t>(i)];
    if (l.spec().kind == LayerKind::TensorOperation) continue;  // an operation: not among Keras's layers
    std::vector<std::string> file_paths;
    for (const core::ParamSpec& p : l.params()) file_paths.push_back(p.keras_file_path);
    out.push_back({l.name(), core::layer_entry(l.spec().kind).name_stem, m.tensors_of({i}), l.trainable(),
                   std::move(file_paths), l.keras_only_counters()});
  }
  return out;
}

// The weights the optimizer trains, in Keras's order (model.trainable_variables).
std::vector<WeightInfo> trained_weights(const std::vector<core::KerasLayerWeights>& layers) {
  std::vector<WeightInfo> out;
  for (const core::KerasLayerWeights& l : layers)
    for (const WeightInfo& w : l.weights)
      if (l.trainable && w.trainable) out.push_back(w);
  return out;
}

// Reads every weight the file has for the model into params. A weight the file lacks or holds with
// another shape is skipped with skip_mismatch, else `missing` (the status) naming it.
WeightsReport read_weights(const io::Hdf5Tree& f, const std::vector<core::KerasLayerWeights>& layers, float* params,
                           bool skip_mismatch, Status missing, const std::string& hint) {
  const std::vector<std::vector<std::string>> paths = core::keras_weight_paths(f, layers);
  WeightsReport report;
  for (size_t k = 0; k < layers.size(); ++k)
    for (size_t i = 0; i < layers[k].weights.size(); ++i) {
      const WeightInfo& w = layers[k].weights[i];
      const std::string& path = paths[k][i];
      const bool present = !path.empty() && f.is_dataset(path);
      const Shape shape = present ? f.shape(path) : Shape{};
      if (present && shape == w.shape) {
        f.read(path, w.shape, params + w.offset);
        ++report.loaded;
        continue;
      }
      require(skip_mismatch, missing,
              f.source() + ": " +
                  (present ? "weight \"" + w.name + "\" (" + path + ") has shape " + to_string(shape) + ", the model's is " +
                                 to_string(w.shape)
                           : "no weight \"" + w.name + "\"") +
                  hint);
      ++report.skipped;
    }
  return report;
}

json::Value parse_json(const std::string& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const Error& e) {
    fail(Status::Corrupt, what + " is not valid JSON: " + e.what());
  }
}

// Runs f; an InvalidArgument from it (a config kx cannot rebuild) becomes Corrupt naming the file.
template <class F>
auto as_corrupt(const std::string& path, F f) {
  try {
    return f();
  } catch (const Error& e) {
    if (e.status() != Status::InvalidArgument) throw;
    fail(Status::Corrupt, path + ": " + e.what());
  }
}

// What a Keras model file holds, before kx builds anything from it.
struct KerasFileParts {
  json::Value model;
  json::Value compile;  // null when Keras never compiled the model
  std::optional<io::Hdf5Tree> weights;
  // A .keras file's model.weights.h5, opened only once its config has been checked (a config kx
  // cannot train is refused even where libhdf5 is missing).
  std::string weights_bytes, weights_source;
};

KerasFileParts open_keras_file(const std::string& bytes, const std::string& path) {
  KerasFileParts parts;
  if (io::looks_like_zip(bytes)) {
    const io::ZipArchive zip(bytes, path);
    const io::ZipArchive::Entry* config = zip.find("config.json");
    require(config != nullptr, Status::Corrupt, path + ": a .keras file without config.json");
    parts.model = parse_json(zip.read(*config), path + ": config.json");
    require(parts.model.type() == json::Value::Type::Object, Status::Corrupt, path + ": config.json holds no object");
    if (const json::Value* c = parts.model.find("compile_config")) parts.compile = *c;
    const io::ZipArchive::Entry* weights = zip.find(kWeightsEntry);
    require(weights != nullptr || !zip.find("model.weights.npz"), Status::Unsupported,
            path + ": weights saved as .npz (weights_format=\"npz\") are not supported");
    require(weights != nullptr, Status::Corrupt, path + ": a .keras file without " + kWeightsEntry);
    parts.weights_bytes = zip.read(*weights);
    parts.weights_source = path + ": " + kWeightsEntry;
    return parts;
  }
  require(io::looks_like_hdf5(bytes), Status::Corrupt,
          path + ": neither a .keras file (a zip archive) nor an .h5 file (HDF5)");
  parts.weights = io::Hdf5Tree::read(bytes, path);
  const auto model = parts.weights->strings("", "model_config");
  require(model.has_value(), Status::InvalidArgument,
          path + ": holds weights only, no model_config: build the model, then load the file with load_weights");
  require(model->size() == 1, Status::Corrupt, path + ": attribute model_config is no single string");
  parts.model = parse_json(model->front(), path + ": model_config");
  // Keras 1 files have no version and need their kernels converted: not supported.
  require(parts.weights->strings("", "keras_version").has_value(), Status::Unsupported,
          path + ": a Keras 1 file (no keras_version) is not supported");
  if (const auto training = parts.weights->strings("", "training_config"); training && training->size() == 1)
    parts.compile = parse_json(training->front(), path + ": training_config");
  return parts;
}

}  // namespace

Model Model::Impl::load_keras(const Strategy& strategy, const std::string& path) {
  const std::string bytes = io::read_file(path);
  KerasFileParts parts = open_keras_file(bytes, path);
  Model m = as_corrupt(path, [&] { return Model::from_json(strategy, core::model_config_from_keras(parts.model)); });
  // The weights must be in the file before anything their size is allocated.
  const auto needed = static_cast<uint64_t>(m.num_params()) * sizeof(float);
  require(needed <= bytes.size(), Status::Corrupt,
          path + ": its model config needs " + std::to_string(needed) + " bytes of weights, the file has " +
              std::to_string(bytes.size()));
  const std::optional<CompileOptions> co = as_corrupt(path, [&] {
    return core::compile_options_from_keras(parts.compile, core::precision_from_keras(parts.model));
  });
  if (!parts.weights) parts.weights = io::Hdf5Tree::read(parts.weights_bytes, parts.weights_source);
  const io::Hdf5Tree& f = *parts.weights;
  Impl& impl = *m.impl_;
  const std::vector<core::KerasLayerWeights> layers = keras_layers(impl);
  std::vector<float> params(static_cast<size_t>(impl.net.num_params));
  read_weights(f, layers, params.data(), false, Status::Corrupt, "");
  impl.initial_params = std::move(params);  // compile (now, or the caller's) starts from them
  if (!co) return m;

  CompileOptions options = *co;
  const OptimizerConfig resolved = as_corrupt(path, [&] { return options.optimizer.resolved(); });
  const std::vector<backend::DeviceBuffer Replica::*> order = keras_slot_order(resolved);
  const int slots = static_cast<int>(order.size());
  const std::vector<WeightInfo> trained = trained_weights(layers);
  // Keras's optimizer variables, when the file has them for this optimizer: training continues from
  // them (EMA state is not read: such a model starts its optimizer afresh).
  const std::optional<core::KerasOptimizerPaths> state =
      resolved.use_ema ? std::nullopt
                       : core::keras_optimizer_paths(f, trained.size(), slots, resolved.kind == OptimizerKind::RmsProp);
  std::vector<std::vector<float>> slot_values(order.size(), std::vector<float>(impl.initial_params.size(), 0.0f));
  double steps = 0;
  if (state) {
    steps = f.read_scalar(state->iterations);
    require(std::isfinite(steps) && steps >= 0 && steps <= static_cast<double>(core::kMaxCount) && steps == std::floor(steps),
            Status::Corrupt, f.source() + ": optimizer iterations " + std::to_string(steps) + " is no step count");
    if (!state->learning_rate.empty()) {
      const double lr = f.read_scalar(state->learning_rate);
      require(std::isfinite(lr) && lr >= 0, Status::Corrupt, f.source() + ": optimizer learning rate is not finite");
      options.optimizer.learning_rate = lr;  // where a callback left it
    }
    for (size_t j = 0; j < state->slots.size(); ++j)
      for (size_t i = 0; i < trained.size(); ++i)
        f.read(state->slots[j][i], trained[i].shape, slot_values[j].data() + trained[i].offset);
  }
  as_corrupt(path, [&] { m.compile(options); });
  if (state) {
    for (Replica& r : impl.replicas)
      for (size_t j = 0; j < order.size(); ++j) {
        backend::DeviceBuffer& slot = r.*order[j];
        r.be->to_device(slot_values[j].data(), slot.bytes(), slot.data());
      }
    impl.optimizer_steps = static_cast<int64_t>(steps);
  }
  return m;
}

WeightsReport Model::Impl::load_keras_weights(const std::string& bytes, const std::string& path, bool skip_mismatch) {
  require_compiled("load_weights");
  std::optional<io::Hdf5Tree> f;
  if (io::looks_like_zip(bytes)) {  // a .keras file: its weights
    const io::ZipArchive zip(bytes, path);
    const io::ZipArchive::Entry* e = zip.find(kWeightsEntry);
    require(e != nullptr, Status::Corrupt, path + ": a .keras file without " + kWeightsEntry);
    f = io::Hdf5Tree::read(zip.read(*e), path + ": " + kWeightsEntry);
  } else {
    f = io::Hdf5Tree::read(bytes, path);
  }
  std::vector<float> params = host_params();
  const WeightsReport report = read_weights(*f, keras_layers(*this), params.data(), skip_mismatch, Status::InvalidArgument,
                                            " (nothing was loaded; skip mismatches to load the rest)");
  set_params(params.data());  // every weight was read and checked: only now does the model change
  return report;
}

void Model::Impl::save_keras(const std::string& path) const {
  require_compiled("save_keras");
  const std::vector<core::KerasLayerWeights> layers = keras_layers(*this);
  const std::vector<std::string> groups = core::keras3_layer_groups(layers);
  const std::vector<float> params = host_params();
  const json::Value kx_model = json::parse(to_json());
  const std::string model_name = kx_model.at("config", "model").at("name", "model").as_string("name");
  // model.weights.h5 as Keras 3.6 and later write it: every saveable's variables in a vars group
  // that names it.
  io::Hdf5Writer f;
  f.create_group("vars");
  f.set_string("vars", "name", model_name);
  for (size_t k = 0; k < layers.size(); ++k) {
    const std::string vars = groups[k] + "/vars";
    f.create_group(vars);
    f.set_string(vars, "name", layers[k].name);
    for (size_t i = 0; i < layers[k].weights.size(); ++i) {
      const WeightInfo& w = layers[k].weights[i];
      // A sublayer's vars group (attention's query_dense/vars) is made along the path.
      f.write(groups[k] + "/" + core::keras3_weight_path(layers[k], i), w.shape, params.data() + w.offset);
    }
    for (size_t j = 0; j < layers[k].keras_only_counters; ++j)
      f.write_scalar_int64(vars + "/" + std::to_string(layers[k].weights.size() + j), 0);
  }
  // The optimizer: iterations, learning rate, then the trained weights' slots in Keras's order (Adam:
  // m, v of each weight; RMSprop: every velocity, then every momentum, then every average gradient).
  f.create_group("optimizer/vars");
  f.set_string("optimizer/vars", "name", keras_optimizer_name(optimizer.kind));
  f.write_scalar_int64("optimizer/vars/0", optimizer_steps);
  f.write_scalar_float("optimizer/vars/1", static_cast<float>(learning_rate));
  std::vector<std::vector<float>> slots;
  for (backend::DeviceBuffer Replica::*slot : keras_slot_order(optimizer)) slots.push_back(host_slot(slot));
  const std::vector<WeightInfo> trained = trained_weights(layers);
  int index = 2;
  const auto write_slot = [&](const std::vector<float>& s, const WeightInfo& w) {
    f.write("optimizer/vars/" + std::to_string(index++), w.shape, s.data() + w.offset);
  };
  if (optimizer.kind == OptimizerKind::RmsProp) {
    for (const std::vector<float>& s : slots)
      for (const WeightInfo& w : trained) write_slot(s, w);
  } else {
    for (const WeightInfo& w : trained)
      for (const std::vector<float>& s : slots) write_slot(s, w);
  }

  std::map<std::string, Shape> output_shapes{{net.input_name, net.shapes.front()}};
  for (size_t i = 0; i < net.layers.size(); ++i) output_shapes.emplace(net.layers[i]->name(), net.shapes[i + 1]);
  json::Value config = core::keras_model_config(kx_model, precision_name(options.precision), net.keras_layer_order(),
                                                output_shapes);
  config.set("compile_config", core::keras_compile_config(options, optimizer));
  char date[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", &utc);
  json::Value metadata{json::Value::Object{}};
  // The Keras release whose layout kx writes (vars groups that name their layer: 3.6 on).
  metadata.set("keras_version", "3.6.0");
  metadata.set("date_saved", std::string(date));
  metadata.set("kx_version", KX_VERSION_STRING);
  io::write_file_durably(path, io::write_stored_zip({{"metadata.json", metadata.dump()},
                                                     {"config.json", config.dump()},
                                                     {kWeightsEntry, f.image()}}));
}

Model Model::load_keras(const Strategy& strategy, const std::string& path) { return Impl::load_keras(strategy, path); }

void Model::save_keras(const std::string& path) const { impl_->save_keras(path); }

}  // namespace kx
