// A distribution strategy: the ordered list of replica devices that train in sync.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kx/device.hpp"

namespace kx {

namespace distribute {
class CollectiveFactory;  // internal: sdk/src/distribute/collective_factory.hpp
class WorkerGroup;        // internal: sdk/src/distribute/worker_group.hpp
class PsCluster;          // internal: sdk/src/core/train/parameter_server/ps_cluster.hpp
}

// Which GEMM the CPU backend uses: Auto picks the built-in AVX-512 or AVX2 kernel where the CPU has
// one, else CBLAS when kx was built with it, else the built-in kernel (NEON, or portable loops).
enum class CpuGemm { Auto = 0, Builtin = 1, Blas = 2 };
// How the CPU computes the products of a mixed_bfloat16 model. Dot: AVX512_BF16's vdpbf16ps, on aarch64
// FEAT_BF16's BFDOT (two bfloat16 products per float32 lane). Fma: float32 FMAs over the bfloat16 values
// (their products are exact in float32 too). Auto: Dot on CPUs where it outruns float32 FMAs (AMD's, Zen 4
// on) and on aarch64 CPUs with BF16, else Fma (Intel's Xeons without AMX run vdpbf16ps at half the rate
// of their FMAs). Either sums in float32.
enum class CpuBf16Gemm { Auto = 0, Dot = 1, Fma = 2 };

// Whether a training step is recorded once and replayed (CUDA graphs). Auto: where the backends and
// the collective can; Off: every step runs directly (to compare); Emulate: backends that record
// nothing themselves (the CPU) are wrapped in a recorder with graph semantics, for tests. The
// environment variable KX_STEP_GRAPHS (0 / emulate) overrides it, for debugging.
enum class StepGraphs { Auto = 0, Off = 1, Emulate = 2 };
// Whether datasets are copied whole into device memory (Auto: when they fit, else streamed batch by
// batch) or always streamed through page-locked rings (Always: to test that path). KX_DATA_STREAMING
// (always) overrides it.
enum class DataStreaming { Auto = 0, Always = 1 };

class Strategy {
 public:
  // The first GPU if there is one, else the CPU.
  static Strategy default_strategy();
  // Replicas on the named devices; empty = every GPU, or one CPU replica without GPUs.
  static Strategy mirrored(const std::vector<std::string>& devices);

  // MultiWorkerMirroredStrategy: every worker process calls it with its own replica devices; the
  // cluster comes from mpirun's environment, else TF_CONFIG (InvalidArgument when neither describes
  // one). Returns once every worker has joined (Comm when they do not within the timeout, 60 s).
  static Strategy multi_worker(const std::vector<std::string>& local_devices);

  // TensorFlow's num_replicas_in_sync: the replicas of every worker.
  int num_replicas() const { return static_cast<int>(replicas_.size()) * num_workers(); }
  // This process's replica devices.
  const std::vector<Device>& replicas() const { return replicas_; }
  // Worker processes training in sync (1 for a single-process strategy), and this one's index
  // (0: the chief, which runs the progress bar and callbacks and writes checkpoints).
  int num_workers() const;
  int worker_index() const;
  // Every collective with other workers fails with Comm after this long without an answer.
  void set_timeout(int milliseconds);
  const std::shared_ptr<distribute::WorkerGroup>& worker_group() const { return workers_; }

  // ParameterServerStrategy (TF_CONFIG with chief, worker and ps tasks): every task calls it with its
  // own replica devices; returns once every task has joined. The chief and the workers then call fit
  // on the same model (the workers train, the chief coordinates); a ps task calls serve().
  static Strategy parameter_server(const std::vector<std::string>& local_devices);
  // A ps task: holds its shard of the parameters and applies the workers' gradients until the chief's
  // fit ends (returns) or the chief is lost (Comm). InvalidArgument on a task that is no ps.
  void serve();
  // A worker may run at most `steps` batches ahead of the slowest live worker (0 = unbounded).
  void set_staleness(int steps);
  const std::shared_ptr<distribute::PsCluster>& parameter_servers() const { return ps_; }
  // The cluster's "worker" tasks, and this task's rank in it: the chief 0, worker i 1 + i, ps j after
  // the workers (parameter-server strategy only).
  int parameter_server_workers() const;
  int parameter_server_rank() const;

  // CPU threads for kernels; 0 = every core.
  void set_num_threads(int n);
  int num_threads() const { return num_threads_; }
  void set_cpu_gemm(CpuGemm g) { cpu_gemm_ = g; }
  CpuGemm cpu_gemm() const { return cpu_gemm_; }
  // Unsupported at compile when Dot is asked of a CPU without AVX512_BF16 (aarch64: without BF16).
  void set_cpu_bf16_gemm(CpuBf16Gemm g) { cpu_bf16_gemm_ = g; }
  CpuBf16Gemm cpu_bf16_gemm() const { return cpu_bf16_gemm_; }
  // TF32 tensor cores for float32 GEMMs on GPUs that have them (on by default, as in TensorFlow).
  void set_tf32(bool on) { tf32_ = on; }
  bool tf32() const { return tf32_; }
  // The settings above, for models created from this strategy afterwards; the environment's KX_*
  // switches override them (effective_* below), for debugging without rebuilding a program.
  void set_step_graphs(StepGraphs g) { step_graphs_ = g; }
  StepGraphs step_graphs() const { return step_graphs_; }
  void set_data_streaming(DataStreaming d) { data_streaming_ = d; }
  DataStreaming data_streaming() const { return data_streaming_; }
  // cuDNN for GPU convolutions where it is installed (on by default); off: im2col and GEMMs. KX_CUDNN=0
  // overrides it.
  void set_cudnn(bool on) { cudnn_ = on; }
  bool cudnn() const { return cudnn_; }
  StepGraphs effective_step_graphs() const;
  DataStreaming effective_data_streaming() const;
  bool effective_cudnn() const;
  // Internal to kx: how a model's replicas get the collective that sums their gradients (kx's own
  // strategies set it, e.g. one that also sums across processes); null: in process or NCCL, as the
  // replica devices allow.
  void set_collective_factory(std::shared_ptr<const distribute::CollectiveFactory> f) {
    collective_factory_ = std::move(f);
  }
  const std::shared_ptr<const distribute::CollectiveFactory>& collective_factory() const {
    return collective_factory_;
  }

 private:
  explicit Strategy(std::vector<Device> replicas) : replicas_(std::move(replicas)) {}
  std::vector<Device> replicas_;
  int num_threads_ = 0;
  CpuGemm cpu_gemm_ = CpuGemm::Auto;
  CpuBf16Gemm cpu_bf16_gemm_ = CpuBf16Gemm::Auto;
  bool tf32_ = true;
  StepGraphs step_graphs_ = StepGraphs::Auto;
  DataStreaming data_streaming_ = DataStreaming::Auto;
  bool cudnn_ = true;
  std::shared_ptr<const distribute::CollectiveFactory> collective_factory_;
  std::shared_ptr<distribute::WorkerGroup> workers_;  // null: one process
  std::shared_ptr<distribute::PsCluster> ps_;         // null: no parameter servers
};

}  // namespace kx
