// Model files and checkpoints: the model's tensors and settings in the safetensors layout, and
// restoring them into a model (the same model, on any replica count).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <numeric>

#include "core/model/model_impl.hpp"
#include "core/train/train_position.hpp"
#include "io/durable_write.hpp"
#include "io/hdf5_tree.hpp"
#include "io/stored_zip.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "kx/error.hpp"
#include "kx/version.hpp"

namespace kx {

namespace {

constexpr const char* kFormat = "kx/1";
constexpr const char* kEmaPrefix = "optimizer/ema/";  // the moving average of use_ema

constexpr const char* kOptimizerNames[] = {"adam", "sgd", "adamw", "rmsprop"};  // by OptimizerKind
const char* optimizer_name(OptimizerKind k) { return kOptimizerNames[static_cast<int>(k)]; }

// The tensor-name prefixes of the optimizer slots: Adam's (AdamW's) first moment or the momentum; Adam's
// second moment or RMSprop's velocity; RMSprop's average gradient.
std::string slot_m_prefix(OptimizerKind k) {
  return k == OptimizerKind::Adam || k == OptimizerKind::AdamW ? "optimizer/m/" : "optimizer/momentum/";
}
std::string slot_v_prefix(OptimizerKind k) {
  return k == OptimizerKind::RmsProp ? "optimizer/velocity/" : "optimizer/v/";
}
constexpr const char* kSlotAPrefix = "optimizer/average_gradient/";

// Throws Corrupt unless f is a file of the format this kx writes.
void check_format(const io::SafetensorsFile& f) {
  require(f.meta("format") == kFormat, Status::Corrupt,
          f.source() + ": format \"" + f.meta("format") + "\" is not one this kx reads (" + kFormat + ")");
}

// The first place where two JSON values differ, as "path: a there, b here"; "" when equal. Object
// members named `ignored` are not compared.
std::string first_difference(const json::Value& there, const json::Value& here, const std::string& path,
                             const std::vector<std::string>& ignored) {
  const auto skip = [&](const std::string& k) { return std::find(ignored.begin(), ignored.end(), k) != ignored.end(); };
  if (there.type() != here.type()) return path + ": " + there.dump() + " in the file, " + here.dump() + " here";
  switch (there.type()) {
    case json::Value::Type::Array: {
      const auto& a = there.as_array(path);
      const auto& b = here.as_array(path);
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        std::string d = first_difference(a[i], b[i], path + "[" + std::to_string(i) + "]", ignored);
        if (!d.empty()) return d;
      }
      if (a.size() != b.size())
        return path + ": " + std::to_string(a.size()) + " entries in the file, " + std::to_string(b.size()) + " here";
      return "";
    }
    case json::Value::Type::Object: {
      for (const auto& [k, v] : there.as_object(path)) {
        if (skip(k)) continue;
        const json::Value* w = here.find(k);
        if (!w) return path + "." + k + ": in the file, not here";
        std::string d = first_difference(v, *w, path + "." + k, ignored);
        if (!d.empty()) return d;
      }
      for (const auto& [k, v] : here.as_object(path))
        if (!skip(k) && !there.find(k)) return path + "." + k + ": here, not in the file";
      return "";
    }
    case json::Value::Type::Number:
      // Equal as float32 is equal: kx 0.1 kept layer settings such as momentum 0.99 in float32.
      if (there.dump() == here.dump() ||
          static_cast<float>(there.as_number(path)) == static_cast<float>(here.as_number(path)))
        return "";
      return path + ": " + there.dump() + " in the file, " + here.dump() + " here";
    default:
      return there.dump() == here.dump() ? "" : path + ": " + there.dump() + " in the file, " + here.dump() + " here";
  }
}

json::Value meta_json(const io::SafetensorsFile& f, const std::string& key) {
  try {
    return json::parse(f.meta(key));
  } catch (const Error& e) {
    if (e.status() == Status::Corrupt) throw;
    fail(Status::Corrupt, f.source() + ": metadata \"" + key + "\" is not valid JSON: " + e.what());
  }
}

}  // namespace

