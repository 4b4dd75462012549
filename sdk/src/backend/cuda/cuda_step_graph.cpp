#include "backend/cuda/cuda_step_graph.hpp"

#include "backend/cuda/cuda_check.hpp"
#include "backend/out_of_memory.hpp"

namespace kx::backend::cuda {
namespace {

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(int device, cudaStream_t stream, cudaGraphExec_t exec)
      : device_(device), stream_(stream), exec_(exec) {}
  CudaStepGraph(const CudaStepGraph&) = delete;
  CudaStepGraph& operator=(const CudaStepGraph&) = delete;
  ~CudaStepGraph() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);  // no launch of it may still run
    cudaGraphExecDestroy(exec_);
  }

  void launch() override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaGraphLaunch(exec_, stream_), "launching the captured step");
  }

 private:
  int device_;
  cudaStream_t stream_;
  cudaGraphExec_t exec_;
};

// Ends a capture whatever happens in between, and owns the graph it yields.
class Capture {
 public:
  Capture(int device, cudaStream_t stream) : stream_(stream) {
    cudaSetDevice(device);
    // Thread-local: other replicas' threads may allocate or capture their own streams meanwhile.
    ok_ = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  ~Capture() {
    if (ok_) end();
    if (graph_) cudaGraphDestroy(graph_);
    cudaGetLastError();  // a failed capture leaves an error that is not the next kernel's
  }
  bool ok() const { return ok_; }
  // The recorded graph, null when recording failed.
  cudaGraph_t end() {
    ok_ = false;
    if (cudaStreamEndCapture(stream_, &graph_) != cudaSuccess && graph_) {
      cudaGraphDestroy(graph_);
      graph_ = nullptr;
    }
    return graph_;
  }

 private:
  cudaStream_t stream_;
  cudaGraph_t graph_ = nullptr;
  bool ok_ = false;
};

}  // namespace

std::unique_ptr<StepGraph> capture_step(int device, cudaStream_t stream, const std::function<void()>& body) {
  cudaGetLastError();
  Capture capture(device, stream);
  if (!capture.ok()) return nullptr;
  try {
    body();
  } catch (...) {
    if (is_out_of_memory(std::current_exception())) throw;  // after the capture has ended
    return nullptr;  // the caller runs body eagerly, where a real error shows itself
  }
  const cudaGraph_t graph = capture.end();
  if (!graph) return nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return nullptr;
  return std::make_unique<CudaStepGraph>(device, stream, exec);
}

}  // namespace kx::backend::cuda
