#include "distribute/cluster_spec.hpp"

#include <cstdlib>
#include <set>

#include "distribute/host_port.hpp"
#include "io/json.hpp"
#include "kx/error.hpp"

namespace kx::distribute {
namespace {

// TensorFlow's job names; anything else in TF_CONFIG is more likely a typo ("workers") than a job.
const std::set<std::string> kKnownJobs = {"chief", "worker", "ps", "evaluator"};

const char kExample[] =
    R"({"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}})";

[[noreturn]] void bad_tf_config(const std::string& why) {
  fail(Status::InvalidArgument, "TF_CONFIG: " + why + " (expected e.g. " + kExample + ")");
}

const ClusterSpec::Job* find_job(const std::vector<ClusterSpec::Job>& jobs, const std::string& name) {
  for (const ClusterSpec::Job& j : jobs)
    if (j.name == name) return &j;
  return nullptr;
}

std::vector<ClusterSpec::Job> read_jobs(const json::Value& cluster) {
  if (cluster.type() != json::Value::Type::Object) bad_tf_config("\"cluster\" must be an object of jobs");
  std::vector<ClusterSpec::Job> jobs;
  std::set<std::string> seen_addresses;
  for (const auto& [name, list] : cluster.as_object("TF_CONFIG cluster")) {
    if (!kKnownJobs.count(name))
      bad_tf_config("unknown job \"" + name + "\" in \"cluster\" (jobs are chief, worker, ps and evaluator)");
    if (list.type() != json::Value::Type::Array)
      bad_tf_config("cluster job \"" + name + "\" must be a list of \"host:port\" strings");
    ClusterSpec::Job job{name, {}};
    for (const json::Value& a : list.as_array(name)) {
      const std::string what = "cluster job \"" + name + "\" task " + std::to_string(job.addresses.size());
      if (a.type() != json::Value::Type::String) bad_tf_config(what + " must be a \"host:port\" string");
      const std::string& address = a.as_string(what);
      try {
        split_host_port(address, what);
      } catch (const Error& e) {
        bad_tf_config(e.what());
      }
      if (!seen_addresses.insert(address).second)
        bad_tf_config("address " + address + " is listed twice; every task needs its own");
      job.addresses.push_back(address);
    }
    if (job.addresses.empty()) bad_tf_config("cluster job \"" + name + "\" lists no address");
    jobs.push_back(std::move(job));
  }
  return jobs;
}

int read_int(const char* name, const char* value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  require(*value != '\0' && *end == '\0' && v >= 0 && v < (1 << 24), Status::InvalidArgument,
          std::string("mpirun's environment: ") + name + "=\"" + value + "\" is not a rank or size");
  return static_cast<int>(v);
}

}  // namespace

