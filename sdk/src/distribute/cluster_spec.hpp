// Who the processes of a multi-process job are, and which one this process is: read from the launcher's
// environment, either mpirun's (Open MPI) or TF_CONFIG (TensorFlow's format).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace kx::distribute {

struct ClusterSpec {
  enum class Launcher { TfConfig, Mpi };

  // A job of TF_CONFIG's "cluster": its name ("chief", "worker", "ps", "evaluator") and addresses.
  struct Job {
    std::string name;
    std::vector<std::string> addresses;  // "host:port", in task index order
  };

  Launcher launcher = Launcher::TfConfig;
  // Every job as TF_CONFIG lists it (empty under mpirun).
  std::vector<Job> jobs;
  // This task: "chief", "worker", "ps" or "evaluator" (mpirun: "worker"), and its index in its job.
  std::string task_type = "worker";
  int task_index = 0;

  // The synchronous workers (TF_CONFIG's chief first, then its workers): their number, this process's
  // place among them (0 = the chief; -1 for a task that is not one: ps, evaluator), and their
  // addresses in rank order (empty under mpirun: the engine learns them over MPI).
  int num_workers = 1;
  int worker_rank = 0;
  std::vector<std::string> worker_addresses;

  // Every task for the parameter-server strategy (TF_CONFIG with "ps" tasks): in rank order the chief,
  // the workers, then the ps tasks; their names ("chief", "worker 0", "ps 1"), and this task's rank.
  // Empty, and -1, without a "ps" job.
  std::vector<std::string> task_addresses;
  std::vector<std::string> task_names;
  int task_rank = -1;
  int num_ps = 0;

  // mpirun's environment (OMPI_COMM_WORLD_RANK / _SIZE) when present, else TF_CONFIG; InvalidArgument
  // when neither describes a cluster, or when what is there is malformed (the message says what).
  static ClusterSpec from_environment();
  // The same with another source of variables (tests): lookup returns the value or nullptr.
  using Lookup = std::function<const char*(const char* name)>;
  static ClusterSpec from_environment(const Lookup& lookup);
  // A TF_CONFIG text; InvalidArgument naming what is wrong.
  static ClusterSpec from_tf_config(const std::string& text);
  // rank and size as mpirun gave them (0 <= rank < size).
  static ClusterSpec from_mpi(int rank, int size);

  bool is_worker() const { return worker_rank >= 0; }
  bool is_chief() const { return worker_rank == 0; }
  // "worker 1 (10.0.0.2:2222)", or "worker 1" when the address is not known here.
  std::string describe_worker(int rank) const;
};

}  // namespace kx::distribute
