// Before each operation the workers swap a small description of the call they are making, so that
// calls that do not match (another size, kind, root or order) are an InvalidArgument on every worker
// instead of Gloo reading a stream it does not expect.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kx::workers {

enum class CallKind : uint32_t { Join = 1, AllReduceSum = 2, Broadcast = 3, Barrier = 4, AllGather = 5 };

struct CallHeader {
  uint64_t call = 0;  // the group's count of operations so far
  uint32_t kind = 0;  // CallKind
  int32_t dtype = -1;  // all_reduce_sum: KX_WORKERS_FLOAT32 / FLOAT64
  int64_t root = -1;   // broadcast
  uint64_t bytes = 0;  // the buffer (all_gather: this worker's blob, which may differ)
};
static_assert(sizeof(CallHeader) == 32, "the header travels as raw bytes between builds of one version");

// "all_reduce_sum of 100 float32 values", for messages.
std::string describe_call(const CallHeader& h);

// InvalidArgument, with the same message on every worker, unless every header matches worker 0's;
// `name(rank)` names a worker ("worker 1 (host:port)").
void require_same_calls(const std::vector<CallHeader>& headers, const std::function<std::string(int)>& name);

}  // namespace kx::workers
