// One worker of a multi-worker group, started N times by test_worker_group.cpp (with TF_CONFIG) or by
// mpirun. It joins the group its environment describes and runs one scenario:
//   sums      all-reduce of floats and doubles against the float64 sum, broadcast, barrier, all_gather;
//             each result is also written to OUT_DIR/<name>-rank<R>.bin for bitwise comparisons
//   mismatch  calls that differ across workers must fail on every worker, and the group go on
//   steps     all-reduces until one fails (another worker is killed or stopped by the test)
//   join      joins and leaves (the test checks join errors)
// Usage: kx_worker_group_worker SCENARIO OUT_DIR [TIMEOUT_MS]. Prints "ok" and exits 0 on success;
// a kx::Error is printed as "error status=S: message" with exit code 3; a failed check exits 1.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distribute/cluster_spec.hpp"
#include "distribute/worker_group.hpp"
#include "kx/error.hpp"

namespace {

using kx::distribute::WorkerGroup;
using Clock = std::chrono::steady_clock;

std::string g_out_dir;

[[noreturn]] void check_failed(const std::string& what) {
  std::printf("check failed: %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

void check(bool ok, const std::string& what) {
  if (!ok) check_failed(what);
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Worker `rank`'s i-th input: signs and magnitudes (2^-8 .. 2^8) that make the summation order show.
double input(int rank, size_t i) {
  const uint64_t h = mix(static_cast<uint64_t>(rank) * 0x100000001b3ull + i);
  const double unit = static_cast<double>(h >> 11) * 0x1.0p-53;
  return (2 * unit - 1) * std::ldexp(1.0, static_cast<int>(h % 17) - 8);
}

void write_bytes(const std::string& name, int rank, const void* data, size_t bytes) {
  std::ofstream f(g_out_dir + "/" + name + "-rank" + std::to_string(rank) + ".bin", std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

template <typename T>
void check_sum(WorkerGroup& group, size_t n) {
  std::vector<T> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(input(group.rank(), i));
  group.all_reduce_sum(data.data(), n);
  const double eps = std::numeric_limits<T>::epsilon();
  for (size_t i = 0; i < n; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < group.size(); ++r) {
      const double x = static_cast<T>(input(r, i));
      exact += x;
      magnitude += std::fabs(x);
    }
    const double error = std::fabs(static_cast<double>(data[i]) - exact);
    if (error > 2.0 * group.size() * eps * magnitude)
      check_failed("sum of " + std::to_string(n) + " values, element " + std::to_string(i) + ": " +
                   std::to_string(data[i]) + " instead of " + std::to_string(exact));
  }
  write_bytes(std::string(sizeof(T) == 4 ? "f32-" : "f64-") + std::to_string(n), group.rank(), data.data(),
              n * sizeof(T));
}

void sums(WorkerGroup& group) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{262147}}) {
    check_sum<float>(group, n);
    check_sum<double>(group, n);
  }

  // Broadcast from the last worker, then a larger one from the chief.
  for (const auto& [root, bytes] : {std::pair<int, size_t>{group.size() - 1, 1000}, {0, 3u << 20}}) {
    std::vector<unsigned char> data(bytes, 0);
    if (group.rank() == root)
      for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>(mix(i + 7 * root) & 0xff);
    group.broadcast(data.data(), bytes, root);
    for (size_t i = 0; i < bytes; ++i)
      check(data[i] == static_cast<unsigned char>(mix(i + 7 * root) & 0xff), "broadcast byte " + std::to_string(i));
  }

  // Barrier: worker r arrives r * 150 ms late; nobody may leave before the last has arrived.
  std::this_thread::sleep_for(std::chrono::milliseconds(150 * group.rank()));
  const int64_t arrived = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
  group.barrier();
  const int64_t left = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
  const std::vector<std::string> arrivals = group.all_gather(std::to_string(arrived));
  for (const std::string& a : arrivals) check(left >= std::stoll(a), "left the barrier before worker arrival " + a);

  // All-gather of blobs of different lengths (the chief's is empty).
  const auto blob = [](int r) { return r == 0 ? std::string() : "worker " + std::to_string(r) + std::string(3 * r, 'x'); };
  const std::vector<std::string> blobs = group.all_gather(blob(group.rank()));
  check(static_cast<int>(blobs.size()) == group.size(), "all_gather size");
  for (int r = 0; r < group.size(); ++r) check(blobs[r] == blob(r), "all_gather blob " + std::to_string(r));
}

// Calls that differ across workers: an InvalidArgument on every worker, after which the group works.
void mismatch(WorkerGroup& group) {
  const auto expect_invalid = [](const char* what, auto&& call, const char* needle) {
    try {
      call();
    } catch (const kx::Error& e) {
      std::printf("%s: %s\n", what, e.what());
      check(e.status() == kx::Status::InvalidArgument, std::string(what) + ": status " +
                                                           std::to_string(static_cast<int>(e.status())));
      check(std::strstr(e.what(), needle) != nullptr, std::string(what) + ": message lacks " + needle);
      return;
    }
    check_failed(std::string(what) + " did not fail");
  };
  std::vector<float> floats(100 + group.rank(), 1.0f);
  expect_invalid("sizes", [&] { group.all_reduce_sum(floats.data(), floats.size()); }, "all_reduce_sum of 101 float32");
  std::vector<double> doubles(100, 1.0);
  expect_invalid(
      "types",
      [&] {
        if (group.rank() == 0) group.all_reduce_sum(doubles.data(), 50);  // 400 bytes either way
        else group.all_reduce_sum(floats.data(), 100);
      },
      "float64");
  char byte = 0;
  expect_invalid("roots", [&] { group.broadcast(&byte, 1, group.rank()); }, "broadcast of 1 bytes from worker 1");
  expect_invalid("kinds", [&] { group.rank() == 0 ? group.barrier() : group.broadcast(&byte, 1, 0); }, "barrier");
  expect_invalid("root out of range", [&] { group.broadcast(&byte, 1, group.size()); }, "not one of the");
  // The same calls everywhere again: the group is still usable.
  std::vector<float> ones(10, 1.0f);
  group.all_reduce_sum(ones.data(), ones.size());
  check(ones[9] == static_cast<float>(group.size()), "all_reduce_sum after the mismatches");
}

// All-reduces until one fails; the failure must then repeat on the next call at once.
void steps(WorkerGroup& group) {
  std::vector<float> data(1000);
  for (int64_t step = 0;; ++step) {
    std::fill(data.begin(), data.end(), 1.0f);
    try {
      group.all_reduce_sum(data.data(), data.size());
    } catch (const kx::Error& e) {
      const Clock::time_point again = Clock::now();
      try {
        group.barrier();
      } catch (const kx::Error& repeated) {
        check(repeated.status() == e.status() && std::string(repeated.what()) == e.what(), "the failure is not kept");
        check(Clock::now() - again < std::chrono::milliseconds(100), "a failed group waited again");
        throw;
      }
      check_failed("the group worked again after a failure");
    }
    check(data[0] == static_cast<float>(group.size()), "step sum");
    std::printf("step %lld\n", static_cast<long long>(step));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s sums|mismatch|steps|join OUT_DIR [TIMEOUT_MS]\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  g_out_dir = argv[2];
  const std::chrono::milliseconds timeout(argc > 3 ? std::atoll(argv[3]) : 60000);
  try {
    const kx::distribute::ClusterSpec spec = kx::distribute::ClusterSpec::from_environment();
    // "steps" joins with the default timeout and then sets its own, as a strategy's set_timeout does.
    const std::unique_ptr<WorkerGroup> group = WorkerGroup::join(spec, scenario == "steps" ? WorkerGroup::kDefaultTimeout : timeout);
    if (scenario == "steps") group->set_timeout(timeout);
    std::printf("joined as %s of %d\n", group->describe_worker(group->rank()).c_str(), group->size());
    std::fflush(stdout);
    if (scenario == "sums") sums(*group);
    else if (scenario == "mismatch") mismatch(*group);
    else if (scenario == "steps") steps(*group);
    else if (scenario != "join") check_failed("unknown scenario " + scenario);
    // Leave together: nobody closes its connections while another still reads from them.
    group->barrier();
  } catch (const kx::Error& e) {
    std::printf("error status=%d: %s\n", static_cast<int>(e.status()), e.what());
    std::fflush(stdout);
    return 3;
  }
  std::printf("ok\n");
  return 0;
}