json::Value Model::Impl::compile_config() const {
  json::Value opt{json::Value::Object{}};
  opt.set("name", optimizer_name(optimizer.kind));
  opt.set("learning_rate", optimizer.learning_rate.value_or(0));
  opt.set("beta_1", optimizer.beta1);
  opt.set("beta_2", optimizer.beta2);
  opt.set("epsilon", optimizer.epsilon);
  opt.set("momentum", optimizer.momentum);
  // Absent for the other optimizers, so that their files from before these existed compare equal.
  if (optimizer.kind == OptimizerKind::AdamW) opt.set("weight_decay", optimizer.weight_decay);
  if (optimizer.kind == OptimizerKind::RmsProp) {
    opt.set("rho", optimizer.rho);
    opt.set("centered", optimizer.centered);
  }
  if (optimizer.use_ema) {  // absent otherwise, so files from before EMA existed still compare equal
    opt.set("use_ema", true);
    opt.set("ema_momentum", optimizer.ema_momentum);
  }
  json::Value loss{json::Value::Object{}};
  loss.set("name", loss_name(options.loss.kind));
  loss.set("from_logits", options.loss.from_logits);
  if (options.loss.kind == LossKind::Huber) loss.set("delta", options.loss.huber_delta);
  json::Value metrics{json::Value::Array{}};
  json::Value root{json::Value::Object{}};
  root.set("optimizer", std::move(opt));
  root.set("loss", std::move(loss));
  root.set("metrics", options.accuracy ? json::Value::Array{json::Value("accuracy")} : json::Value::Array{});
  root.set("seed", std::to_string(options.seed));
  // Keras's policy name; absent in float32, so files from before mixed precision compare equal.
  if (options.precision != Precision::Float32) root.set("dtype_policy", precision_name(options.precision));
  if (loss_scaling()) {
    json::Value ls{json::Value::Object{}};
    ls.set("initial_scale", options.initial_loss_scale);
    ls.set("dynamic_growth_steps", options.loss_scale_growth_steps);
    root.set("loss_scale", std::move(ls));
  }
  return root;
}

