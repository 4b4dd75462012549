#include "config/env_switches.hpp"

#include <array>
#include <cstdlib>
#include <vector>

#include "kx/error.hpp"

namespace kx::config {
namespace {

constexpr std::array kSwitches{
    // kx's own: each overrides a strategy setting, or says where a module is, or picks a path of the
    // multi-worker engines.
    Switch{"KX_STEP_GRAPHS", SwitchKind::Choice, "0|off|1|on|emulate", "the strategy's set_step_graphs",
           "0 / off: every step runs kernel by kernel; 1 / on: steps recorded as CUDA graphs where they can "
           "be; emulate: CPU backends wrapped in a recorder with graph semantics (tests)"},
    Switch{"KX_DATA_STREAMING", SwitchKind::Choice, "always", "the strategy's set_data_streaming",
           "always: datasets streamed to the device batch by batch even when they would fit (tests)"},
    Switch{"KX_CUDNN", SwitchKind::Flag, kFlagValues, "the strategy's set_cudnn, on by default",
           "cuDNN for GPU convolutions (1) or im2col and cuBLASLt (0)"},
    Switch{"KX_CUDA_MODULE", SwitchKind::Path, "the path of libkx_cuda.so", "libkx_cuda.so beside libkx",
           "which CUDA backend module libkx loads"},
    Switch{"KX_WORKERS_MODULE", SwitchKind::Path, "the path of libkx_workers.so", "libkx_workers.so beside libkx",
           "which cross-process engine module (Gloo, MPI) libkx loads"},
    Switch{"KX_HDF5_LIBRARY", SwitchKind::Path, "the path of libhdf5", "libhdf5_serial.so.103, libhdf5.so.103, ...",
           "which libhdf5 (1.10 or later) the HDF5 reader loads for Keras .h5 and .keras files"},
    Switch{"KX_HDF5_READER", SwitchKind::Path, "the path of kx-hdf5-reader", "kx-hdf5-reader beside libkx",
           "which HDF5 reader program libkx runs to read Keras .h5 and .keras files"},
    Switch{"KX_NCCL_ACROSS_WORKERS", SwitchKind::Flag, kFlagValues, "NCCL when every worker can use it",
           "multi-worker GPU workers: 0, sums through host memory; 1, NCCL between their GPUs, required (an "
           "error where a worker cannot use it)"},
    Switch{"KX_MPI_SHARED_MEMORY", SwitchKind::Flag, kFlagValues,
           "1: a shared-memory window when every worker is on one host",
           "under mpirun, the workers of one host sum through a shared-memory window (1) or point to point "
           "as across hosts (0); the workers of a host must agree"},
    Switch{"KX_SHARED_MEMORY", SwitchKind::Flag, kFlagValues,
           "1: POSIX shared memory when every worker is on one host",
           "TF_CONFIG workers that find themselves on one host sum through shared memory (1) or Gloo's TCP "
           "connections as across hosts (0)"},
    // The engines': read where the engine code is, as those engines define them.
    Switch{"GLOO_SOCKET_IFNAME", SwitchKind::Engine, "a network interface's name",
           "the address the host name resolves to", "the network interface TF_CONFIG workers use (Gloo's)"},
    Switch{"OMPI_COMM_WORLD_LOCAL_SIZE", SwitchKind::Engine, "a number of workers, set by mpirun",
           "workers on other hosts", "how many of an mpirun job's workers run on this host (Open MPI's)"},
};

// Every flag takes the same values; no name is in the table twice.
constexpr bool table_is_consistent() {
  for (size_t i = 0; i < kSwitches.size(); ++i) {
    if (kSwitches[i].kind == SwitchKind::Flag && std::string_view(kSwitches[i].values) != kFlagValues) return false;
    for (size_t j = 0; j < i; ++j)
      if (std::string_view(kSwitches[i].name) == kSwitches[j].name) return false;
  }
  return true;
}
static_assert(table_is_consistent(), "a flag with values of its own, or a name listed twice");

std::vector<std::string_view> values_of(const Switch& s) {
  std::vector<std::string_view> out;
  std::string_view rest = s.values;
  for (size_t bar; (bar = rest.find('|')) != std::string_view::npos; rest.remove_prefix(bar + 1))
    out.push_back(rest.substr(0, bar));
  out.push_back(rest);
  return out;
}

// "a, b or c"
std::string listed(const std::vector<std::string_view>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += i + 1 == values.size() ? " or " : ", ";
    s += values[i];
  }
  return s;
}

const Switch& switch_of_kind(std::string_view name, SwitchKind kind) {
  const Switch& s = find_switch(name);
  require(s.kind == kind, Status::Internal, std::string(name) + " is read as another kind of switch than its table says");
  return s;
}

// The switch's value when set and not empty.
const char* setting(const Switch& s) {
  const char* v = std::getenv(s.name);
  return v && *v ? v : nullptr;
}

// The value, one of the switch's, as the table spells it; an InvalidArgument error when it is none.
std::string_view taken_value(const Switch& s, std::string_view v) {
  const std::vector<std::string_view> values = values_of(s);
  for (std::string_view taken : values)
    if (taken == v) return taken;
  fail(Status::InvalidArgument, std::string(s.name) + "=" + std::string(v) + ": expected " + listed(values) +
                                    ", or unset (" + s.unset + ")");
}

}  // namespace

std::span<const Switch> switches() { return kSwitches; }

const Switch& find_switch(std::string_view name) {
  for (const Switch& s : kSwitches)
    if (name == s.name) return s;
  fail(Status::Internal, std::string(name) + " is not in the table of environment switches (config/env_switches.cpp)");
}

std::optional<std::string_view> choice(std::string_view name) {
  const Switch& s = switch_of_kind(name, SwitchKind::Choice);
  const char* v = setting(s);
  if (!v) return std::nullopt;
  return taken_value(s, v);
}

std::optional<bool> flag(std::string_view name) {
  const Switch& s = switch_of_kind(name, SwitchKind::Flag);
  const char* v = setting(s);
  if (!v) return std::nullopt;
  const std::string_view taken = taken_value(s, v);
  return taken == "1" || taken == "on";
}

std::string path(std::string_view name) {
  const char* v = setting(switch_of_kind(name, SwitchKind::Path));
  return v ? v : "";
}

}  // namespace kx::config
