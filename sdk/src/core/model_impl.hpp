// The state behind kx::Model: the network, its arenas, the backend and the step plan.
#pragma once
#include <memory>

#include "backend/backend.hpp"
#include "core/step_plan.hpp"
#include "kx/model.hpp"

namespace kx {

class Model::Impl {
 public:
  Impl(Strategy s, Shape input);

  void add(LayerSpec spec);
  void compile(const CompileOptions& options);
  void require_compiled(const char* what) const;
  std::string to_json() const;

  Status fit(Dataset& train, const FitOptions& o, const Callbacks* cb, History* history);
  EvalResult evaluate(const Dataset& data);
  void predict(const float* x, int64_t n, float* out);

  // Throws InvalidArgument when the dataset's samples or labels do not fit this model and loss.
  void check_dataset(const Dataset& d, const char* role) const;

  Strategy strategy;
  core::Network net;
  CompileOptions options;
  OptimizerConfig optimizer;  // resolved
  backend::LossSpec loss_spec;
  bool compiled = false;
  std::unique_ptr<backend::Backend> be;
  FloatBuffer params, grads, slot_m, slot_v;
  int64_t optimizer_steps = 0;
  core::StepPlan plan;

 private:
  // One optimiser step on rows samples gathered by storage index; adds to sums.
  // evaluate() without check_dataset, for data that fit has already checked.
  EvalResult evaluate_checked(const Dataset& data);
  void train_step(const DatasetStorage& data, const int64_t* idx, int64_t rows, backend::LossSums* sums);
  void init_weights(uint64_t seed);
  void apply_optimizer();
  int64_t label_size() const;
};

}  // namespace kx