CompileOptions Model::Impl::compile_options_from(const json::Value& c) {
  CompileOptions o;
  const json::Value& opt = c.at("optimizer", "compile config");
  const std::string& name = opt.at("name", "optimizer").as_string("optimizer name");
  bool known_optimizer = false;
  for (int k = 0; k < static_cast<int>(std::size(kOptimizerNames)); ++k)
    if (name == kOptimizerNames[k]) o.optimizer.kind = static_cast<OptimizerKind>(k), known_optimizer = true;
  require(known_optimizer, Status::InvalidArgument, "unknown optimizer \"" + name + "\"");
  o.optimizer.learning_rate = opt.at("learning_rate", "optimizer").as_number("learning_rate");
  o.optimizer.beta1 = opt.at("beta_1", "optimizer").as_number("beta_1");
  o.optimizer.beta2 = opt.at("beta_2", "optimizer").as_number("beta_2");
  o.optimizer.epsilon = opt.at("epsilon", "optimizer").as_number("epsilon");
  o.optimizer.momentum = opt.at("momentum", "optimizer").as_number("momentum");
  if (const json::Value* ema = opt.find("use_ema")) o.optimizer.use_ema = ema->as_bool("use_ema");
  if (const json::Value* m = opt.find("ema_momentum")) o.optimizer.ema_momentum = m->as_number("ema_momentum");
  if (const json::Value* wd = opt.find("weight_decay")) o.optimizer.weight_decay = wd->as_number("weight_decay");
  if (const json::Value* rho = opt.find("rho")) o.optimizer.rho = rho->as_number("rho");
  if (const json::Value* centered = opt.find("centered")) o.optimizer.centered = centered->as_bool("centered");
  const json::Value& loss = c.at("loss", "compile config");
  const std::string& lname = loss.at("name", "loss").as_string("loss name");
  bool known = false;
  for (int k = 0; k < kLossKindCount; ++k)
    if (lname == loss_name(static_cast<LossKind>(k))) o.loss.kind = static_cast<LossKind>(k), known = true;
  require(known, Status::InvalidArgument, "unknown loss \"" + lname + "\"");
  o.loss.from_logits = loss.at("from_logits", "loss").as_bool("from_logits");
  if (const json::Value* delta = loss.find("delta")) o.loss.huber_delta = delta->as_number("Huber delta");
  if (const json::Value* policy = c.find("dtype_policy")) {
    const std::string& name = policy->as_string("dtype_policy");
    bool known = false;
    for (Precision p : {Precision::Float32, Precision::MixedBfloat16, Precision::MixedFloat16})
      if (name == precision_name(p)) o.precision = p, known = true;
    require(known, Status::InvalidArgument, "unknown dtype policy \"" + name + "\"");
  }
  if (const json::Value* ls = c.find("loss_scale")) {
    o.initial_loss_scale = ls->at("initial_scale", "loss_scale").as_number("initial_scale");
    o.loss_scale_growth_steps = ls->at("dynamic_growth_steps", "loss_scale").as_int("dynamic_growth_steps");
  }
  for (const json::Value& m : c.at("metrics", "compile config").as_array("metrics"))
    o.accuracy = o.accuracy || m.as_string("metric") == "accuracy";
  if (const json::Value* seed = c.find("seed")) {
    const std::string& text = seed->as_string("seed");
    char* end = nullptr;
    o.seed = std::strtoull(text.c_str(), &end, 10);
    require(!text.empty() && *end == '\0', Status::InvalidArgument, "compile seed \"" + text + "\" is not a number");
  }
  return o;
}

std::vector<WeightInfo> Model::Impl::named_params() const {
  std::vector<int> arena_order(net.layers.size());
  std::iota(arena_order.begin(), arena_order.end(), 0);
  return tensors_of(arena_order);
}

std::string Model::Impl::encode(const core::TrainPosition* position, const core::DataOrder* order,
                                bool finite_only) const {
  require_compiled("save");
  const std::vector<float> params = host_params(), slot_m = host_slot(&Replica::slot_m),
                           slot_v = host_slot(&Replica::slot_v), slot_a = host_slot(&Replica::slot_a),
                           slot_ema = host_slot(&Replica::slot_ema);
  std::vector<io::TensorToWrite> tensors;
  const std::vector<WeightInfo> names = named_params();
  for (const WeightInfo& p : names) tensors.push_back({p.name, p.shape, params.data() + p.offset});
  // Optimizer slots exist for the weights the optimizer trains only, as in Keras: moving statistics
  // have none (their arena slots stay zero).
  const auto add_slots = [&](const std::vector<float>& slot, const std::string& prefix) {
    if (slot.empty()) return;
    for (const WeightInfo& p : names)
      if (p.trainable) tensors.push_back({prefix + p.name, p.shape, slot.data() + p.offset});
  };
  add_slots(slot_m, slot_m_prefix(optimizer.kind));
  add_slots(slot_v, slot_v_prefix(optimizer.kind));
  add_slots(slot_a, kSlotAPrefix);
  add_slots(slot_ema, kEmaPrefix);
  if (finite_only)
    for (const io::TensorToWrite& t : tensors) {
      const float* end = t.data + num_elements(t.shape);
      require(std::all_of(t.data, end, [](float v) { return std::isfinite(v); }), Status::Diverged,
              "\"" + t.name + "\" holds a value that is not finite");
    }
  io::Metadata m;
  m["format"] = kFormat;
  m["kx_version"] = KX_VERSION_STRING;
  m["model_config"] = to_json();
  m["compile_config"] = compile_config().dump();
  m["optimizer_steps"] = std::to_string(optimizer_steps);
  m["replicas"] = std::to_string(replicas.size());
  if (loss_scaling()) {  // float16's dynamic loss scale, so that a resumed fit continues it
    const backend::LossScaleState ls = host_loss_scale();
    m["loss_scale"] = core::meta_double_text(ls.scale);
    m["loss_scale_good_steps"] = std::to_string(ls.good_steps);
  }
  if (position && order) core::put_position(*position, *order, m);
  return io::encode_safetensors(tensors, std::move(m));
}

