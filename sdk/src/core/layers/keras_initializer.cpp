#include "core/layers/keras_initializer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "backend/seed_mix.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

using json::Value;

// Keras's classes kx draws, with the snake-case names Keras also accepts; a named VarianceScaling
// carries its scale, mode and distribution.
struct Known {
  const char* class_name;
  const char* snake_name;
  double scale;
  const char* mode;  // null: not a VarianceScaling
  const char* distribution;
};
constexpr Known kKnown[] = {
    {"VarianceScaling", "variance_scaling", 1.0, "fan_in", "truncated_normal"},
    {"GlorotUniform", "glorot_uniform", 1.0, "fan_avg", "uniform"},
    {"GlorotNormal", "glorot_normal", 1.0, "fan_avg", "truncated_normal"},
    {"HeUniform", "he_uniform", 2.0, "fan_in", "uniform"},
    {"HeNormal", "he_normal", 2.0, "fan_in", "truncated_normal"},
    {"LecunUniform", "lecun_uniform", 1.0, "fan_in", "uniform"},
    {"LecunNormal", "lecun_normal", 1.0, "fan_in", "truncated_normal"},
    {"RandomUniform", "random_uniform", 0, nullptr, nullptr},
    {"RandomNormal", "random_normal", 0, nullptr, nullptr},
    {"TruncatedNormal", "truncated_normal", 0, nullptr, nullptr},
    {"Orthogonal", "orthogonal", 0, nullptr, nullptr},
    {"Zeros", "zeros", 0, nullptr, nullptr},
    {"Ones", "ones", 0, nullptr, nullptr},
    {"Constant", "constant", 0, nullptr, nullptr},
};

const Known* find_known(const std::string& name) {
  // Keras's short aliases too.
  const std::string n = name == "uniform" ? "random_uniform" : name == "normal" ? "random_normal"
                        : name == "zero"  ? "zeros"          : name == "one"    ? "ones" : name;
  for (const Known& k : kKnown)
    if (n == k.class_name || n == k.snake_name) return &k;
  return nullptr;
}

double number(const Value& config, const char* key, double fallback, const std::string& what) {
  const Value* v = config.find(key);
  if (!v || v->is_null()) return fallback;
  const double d = v->as_number(what + " " + key);
  require(std::isfinite(d), Status::InvalidArgument, what + " " + key + " must be finite");
  return d;
}

std::string text(const Value& config, const char* key, const char* fallback, const std::string& what) {
  const Value* v = config.find(key);
  return v && !v->is_null() ? v->as_string(what + " " + key) : fallback;
}

// How one value is drawn: a constant a; uniform in [a, b); normal of mean a and deviation b, cut at
// two deviations where truncated (Keras redraws beyond them); the whole weight orthogonal times gain a.
struct Draw {
  enum class Kind { Constant, Uniform, Normal, TruncatedNormal, Orthogonal } kind = Kind::Constant;
  double a = 0, b = 0;
};

// Keras's compute_fans: the given axes' sizes multiplied, else the last two axes times the receptive field.
std::pair<double, double> fans(const Value& config, const Shape& shape) {
  const auto product = [&](const Value& axes) {
    double p = 1;
    const auto rank = static_cast<int64_t>(shape.size());
    for (const Value& a : axes.as_array("initializer axes")) {
      int64_t k = a.as_int("initializer axis");
      if (k < 0) k += rank;
      require(k >= 0 && k < rank, Status::InvalidArgument, "initializer axis " + a.dump() + " is outside the weight");
      p *= static_cast<double>(shape[static_cast<size_t>(k)]);
    }
    return p;
  };
  const Value* in = config.find("input_axes");
  const Value* out = config.find("output_axes");
  if (in && out && !in->is_null() && !out->is_null()) return {product(*in), product(*out)};
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  double field = 1;
  for (size_t k = 0; k + 2 < shape.size(); ++k) field *= static_cast<double>(shape[k]);
  return {static_cast<double>(shape[shape.size() - 2]) * field, static_cast<double>(shape.back()) * field};
}

