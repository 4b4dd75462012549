#include "distribute/workers_module/gloo/call_agreement.hpp"

#include "distribute/workers_module_api.h"
#include "kx/error.hpp"

namespace kx::workers {
namespace {

bool same_call(const CallHeader& a, const CallHeader& b) {
  const bool sizes_must_match = a.kind != static_cast<uint32_t>(CallKind::AllGather);
  return a.call == b.call && a.kind == b.kind && a.dtype == b.dtype && a.root == b.root &&
         (!sizes_must_match || a.bytes == b.bytes);
}

}  // namespace

std::string describe_call(const CallHeader& h) {
  const std::string bytes = std::to_string(h.bytes) + " bytes";
  switch (static_cast<CallKind>(h.kind)) {
    case CallKind::Join: return "join";
    case CallKind::AllReduceSum: {
      const bool f32 = h.dtype == KX_WORKERS_FLOAT32;
      const uint64_t width = f32 ? 4 : 8;
      return "all_reduce_sum of " + std::to_string(h.bytes / width) + (f32 ? " float32" : " float64") + " values";
    }
    case CallKind::Broadcast: return "broadcast of " + bytes + " from worker " + std::to_string(h.root);
    case CallKind::Barrier: return "barrier";
    case CallKind::AllGather: return "all_gather";
  }
  return "unknown call " + std::to_string(h.kind);
}

void require_same_calls(const std::vector<CallHeader>& headers, const std::function<std::string(int)>& name) {
  bool same = true;
  for (const CallHeader& h : headers) same = same && same_call(h, headers.front());
  if (same) return;
  std::string message = "the workers made different calls (every worker must make the same collective calls "
                        "in the same order, with the same sizes):";
  for (size_t i = 0; i < headers.size(); ++i)
    message += (i ? "; " : " ") + name(static_cast<int>(i)) + ": " + describe_call(headers[i]) + " (call " +
               std::to_string(headers[i].call) + ")";
  fail(Status::InvalidArgument, message);
}

}  // namespace kx::workers
