#include "backend/recording_backend.hpp"

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/out_of_memory.hpp"
#include "kx/error.hpp"

namespace kx::backend {
namespace {

// One recorded call: its closure on the heap and two plain functions that run and free it. Not a
// std::function: that gives every kernel's closure a copier and type information, which a recording
// never uses and which made this file a sizeable part of libkx.
class Call {
 public:
  template <class F>
  explicit Call(F call)
      : state_(std::make_unique<F>(std::move(call)).release(),
               [](void* p) { std::default_delete<F>{}(static_cast<F*>(p)); }),
        invoke_([](void* p, Backend& target) { (*static_cast<F*>(p))(target); }) {}
  void operator()(Backend& target) const { invoke_(state_.get(), target); }

 private:
  std::unique_ptr<void, void (*)(void*)> state_;
  void (*invoke_)(void*, Backend&);
};

class RecordedGraph final : public StepGraph {
 public:
  RecordedGraph(Backend& target, std::vector<Call> calls) : target_(target), calls_(std::move(calls)) {}
  void launch() override {
    for (const Call& c : calls_) c(target_);
  }

 private:
  Backend& target_;
  std::vector<Call> calls_;
};

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  // Kernels are recorded with their arguments (copies of the structs among them).
#define KX_RECORD_KERNEL(name, params, args) \
  void name params override { run([=](Backend& target) { target.name args; }); }
  KX_BACKEND_KERNELS(KX_RECORD_KERNEL)
#undef KX_RECORD_KERNEL
  // A copy from host memory cannot be recorded either: CUDA refuses pageable memory in a capture.
#define KX_REFUSE_WHILE_RECORDING(name, params, args) \
  void name params override {                       \
    no_wait("call " #name);                         \
    inner_->name args;                              \
  }
  KX_BACKEND_DIRECT_CALLS(KX_REFUSE_WHILE_RECORDING)
#undef KX_REFUSE_WHILE_RECORDING

  bool supports(const OpQuery& q) const override { return inner_->supports(q); }
  std::string gemm_kernel_name() const override { return inner_->gemm_kernel_name(); }
  DeviceBuffer allocate(size_t bytes) override {
    no_wait("allocate");
    return inner_->allocate(bytes);
  }
  bool host_accessible() const override { return inner_->host_accessible(); }
  void set_tf32(bool on) override { inner_->set_tf32(on); }
  LossSums take_loss_sums() override {
    no_wait("read the loss");
    return inner_->take_loss_sums();
  }
  void put_back_loss_sums(const LossSums& sums) override {
    no_wait("hand the loss back");
    inner_->put_back_loss_sums(sums);
  }
  // The list of buffers is host memory the caller may reuse: the recording keeps its own copy.
  void sum_across(int64_t first, int64_t n, float* const* buffers, int count) override {
    std::vector<float*> list(buffers, buffers + count);
    run([=](Backend& b) { b.sum_across(first, n, list.data(), count); });
  }
  std::unique_ptr<TransferRing> make_transfer_ring(int slots, size_t slot_bytes) override {
    no_wait("allocate");
    return inner_->make_transfer_ring(slots, slot_bytes);
  }

  std::unique_ptr<StepGraph> capture(const std::function<void()>& body) override {
    if (recording_) return nullptr;
    recording_ = true;
    calls_.clear();
    try {
      body();
    } catch (...) {
      recording_ = false;
      calls_.clear();
      if (is_out_of_memory(std::current_exception())) throw;
      return nullptr;  // as a failed CUDA capture: nothing ran, the caller runs body itself
    }
    recording_ = false;
    return std::make_unique<RecordedGraph>(*inner_, std::exchange(calls_, {}));
  }

 protected:
  // Memory comes from inner_, which takes it back itself.
  void release(void*, size_t) noexcept override {}

 private:
  template <class F>
  void run(F&& call) {
    if (recording_)
      calls_.emplace_back(std::forward<F>(call));
    else
      call(*inner_);
  }
  void no_wait(const char* what) const {
    if (recording_) fail(Status::Misuse, std::string("a captured step cannot ") + what);
  }

  std::unique_ptr<Backend> inner_;
  bool recording_ = false;
  std::vector<Call> calls_;
};

}  // namespace

std::unique_ptr<Backend> make_recording_backend(std::unique_ptr<Backend> inner) {
  return std::make_unique<RecordingBackend>(std::move(inner));
}

}  // namespace kx::backend