Draw draw_of(const Value& init, const Shape& shape, const std::string& what) {
  const Known* k = find_known(init.at("class_name", what).as_string(what));
  require(k != nullptr, Status::Unsupported, what + ": initializer " + init.dump() + " is not one kx draws");
  const Value& c = init.at("config", what);
  const std::string name = k->class_name;
  if (name == "Zeros") return {};
  if (name == "Ones") return {Draw::Kind::Constant, 1, 0};
  if (name == "Constant") return {Draw::Kind::Constant, number(c, "value", 0, what), 0};
  if (name == "Orthogonal") return {Draw::Kind::Orthogonal, number(c, "gain", 1, what), 0};
  if (name == "RandomUniform") return {Draw::Kind::Uniform, number(c, "minval", -0.05, what), number(c, "maxval", 0.05, what)};
  if (name == "RandomNormal" || name == "TruncatedNormal") {
    const double stddev = number(c, "stddev", 0.05, what);
    require(stddev >= 0, Status::InvalidArgument, what + ": stddev must not be negative");
    return {name == "RandomNormal" ? Draw::Kind::Normal : Draw::Kind::TruncatedNormal, number(c, "mean", 0, what), stddev};
  }
  // VarianceScaling and its named forms (whose configs hold no scale, mode or distribution).
  const double scale = number(c, "scale", k->scale, what);
  const std::string mode = text(c, "mode", k->mode, what);
  std::string distribution = text(c, "distribution", k->distribution, what);
  if (distribution == "normal") distribution = "truncated_normal";
  require(scale > 0, Status::InvalidArgument, what + ": VarianceScaling's scale must be positive");
  require(mode == "fan_in" || mode == "fan_out" || mode == "fan_avg", Status::InvalidArgument,
          what + ": VarianceScaling's mode \"" + mode + "\": fan_in, fan_out or fan_avg");
  require(distribution == "uniform" || distribution == "truncated_normal" || distribution == "untruncated_normal",
          Status::InvalidArgument,
          what + ": VarianceScaling's distribution \"" + distribution + "\": uniform, truncated_normal or untruncated_normal");
  const auto [fan_in, fan_out] = fans(c, shape);
  const double n = mode == "fan_in" ? fan_in : mode == "fan_out" ? fan_out : (fan_in + fan_out) / 2;
  const double variance = scale / std::max(1.0, n);
  if (distribution == "uniform") {
    const double limit = std::sqrt(3 * variance);
    return {Draw::Kind::Uniform, -limit, limit};
  }
  // The deviation of a normal cut at two deviations is 0.87962566103423978 of the uncut one.
  if (distribution == "truncated_normal") return {Draw::Kind::TruncatedNormal, 0, std::sqrt(variance) / 0.87962566103423978};
  return {Draw::Kind::Normal, 0, std::sqrt(variance)};
}

// A uniform double in [0, 1) from a 64-bit hash.
double unit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