void Model::Impl::restore(const io::SafetensorsFile& f) {
  require_compiled("restoring a checkpoint");
  check_format(f);
  // A file from another kx version may hold the same model; the seed is the file's RNG state, restored.
  // Which layers train is the caller's choice now (a fine-tuning run unfreezes what was frozen).
  const std::string model_diff =
      first_difference(meta_json(f, "model_config"), json::parse(to_json()), "model", {"kx_version", "trainable"});
  require(model_diff.empty(), Status::InvalidArgument, f.source() + " holds a different model: " + model_diff);
  const json::Value compile = meta_json(f, "compile_config");
  // Checkpoints hold float32 weights whatever the policy: one trained mixed resumes in float32 and back.
  const std::string compile_diff =
      first_difference(compile, compile_config(), "compile", {"seed", "dtype_policy", "loss_scale"});
  require(compile_diff.empty(), Status::InvalidArgument, f.source() + " was compiled differently: " + compile_diff);
  uint64_t seed = 0;
  try {
    seed = compile_options_from(compile).seed;
  } catch (const Error& e) {
    fail(Status::Corrupt, f.source() + ": " + e.what());
  }

  const size_t n = static_cast<size_t>(net.num_params);
  const auto floats = [](const backend::DeviceBuffer& b) { return static_cast<size_t>(b.floats()); };
  FloatBuffer params(n), m(floats(replicas.front().slot_m)), v(floats(replicas.front().slot_v)),
      a(floats(replicas.front().slot_a)), ema(floats(replicas.front().slot_ema));
  const auto read = [&](const std::string& name, const Shape& shape, float* out) {
    const io::TensorEntry* e = f.find(name);
    require(e != nullptr, Status::Corrupt, f.source() + ": tensor \"" + name + "\" is missing");
    require(e->shape == shape, Status::Corrupt,
            f.source() + ": tensor \"" + name + "\" has shape " + to_string(e->shape) + ", the model's is " +
                to_string(shape));
    f.read(*e, out);
  };
  for (const WeightInfo& p : named_params()) {
    read(p.name, p.shape, params.data() + p.offset);
    // Files of kx 0.1 also hold (always zero) slots of untrained state: not needed, not read.
    if (!p.trainable) continue;
    if (!m.empty()) read(slot_m_prefix(optimizer.kind) + p.name, p.shape, m.data() + p.offset);
    if (!v.empty()) read(slot_v_prefix(optimizer.kind) + p.name, p.shape, v.data() + p.offset);
    if (!a.empty()) read(kSlotAPrefix + p.name, p.shape, a.data() + p.offset);
    if (!ema.empty()) read(kEmaPrefix + p.name, p.shape, ema.data() + p.offset);
  }
  const int64_t steps = core::meta_int(f, "optimizer_steps", 0, core::kMaxCount);
  // The replica count it was written on: any count restores it, but a count below one is no kx file.
  core::meta_int(f, "replicas", 1, INT32_MAX);
  // The loss scale where a float16 run left it; files without one (float32 or bfloat16 runs, older
  // files) start from the initial scale.
  double scale = options.initial_loss_scale;
  int64_t good_steps = 0;
  if (loss_scaling() && f.metadata().count("loss_scale")) {
    scale = core::meta_double(f, "loss_scale", std::numeric_limits<double>::denorm_min(), core::kMaxSum);
    good_steps = core::meta_int(f, "loss_scale_good_steps", 0, core::kMaxCount);
  }
  // Everything is read and checked: only now does the model change.
  set_params(params.data());
  for (Replica& r : replicas) {
    r.be->to_device(m.data(), r.slot_m.bytes(), r.slot_m.data());
    r.be->to_device(v.data(), r.slot_v.bytes(), r.slot_v.data());
    r.be->to_device(a.data(), r.slot_a.bytes(), r.slot_a.data());
    r.be->to_device(ema.data(), r.slot_ema.bytes(), r.slot_ema.data());
  }
  optimizer_steps = steps;
  options.seed = seed;  // dropout masks continue the stream they came from
  if (loss_scaling()) set_loss_scale(scale, good_steps);
}