ClusterSpec ClusterSpec::from_tf_config(const std::string& text) {
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const Error& e) {
    bad_tf_config(std::string("not valid JSON: ") + e.what());
  }
  if (root.type() != json::Value::Type::Object) bad_tf_config("the value must be a JSON object");
  const json::Value* cluster = root.find("cluster");
  const json::Value* task = root.find("task");
  if (!cluster) bad_tf_config("no \"cluster\"");
  if (!task) bad_tf_config("no \"task\"");

  ClusterSpec spec;
  spec.launcher = Launcher::TfConfig;
  spec.jobs = read_jobs(*cluster);
  const Job* chief = find_job(spec.jobs, "chief");
  const Job* workers = find_job(spec.jobs, "worker");
  if (!chief && !workers) bad_tf_config("\"cluster\" has neither a \"chief\" nor a \"worker\" job");
  if (chief && chief->addresses.size() != 1) bad_tf_config("the \"chief\" job must have exactly one task");

  if (task->type() != json::Value::Type::Object) bad_tf_config("\"task\" must be an object");
  const json::Value* type = task->find("type");
  const json::Value* index = task->find("index");
  if (!type || type->type() != json::Value::Type::String) bad_tf_config("\"task\" needs a \"type\" string");
  if (!index || index->type() != json::Value::Type::Number) bad_tf_config("\"task\" needs an \"index\" number");
  spec.task_type = type->as_string("task type");
  const double i = index->as_number("task index");
  if (i < 0 || i != static_cast<double>(static_cast<int>(i))) bad_tf_config("task index must be an integer >= 0");
  spec.task_index = static_cast<int>(i);
  const Job* own = find_job(spec.jobs, spec.task_type);
  if (!own) bad_tf_config("task type \"" + spec.task_type + "\" is not a job of \"cluster\"");
  if (spec.task_index >= static_cast<int>(own->addresses.size()))
    bad_tf_config("task index " + std::to_string(spec.task_index) + " is out of range: job \"" + spec.task_type +
                  "\" has " + std::to_string(own->addresses.size()) + " task(s)");

  // The synchronous workers: the chief (TensorFlow's worker 0 when there is one), then the workers.
  if (chief) spec.worker_addresses.push_back(chief->addresses.front());
  if (workers) spec.worker_addresses.insert(spec.worker_addresses.end(), workers->addresses.begin(), workers->addresses.end());
  spec.num_workers = static_cast<int>(spec.worker_addresses.size());
  if (spec.task_type == "chief") spec.worker_rank = 0;
  else if (spec.task_type == "worker") spec.worker_rank = spec.task_index + (chief ? 1 : 0);
  else spec.worker_rank = -1;
  if (const Job* ps = find_job(spec.jobs, "ps")) {
    spec.num_ps = static_cast<int>(ps->addresses.size());
    const auto add = [&](const Job* job, const std::string& type) {
      for (size_t i = 0; job && i < job->addresses.size(); ++i) {
        if (spec.task_type == type && spec.task_index == static_cast<int>(i)) spec.task_rank = static_cast<int>(spec.task_addresses.size());
        spec.task_addresses.push_back(job->addresses[i]);
        spec.task_names.push_back(type == "chief" ? type : type + " " + std::to_string(i));
      }
    };
    add(chief, "chief");
    add(workers, "worker");
    add(ps, "ps");
  }
  return spec;
}

ClusterSpec ClusterSpec::from_mpi(int rank, int size) {
  require(size >= 1 && rank >= 0 && rank < size, Status::InvalidArgument,
          "mpirun's environment: rank " + std::to_string(rank) + " is not below size " + std::to_string(size));
  ClusterSpec spec;
  spec.launcher = Launcher::Mpi;
  spec.task_index = rank;
  spec.worker_rank = rank;
  spec.num_workers = size;
  return spec;
}

ClusterSpec ClusterSpec::from_environment(const Lookup& lookup) {
  const char* mpi_rank = lookup("OMPI_COMM_WORLD_RANK");
  const char* mpi_size = lookup("OMPI_COMM_WORLD_SIZE");
  if (mpi_rank || mpi_size) {
    require(mpi_rank && mpi_size, Status::InvalidArgument,
            "mpirun's environment has only one of OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE");
    return from_mpi(read_int("OMPI_COMM_WORLD_RANK", mpi_rank), read_int("OMPI_COMM_WORLD_SIZE", mpi_size));
  }
  const char* tf_config = lookup("TF_CONFIG");
  if (tf_config && *tf_config) return from_tf_config(tf_config);
  fail(Status::InvalidArgument,
       std::string("no cluster is described: start the workers with mpirun (Open MPI: `mpirun -np 2 ./app`), "
                   "or set TF_CONFIG in each worker's environment, e.g. TF_CONFIG='") +
           kExample + "' (the task index differing per worker)");
}

ClusterSpec ClusterSpec::from_environment() {
  return from_environment([](const char* name) -> const char* { return std::getenv(name); });
}

std::string ClusterSpec::describe_worker(int rank) const {
  std::string s = "worker " + std::to_string(rank);
  if (rank >= 0 && rank < static_cast<int>(worker_addresses.size())) s += " (" + worker_addresses[rank] + ")";
  return s;
}

}  // namespace kx::distribute
