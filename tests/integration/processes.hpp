// Worker processes for the multi-process tests: free loopback ports, TF_CONFIG texts, spawning a
// program with a clean environment, waiting with a deadline, killing.
#pragma once
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kx::test_processes {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline bool have_module() { return fs::exists(KX_WORKERS_MODULE_PATH); }

inline std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A loopback port nobody listens on now (the kernel's choice; a race with other programs is unlikely).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

inline std::vector<std::string> loopback_addresses(int n) {
  std::vector<std::string> a;
  for (int i = 0; i < n; ++i) a.push_back("127.0.0.1:" + std::to_string(free_port()));
  return a;
}

inline std::string json_list(const std::vector<std::string>& items) {
  std::string s = "[";
  for (const std::string& i : items) s += (s.size() > 1 ? ", \"" : "\"") + i + "\"";
  return s + "]";
}

inline std::string tf_config(const std::vector<std::string>& workers, const std::string& type, int index,
                      const std::vector<std::string>& chief = {}) {
  std::string cluster = "\"worker\": " + json_list(workers);
  if (!chief.empty()) cluster = "\"chief\": " + json_list(chief) + ", " + cluster;
  return "{\"cluster\": {" + cluster + "}, \"task\": {\"type\": \"" + type + "\", \"index\": " + std::to_string(index) + "}}";
}

// A child process whose output goes to `log`, with the test's environment less any cluster of its
// own, plus `env`.
inline pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& env, const fs::path& log) {
  const auto given = [&](const std::string& var) {
    for (const std::string& e : env)
      if (var.compare(0, var.find('=') + 1, e, 0, e.find('=') + 1) == 0) return true;
    return false;
  };
  std::vector<std::string> environment = env;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    if (var.rfind("TF_CONFIG=", 0) == 0 || var.rfind("OMPI_", 0) == 0 || given(var)) continue;
    environment.push_back(var);
  }
  const std::string module = std::string("KX_WORKERS_MODULE=") + KX_WORKERS_MODULE_PATH;
  if (!given(module)) environment.push_back(module);
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  for (const std::string& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::fopen(log_path.c_str(), "w");
    if (out) {
      dup2(fileno(out), 1);
      dup2(fileno(out), 2);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// The exit code, -signal when killed, or nothing when the process is still running at the deadline.
inline std::optional<int> wait_exit(pid_t pid, Clock::time_point deadline) {
  if (pid <= 0) return -1000;  // never waitpid(-1): that reaps any child
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    if (r < 0) return -1000;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

// Kills and reaps one child started by spawn(). Only a real child's id: kill() with 0 or -1 would
// signal this process's group or every process there is.
inline void kill_child(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// ASAN_OPTIONS with the leak check off, for a launch through mpirun: Open MPI keeps allocations past
// MPI_Finalize (its own, not kx's). Other launches keep the check.
inline std::string asan_options_without_leak_check() {
  const char* asan = std::getenv("ASAN_OPTIONS");
  return std::string("ASAN_OPTIONS=") + (asan && *asan ? std::string(asan) + ":" : "") + "detect_leaks=0";
}

}  // namespace kx::test_processes
