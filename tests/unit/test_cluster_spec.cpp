// ClusterSpec: who the workers are, from TF_CONFIG or mpirun's environment, and clear errors otherwise.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "distribute/cluster_spec.hpp"
#include "distribute/host_port.hpp"
#include "distribute/worker_group.hpp"
#include "kx/error.hpp"

namespace kx::distribute {
namespace {

ClusterSpec from(const std::map<std::string, std::string>& env) {
  return ClusterSpec::from_environment([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The InvalidArgument message of a TF_CONFIG, or "" when it is accepted.
std::string tf_config_error(const std::string& text) {
  try {
    ClusterSpec::from_tf_config(text);
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument) << e.what();
    return e.what();
  }
}

TEST(ClusterSpec, TfConfigWorkers) {
  const ClusterSpec s = from({{"TF_CONFIG", R"({"cluster": {"worker": ["a:1", "b:2", "c:3"]},
                                               "task": {"type": "worker", "index": 2}})"}});
  EXPECT_EQ(s.launcher, ClusterSpec::Launcher::TfConfig);
  EXPECT_EQ(s.num_workers, 3);
  EXPECT_EQ(s.worker_rank, 2);
  EXPECT_FALSE(s.is_chief());
  EXPECT_EQ(s.worker_addresses, (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  EXPECT_EQ(s.describe_worker(1), "worker 1 (b:2)");
}

TEST(ClusterSpec, TfConfigChiefIsWorkerZero) {
  const std::string cluster = R"("cluster": {"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"]})";
  ClusterSpec s = ClusterSpec::from_tf_config("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})");
  EXPECT_EQ(s.num_workers, 3);
  EXPECT_EQ(s.worker_rank, 0);
  EXPECT_TRUE(s.is_chief());
  EXPECT_EQ(s.worker_addresses, (std::vector<std::string>{"c:1", "w:1", "w:2"}));
  s = ClusterSpec::from_tf_config("{" + cluster + R"(, "task": {"type": "worker", "index": 1}})");
  EXPECT_EQ(s.worker_rank, 2);
  ASSERT_EQ(s.jobs.size(), 3u);
  EXPECT_EQ(s.jobs[2].name, "ps");
  // A ps task is in the cluster but not one of the synchronous workers.
  s = ClusterSpec::from_tf_config("{" + cluster + R"(, "task": {"type": "ps", "index": 0}})");
  EXPECT_FALSE(s.is_worker());
  EXPECT_EQ(s.task_type, "ps");
}

TEST(ClusterSpec, MalformedTfConfigSaysWhatIsWrong) {
  const std::map<std::string, std::string> cases = {
      {"{", "not valid JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"task": {"type": "worker", "index": 0}})", "no \"cluster\""},
      {R"({"cluster": {"worker": ["a:1"]}})", "no \"task\""},
      {R"({"cluster": {"workers": ["a:1"]}, "task": {"type": "worker", "index": 0}})", "unknown job \"workers\""},
      {R"({"cluster": {"worker": "a:1"}, "task": {"type": "worker", "index": 0}})", "must be a list"},
      {R"({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}})", "lists no address"},
      {R"({"cluster": {"worker": ["a"]}, "task": {"type": "worker", "index": 0}})", "\"a\" is not host:port"},
      {R"({"cluster": {"worker": ["a:99999"]}, "task": {"type": "worker", "index": 0}})", "not in 1..65535"},
      {R"({"cluster": {"worker": [":80"]}, "task": {"type": "worker", "index": 0}})", "no host"},
      {R"({"cluster": {"worker": [7]}, "task": {"type": "worker", "index": 0}})", "must be a \"host:port\" string"},
      {R"({"cluster": {"worker": ["a:1", "a:1"]}, "task": {"type": "worker", "index": 0}})", "listed twice"},
      {R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}})", "neither a \"chief\" nor a \"worker\""},
      {R"({"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}})", "exactly one task"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}})", "out of range"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": -1}})", "integer >= 0"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0.5}})", "integer >= 0"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}})", "\"chief\" is not a job"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"index": 0}})", "\"type\" string"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}})", "\"index\" number"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string message = tf_config_error(text);
    EXPECT_NE(message.find("TF_CONFIG"), std::string::npos) << text << " -> " << message;
    EXPECT_NE(message.find(expected), std::string::npos) << text << " -> " << message;
  }
  EXPECT_EQ(tf_config_error(R"({"cluster": {"worker": ["[::1]:2222"]}, "task": {"type": "worker", "index": 0}})"), "");
}

