#include "core/train/parameter_server/ps_shard.hpp"

#include <cstring>

#include "backend/adam_math.hpp"
#include "kx/error.hpp"

namespace kx::distribute {
namespace {

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    append(&v, sizeof v);
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    put(static_cast<uint64_t>(v.size()));
    append(v.data(), v.size() * sizeof(T));
  }
  std::vector<char> bytes;

 private:
  // resize + memcpy rather than insert: GCC 12's link-time optimisation warns (wrongly) that inserting
  // into an empty vector overflows it.
  void append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = bytes.size();
    bytes.resize(at + n);
    std::memcpy(bytes.data() + at, p, n);
  }
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& b) : b_(b) {}
  template <class T>
  T get() {
    T v;
    take(&v, sizeof v);
    return v;
  }
  template <class T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    require(n <= (b_.size() - at_) / sizeof(T), Status::InvalidArgument, "a shard's state is cut short");
    std::vector<T> v(static_cast<size_t>(n));
    take(v.data(), v.size() * sizeof(T));
    return v;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  void take(void* out, size_t n) {
    require(n <= b_.size() - at_, Status::InvalidArgument, "a shard's state is cut short");
    if (n) std::memcpy(out, b_.data() + at_, n);
    at_ += n;
  }
  const std::vector<char>& b_;
  size_t at_ = 0;
};

constexpr uint32_t kMagic = 0x6b787073;  // "kxps"

}  // namespace

std::vector<char> ShardState::encode() const {
  Writer w;
  w.put(kMagic);
  w.put(static_cast<int32_t>(optimizer));
  w.put(beta1);
  w.put(beta2);
  w.put(epsilon);
  w.put(momentum);
  w.put(step);
  w.put_vector(trained);
  w.put_vector(state);
  w.put_vector(params);
  w.put_vector(m);
  w.put_vector(v);
  return std::move(w.bytes);
}

ShardState ShardState::decode(const std::vector<char>& bytes) {
  Reader r(bytes);
  require(r.get<uint32_t>() == kMagic, Status::InvalidArgument, "not a shard's state (another kx build?)");
  ShardState s;
  s.optimizer = static_cast<OptimizerKind>(r.get<int32_t>());
  require(s.optimizer == OptimizerKind::Adam || s.optimizer == OptimizerKind::Sgd, Status::InvalidArgument,
          "a shard's optimizer is neither Adam nor SGD");
  s.beta1 = r.get<double>();
  s.beta2 = r.get<double>();
  s.epsilon = r.get<double>();
  s.momentum = r.get<double>();
  s.step = r.get<int64_t>();
  s.trained = r.get_vector<ShardSpan>();
  s.state = r.get_vector<ShardSpan>();
  s.params = r.get_vector<float>();
  s.m = r.get_vector<float>();
  s.v = r.get_vector<float>();
  require(r.done(), Status::InvalidArgument, "a shard's state has bytes left over");
  const auto n = static_cast<int64_t>(s.params.size());
  for (const std::vector<ShardSpan>* spans : {&s.trained, &s.state})
    for (const ShardSpan& span : *spans)
      require(span.first >= 0 && span.count >= 0 && span.first + span.count <= n, Status::InvalidArgument,
              "a shard's span lies outside it");
  const bool adam = s.optimizer == OptimizerKind::Adam;
  require(s.m.empty() || s.m.size() == s.params.size(), Status::InvalidArgument, "a shard's first slot has another size");
  require(adam ? s.m.size() == s.params.size() && s.v.size() == s.params.size() : s.v.empty(), Status::InvalidArgument,
          "a shard's slots do not fit its optimizer");
  return s;
}

PsShard::PsShard(int threads) : be_(backend::make_cpu_backend(threads)) {}

void PsShard::reset(ShardState s) {
  s_ = std::move(s);
  ready_ = true;
}

int64_t PsShard::apply(const float* grad, size_t count, float learning_rate) {
  require(ready_, Status::Misuse, "a gradient pushed before the chief set the parameters");
  require(count == s_.params.size(), Status::InvalidArgument,
          "a gradient of " + std::to_string(count) + " values for a shard of " + std::to_string(s_.params.size()));
  const int64_t t = ++s_.step;
  float* p = s_.params.data();
  // The rate and 1.0 live in "device" memory for the kernels; the CPU backend's is the host's.
  const float one = 1.0f;
  if (s_.optimizer == OptimizerKind::Adam) {
    const float rate = backend::adam_rate(learning_rate, s_.beta1, s_.beta2, t);
    for (const ShardSpan& sp : s_.trained)
      be_->adam_update(sp.count, p + sp.first, grad + sp.first, s_.m.data() + sp.first, s_.v.data() + sp.first, &rate,
                       backend::adam_one_minus(s_.beta1), backend::adam_one_minus(s_.beta2),
                       static_cast<float>(s_.epsilon), nullptr);
  } else {
    for (const ShardSpan& sp : s_.trained)
      be_->sgd_update(sp.count, p + sp.first, grad + sp.first, s_.m.empty() ? nullptr : s_.m.data() + sp.first,
                      &learning_rate, static_cast<float>(s_.momentum), nullptr);
  }
  for (const ShardSpan& sp : s_.state) be_->sgd_update(sp.count, p + sp.first, grad + sp.first, nullptr, &one, 0.0f, nullptr);
  return t;
}

}  // namespace kx::distribute