WeightsReport Model::Impl::load_weights(const std::string& path, bool skip_mismatch) {
  require_compiled("load_weights");
  std::string bytes = io::read_file(path);
  // Keras's files (.weights.h5, legacy .h5, .keras) by their signature; anything else is safetensors.
  if (io::looks_like_hdf5(bytes) || io::looks_like_zip(bytes)) return load_keras_weights(bytes, path, skip_mismatch);
  const io::SafetensorsFile f = io::SafetensorsFile::decode(std::move(bytes), path, io::Checksums::IfPresent);
  std::vector<float> params = host_params();
  WeightsReport report;
  for (const WeightInfo& p : named_params()) {
    const io::TensorEntry* e = f.find(p.name);
    if (e && e->shape == p.shape) {
      f.read(*e, params.data() + p.offset);
      ++report.loaded;
      continue;
    }
    require(skip_mismatch, Status::InvalidArgument,
            path + ": " +
                (e ? "tensor \"" + p.name + "\" has shape " + to_string(e->shape) + ", the model's is " + to_string(p.shape)
                   : "no tensor \"" + p.name + "\"") +
                " (nothing was loaded; skip mismatches to load the rest)");
    ++report.skipped;
  }
  set_params(params.data());  // every tensor was read and checked: only now does the model change
  return report;
}

WeightsReport Model::load_weights(const std::string& path, bool skip_mismatch) {
  return impl_->load_weights(path, skip_mismatch);
}

void Model::save(const std::string& path) const {
  impl_->require_compiled("save");
  io::write_file_durably(path, impl_->encode(nullptr, nullptr));
}

Model Model::load(const Strategy& strategy, const std::string& path) {
  return Impl::load_file(strategy, io::SafetensorsFile::decode(io::read_file(path), path));
}

Model Model::Impl::load_file(const Strategy& strategy, const io::SafetensorsFile& f) {
  check_format(f);
  try {
    Model m = from_json(strategy, f.meta("model_config"));
    const CompileOptions co = compile_options_from(meta_json(f, "compile_config"));
    // The tensors must be exactly what the config describes, before anything that size is allocated.
    const int64_t slots = co.optimizer.slot_count() + (co.optimizer.use_ema ? 1 : 0);
    int64_t bytes = 0, trained = 0;
    for (const io::TensorEntry& e : f.tensors()) bytes += e.end - e.begin;
    for (const WeightInfo& p : m.impl_->named_params())
      if (p.trainable) trained += num_elements(p.shape);
    // Slots for the trained weights (kx 0.2 on), or for every weight (kx 0.1).
    const auto f32 = static_cast<int64_t>(sizeof(float));
    const int64_t expected = (m.num_params() + slots * trained) * f32, legacy = m.num_params() * (1 + slots) * f32;
    require(bytes == expected || bytes == legacy, Status::Corrupt,
            f.source() + ": its tensors hold " + std::to_string(bytes) + " bytes, its model config needs " +
                std::to_string(expected));
    m.compile(co);
    m.impl_->restore(f);
    return m;
  } catch (const Error& e) {
    if (e.status() != Status::InvalidArgument) throw;
    fail(Status::Corrupt, f.source() + ": the stored model cannot be rebuilt: " + e.what());
  }
}

}  // namespace kx