TEST(ClusterSpec, MpirunEnvironmentComesFirst) {
  const ClusterSpec s = from({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                              {"TF_CONFIG", R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})"}});
  EXPECT_EQ(s.launcher, ClusterSpec::Launcher::Mpi);
  EXPECT_EQ(s.worker_rank, 1);
  EXPECT_EQ(s.num_workers, 4);
  EXPECT_TRUE(s.worker_addresses.empty());
  EXPECT_EQ(s.describe_worker(3), "worker 3");
}

TEST(ClusterSpec, BadMpirunEnvironment) {
  for (const auto& env : std::vector<std::map<std::string, std::string>>{
           {{"OMPI_COMM_WORLD_RANK", "0"}},
           {{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
           {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}}}) {
    try {
      from(env);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("mpirun"), std::string::npos) << e.what();
    }
  }
}

TEST(ClusterSpec, NeitherLauncherIsAClearInvalidArgument) {
  for (const auto& env : std::vector<std::map<std::string, std::string>>{{}, {{"TF_CONFIG", ""}}}) {
    try {
      from(env);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("mpirun"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("TF_CONFIG"), std::string::npos) << e.what();
    }
  }
}

TEST(HostPort, SplitsNamesAndBracketedIpv6) {
  EXPECT_EQ(split_host_port("host-1.example:2222", "a").host, "host-1.example");
  EXPECT_EQ(split_host_port("[::1]:80", "a").host, "::1");
  EXPECT_EQ(split_host_port("[::1]:80", "a").port, 80);
  EXPECT_THROW(split_host_port("h:", "a"), Error);
  EXPECT_THROW(split_host_port("h:0", "a"), Error);
  EXPECT_THROW(split_host_port("h:12a", "a"), Error);
}

// A cluster of one worker needs no engine module and no sockets: every collective is the identity.
TEST(WorkerGroupOfOne, CollectivesAreTheIdentity) {
  const auto group = WorkerGroup::join(ClusterSpec::from_tf_config(
      R"({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 0}})"));
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  EXPECT_TRUE(group->is_chief());
  EXPECT_EQ(group->describe_worker(0), "worker 0 (localhost:1)");
  float f[2] = {1.5f, -2.0f};
  group->all_reduce_sum(f, 2);
  EXPECT_EQ(f[1], -2.0f);
  double d = 3;
  group->all_reduce_sum(&d, 1);
  EXPECT_EQ(d, 3.0);
  char byte = 'x';
  group->broadcast(&byte, 1, 0);
  EXPECT_THROW(group->broadcast(&byte, 1, 1), Error);
  group->barrier();
  EXPECT_EQ(group->all_gather("blob"), std::vector<std::string>{"blob"});
  EXPECT_THROW(group->set_timeout(std::chrono::milliseconds(0)), Error);
  group->set_timeout(std::chrono::milliseconds(5));
  EXPECT_EQ(group->timeout(), std::chrono::milliseconds(5));
}

TEST(WorkerGroupOfOne, APsTaskJoinsNoWorkerGroup) {
  const ClusterSpec ps = ClusterSpec::from_tf_config(
      R"({"cluster": {"worker": ["a:1"], "ps": ["b:1"]}, "task": {"type": "ps", "index": 0}})");
  try {
    WorkerGroup::join(ps);
    ADD_FAILURE() << "a ps task joined";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("\"ps\" 0 is not a worker"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kx::distribute

TEST(ClusterSpec, ParameterServerTasksInRankOrder) {
  const auto spec = kx::distribute::ClusterSpec::from_tf_config(
      R"({"cluster": {"ps": ["h:5", "h:6"], "worker": ["h:2", "h:3"], "chief": ["h:1"]}, "task": {"type": "ps", "index": 1}})");
  EXPECT_EQ(spec.task_addresses, (std::vector<std::string>{"h:1", "h:2", "h:3", "h:5", "h:6"}));
  EXPECT_EQ(spec.task_names, (std::vector<std::string>{"chief", "worker 0", "worker 1", "ps 0", "ps 1"}));
  EXPECT_EQ(spec.task_rank, 4);
  EXPECT_EQ(spec.num_ps, 2);
  const auto worker = kx::distribute::ClusterSpec::from_tf_config(
      R"({"cluster": {"ps": ["h:5"], "worker": ["h:2", "h:3"], "chief": ["h:1"]}, "task": {"type": "worker", "index": 1}})");
  EXPECT_EQ(worker.task_rank, 2);
  const auto none = kx::distribute::ClusterSpec::from_tf_config(
      R"({"cluster": {"worker": ["h:2", "h:3"]}, "task": {"type": "worker", "index": 1}})");
  EXPECT_TRUE(none.task_addresses.empty());
  EXPECT_EQ(none.task_rank, -1);
}