// A standard normal value (Box-Muller) from draw number `attempt` of `base`.
double standard_normal(uint64_t base, uint64_t attempt) {
  const double u1 = 1.0 - unit(backend::mix_seed(base, 2 * attempt));  // (0, 1]: a finite logarithm
  const double u2 = unit(backend::mix_seed(base, 2 * attempt + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Keras's serialised form of a name or an object: its class's own name, its config ({} for none).
Value normalized(const Value& v, const std::string& what) {
  const bool named = v.type() == Value::Type::String;
  const std::string name = named ? v.as_string(what) : v.at("class_name", what).as_string(what + " class_name");
  const Known* k = find_known(name);
  require(k != nullptr, Status::Unsupported, what + ": initializer " + v.dump() + " is not one kx draws");
  const Value* config = named ? nullptr : v.find("config");
  Value c = config && !config->is_null() ? *config : Value(Value::Object{});
  c.as_object(what + " config");
  return Value(Value::Object{{"module", Value("keras.initializers")},
                             {"class_name", Value(k->class_name)},
                             {"config", std::move(c)},
                             {"registered_name", Value()}});
}

// Keras's Orthogonal: a normal matrix [max(r, c), min(r, c)] for r the product of the leading axes
// and c the last, its QR's Q with R's diagonal made positive (Keras multiplies Q by its signs),
// transposed where r < c, times the gain. Gram-Schmidt gives that Q; each column is made orthogonal to
// the ones before it twice, in double, so that Q is orthogonal to double's precision.
void fill_orthogonal(double gain, const Shape& shape, uint64_t seed, float* values, const std::string& what) {
  require(shape.size() >= 2, Status::InvalidArgument,
          what + ": the Orthogonal initializer needs a weight of two axes or more, not " + to_string(shape));
  const int64_t cols = shape.back(), rows = cols > 0 ? num_elements(shape) / cols : 0;
  const auto m = static_cast<size_t>(std::max(rows, cols)), n = static_cast<size_t>(std::min(rows, cols));
  std::vector<double> q(m * n);  // column k at q[k * m]
  for (size_t j = 0; j < q.size(); ++j) q[j] = standard_normal(backend::mix_seed(seed, j), 0);
  for (size_t k = 0; k < n; ++k) {
    double* a = q.data() + k * m;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t j = 0; j < k; ++j) {
        const double* b = q.data() + j * m;
        double d = 0;
        for (size_t i = 0; i < m; ++i) d += a[i] * b[i];
        for (size_t i = 0; i < m; ++i) a[i] -= d * b[i];
      }
    double norm = 0;
    for (size_t i = 0; i < m; ++i) norm += a[i] * a[i];
    norm = std::sqrt(norm);
    for (size_t i = 0; i < m; ++i) a[i] /= norm;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      values[r * cols + c] = static_cast<float>(gain * (rows >= cols ? q[static_cast<size_t>(c * rows + r)]
                                                                        : q[static_cast<size_t>(r * cols + c)]));
}

void fill(const Value& init, const Shape& shape, uint64_t seed, float* values, const std::string& what) {
  if (init.type() == Value::Type::Array) {  // parts of a vector: [[initializer, size], ...]
    uint64_t part = 0;
    for (const Value& p : init.as_array(what)) {
      const int64_t size = p.as_array(what).at(1).as_int(what);
      fill(p.as_array(what).at(0), {size}, backend::mix_seed(seed, part++), values, what);
      values += size;
    }
    return;
  }
  const Draw d = draw_of(init, shape, what);
  if (d.kind == Draw::Kind::Orthogonal) return fill_orthogonal(d.a, shape, seed, values, what);
  const int64_t n = num_elements(shape);
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t base = backend::mix_seed(seed, static_cast<uint64_t>(j));
    double v = d.a;
    if (d.kind == Draw::Kind::Uniform) {
      v = d.a + (d.b - d.a) * unit(base);
    } else if (d.kind != Draw::Kind::Constant) {
      double z = standard_normal(base, 0);
      for (uint64_t attempt = 1; d.kind == Draw::Kind::TruncatedNormal && std::fabs(z) > 2.0; ++attempt)
        z = standard_normal(base, attempt);
      v = d.a + d.b * z;
    }
    values[j] = static_cast<float>(v);
  }
}

}  // namespace

std::string keras_initializer_setting(const Value& config, const char* key, const std::string& layer) {
  const Value* v = config.find(key);
  if (!v || v->is_null()) return "";
  const std::string what = layer + " " + key;
  const Value init = normalized(*v, what);
  draw_of(init, {3, 3, 4, 4}, what);  // checks the settings now, not when the weights are drawn
  return init.dump();
}

std::string keras_initializer_setting(const LayerSpec& spec, const char* key) {
  if (spec.config.empty()) return "";
  return keras_initializer_setting(json::parse(spec.config), key, "layer \"" + spec.name + "\"");
}

std::string with_fan_axes(const std::string& initializer, const char* input_axes, const char* output_axes) {
  if (initializer.empty()) return initializer;
  const Value init = json::parse(initializer);
  const Known* k = find_known(init.at("class_name", "initializer").as_string("initializer"));
  const Value& config = init.at("config", "initializer");
  const Value* in = config.find("input_axes");
  const Value* out = config.find("output_axes");
  if (!k || !k->mode || (in && !in->is_null() && out && !out->is_null())) return initializer;
  Value c{Value::Object{}};
  for (const auto& [key, v] : config.as_object("initializer config"))
    if (key != "input_axes" && key != "output_axes") c.set(key, v);
  c.set("input_axes", json::parse(input_axes));
  c.set("output_axes", json::parse(output_axes));
  Value with{Value::Object{}};
  with.set("class_name", k->class_name);
  with.set("config", std::move(c));
  return with.dump();
}

std::string keras_initializer_parts(std::initializer_list<std::pair<std::string_view, int64_t>> parts) {
  std::string text = "[";
  for (const auto& [init, size] : parts) {
    text += text.size() > 1 ? ",[" : "[";
    text += init;
    text += "," + std::to_string(size) + "]";
  }
  return text + "]";
}

void add_keras_initializer(json::Value& config, const char* key, const std::string& initializer) {
  if (!initializer.empty()) config.set(key, json::parse(initializer));
}

void fill_keras_initializer(const std::string& initializer, const Shape& shape, uint64_t seed, float* values,
                            const std::string& what) {
  fill(json::parse(initializer), shape, seed, values, what);
}

KerasInitializers::KerasInitializers(const LayerSpec& spec,
                                     std::initializer_list<std::pair<const char*, const char*>> keys) {
  for (const auto& [key, weight] : keys) entries_.push_back({key, weight, keras_initializer_setting(spec, key)});
}

std::vector<ParamSpec> KerasInitializers::applied(std::vector<ParamSpec> params) const {
  for (ParamSpec& p : params)
    for (const Entry& e : entries_)
      if (p.name == e.weight && !e.initializer.empty()) p.initializer = e.initializer;
  return params;
}

void KerasInitializers::add_to(json::Value& config) const {
  for (const Entry& e : entries_) add_keras_initializer(config, e.key, e.initializer);
}

}  // namespace kx::core
