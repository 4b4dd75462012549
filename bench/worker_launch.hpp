// How the multi-worker benches start their workers (copies of the bench itself): with TF_CONFIG on
// loopback, or as the ranks of an mpirun job. Header-only, for the programs in bench/.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace kx::bench {

// This program's path, for exec after fork (argv[0] may be relative); empty when unknown.
inline std::string own_path() {
  char exe[4096] = {};
  return readlink("/proc/self/exe", exe, sizeof exe - 1) > 0 ? std::string(exe) : std::string();
}

// TF_CONFIG of worker `index` of a cluster of workers at `addresses` ("host:port").
inline std::string worker_tf_config(const std::vector<std::string>& addresses, int index) {
  std::string list;
  for (const std::string& a : addresses) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  return "{\"cluster\": {\"worker\": [" + list + "]}, \"task\": {\"type\": \"worker\", \"index\": " +
         std::to_string(index) + "}}";
}

// The command that runs `program_args` (program first) as `ranks` ranks of an mpirun job, root allowed.
inline std::vector<std::string> under_mpirun(const std::string& mpirun, int ranks,
                                             const std::vector<std::string>& program_args) {
  std::vector<std::string> args{mpirun, "--oversubscribe", "--allow-run-as-root", "-np", std::to_string(ranks)};
  args.insert(args.end(), program_args.begin(), program_args.end());
  return args;
}

// Forks and execs args (args[0] the program's path). env: "NAME=VALUE" to set, "NAME" to unset.
// stdout_fd >= 0: the child's standard output. Returns the child's pid, or -1.
inline pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& env, int stdout_fd = -1) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos) unsetenv(e.c_str());
    else setenv(e.substr(0, eq).c_str(), e.c_str() + eq + 1, 1);
  }
  if (stdout_fd >= 0) dup2(stdout_fd, 1);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// The environment an mpirun job needs here: no TF_CONFIG (the ranks come from Open MPI), root allowed.
inline const std::vector<std::string>& mpirun_environment() {
  static const std::vector<std::string> env{"TF_CONFIG", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  return env;
}

// Waits for every child; true when each was started and exited with status 0.
inline bool wait_all(const std::vector<pid_t>& children) {
  bool ok = true;
  for (const pid_t pid : children) {
    int status = 0;
    ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
  }
  return ok;
}

}  // namespace kx::bench
