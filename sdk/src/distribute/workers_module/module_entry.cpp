// The module's C table (workers_module_api.h): every entry behind a firewall that turns exceptions
// into a status code and a message, so nothing but plain C crosses the dlopen boundary.
#include <gloo/config.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <string>

#include "distribute/workers_module/gloo/gloo_group.hpp"
#include "distribute/workers_module/mpi/mpi_engine.hpp"
#include "distribute/workers_module/peers/peer_group.hpp"
#include "distribute/workers_module_api.h"
#include "kx/error.hpp"

struct kx_workers_group {
  std::unique_ptr<kx::workers::GlooGroup> group;
};

struct kx_workers_peers {
  std::unique_ptr<kx::workers::PeerGroup> peers;
};

namespace kx::workers {
namespace {

void write_message(char* buf, size_t len, const char* text) {
  if (!buf || len == 0) return;
  std::strncpy(buf, text, len - 1);
  buf[len - 1] = '\0';
}

template <typename Body>
int32_t guarded(char* message, size_t message_len, Body&& body) {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    write_message(message, message_len, e.what());
    return static_cast<int32_t>(e.status());
  } catch (const std::bad_alloc&) {
    write_message(message, message_len, "out of memory in the multi-worker engine");
    return static_cast<int32_t>(Status::OutOfMemory);
  } catch (const std::exception& e) {
    write_message(message, message_len, e.what());
    return static_cast<int32_t>(Status::Internal);
  } catch (...) {
    write_message(message, message_len, "unknown error in the multi-worker engine");
    return static_cast<int32_t>(Status::Internal);
  }
}

GlooGroup& group_of(kx_workers_group* g) {
  require(g != nullptr && g->group != nullptr, Status::Misuse, "no multi-worker group");
  return *g->group;
}

int32_t join(const kx_workers_join_args* args, kx_workers_group** out, char* message, size_t message_len) {
  return guarded(message, message_len, [&] {
    require(args != nullptr && out != nullptr && args->struct_size >= offsetof(kx_workers_join_args, names),
            Status::Misuse, "join: bad arguments");
    require(args->timeout_ms > 0, Status::InvalidArgument, "join: the timeout must be positive");
    JoinSpec spec;
    spec.mpi = args->launcher == KX_WORKERS_LAUNCH_MPI;
    spec.rank = args->rank;
    spec.size = args->size;
    spec.timeout = std::chrono::milliseconds(args->timeout_ms);
    if (!spec.mpi) {
      require(args->addresses != nullptr && args->size > 0, Status::InvalidArgument, "join: no worker addresses");
      for (int32_t i = 0; i < args->size; ++i) {
        require(args->addresses[i] != nullptr, Status::InvalidArgument, "join: a null worker address");
        spec.addresses.emplace_back(args->addresses[i]);
      }
    }
    auto handle = std::make_unique<kx_workers_group>();
    handle->group = std::make_unique<GlooGroup>(spec);
    *out = handle.release();
  });
}

void leave(kx_workers_group* g) {
  try {
    std::unique_ptr<kx_workers_group> owned(g);  // the caller's since join released it
  } catch (...) {
    // a destructor that throws has nowhere to report; the process goes on
  }
}

void worker_address(const kx_workers_group* g, int32_t rank, char* buf, size_t buf_len) {
  try {
    write_message(buf, buf_len, g && g->group ? g->group->address(rank).c_str() : "");
  } catch (...) {
    write_message(buf, buf_len, "");
  }
}

int32_t set_timeout(kx_workers_group* g, int64_t timeout_ms, char* message, size_t message_len) {
  return guarded(message, message_len, [&] {
    require(timeout_ms > 0, Status::InvalidArgument, "the timeout must be positive");
    group_of(g).set_timeout(std::chrono::milliseconds(timeout_ms));
  });
}

int32_t all_reduce_sum(kx_workers_group* g, void* data, size_t count, int32_t dtype, char* message, size_t message_len) {
  return guarded(message, message_len, [&] { group_of(g).all_reduce_sum(data, count, dtype); });
}

int32_t broadcast(kx_workers_group* g, void* data, size_t bytes, int32_t root, char* message, size_t message_len) {
  return guarded(message, message_len, [&] { group_of(g).broadcast(data, bytes, root); });
}

int32_t barrier(kx_workers_group* g, char* message, size_t message_len) {
  return guarded(message, message_len, [&] { group_of(g).barrier(); });
}

int32_t all_gather(kx_workers_group* g, const void* data, size_t bytes, kx_workers_sink sink, void* sink_user_data,
                   char* message, size_t message_len) {
  return guarded(message, message_len, [&] {
    require(sink != nullptr, Status::Misuse, "all_gather without a sink");
    group_of(g).all_gather(data, bytes, [&](int rank, const char* blob, size_t n) {
      require(sink(sink_user_data, rank, blob, n) == 0, Status::OutOfMemory, "all_gather: the caller could not keep a blob");
    });
  });
}

PeerGroup& peers_of(kx_workers_peers* p) {
  require(p != nullptr && p->peers != nullptr, Status::Misuse, "no group of peers");
  return *p->peers;
}

int32_t peers_join(const kx_workers_join_args* args, kx_workers_peers** out, char* message, size_t message_len) {
  return guarded(message, message_len, [&] {
    require(args != nullptr && out != nullptr && args->struct_size >= sizeof(kx_workers_join_args), Status::Misuse,
            "peers_join: bad arguments");
    require(args->timeout_ms > 0, Status::InvalidArgument, "join: the timeout must be positive");
    require(args->launcher == KX_WORKERS_LAUNCH_TF_CONFIG && args->addresses != nullptr && args->size >= 2,
            Status::InvalidArgument, "a group of peers is started by TF_CONFIG, with the address of every task");
    PeerSpec spec;
    spec.rank = args->rank;
    spec.join_timeout = std::chrono::milliseconds(args->timeout_ms);
    for (int32_t i = 0; i < args->size; ++i) {
      require(args->addresses[i] != nullptr, Status::InvalidArgument, "join: a null task address");
      spec.addresses.emplace_back(args->addresses[i]);
      if (args->names) {
        require(args->names[i] != nullptr, Status::InvalidArgument, "join: a null task name");
        spec.names.emplace_back(args->names[i]);
      }
    }
    auto handle = std::make_unique<kx_workers_peers>();
    handle->peers = std::make_unique<PeerGroup>(spec);
    *out = handle.release();
  });
}

void peers_leave(kx_workers_peers* p) {
  try {
    std::unique_ptr<kx_workers_peers> owned(p);
  } catch (...) {
    // nowhere to report; the process goes on
  }
}

int32_t outcome_code(PeerGroup::Outcome o) { return o == PeerGroup::Outcome::Done ? 0 : KX_WORKERS_PENDING; }

int32_t peers_send(kx_workers_peers* p, int32_t rank, uint32_t tag, const void* data, size_t bytes, int64_t wait_ms,
                   char* message, size_t message_len) {
  int32_t code = 0;
  const int32_t failed = guarded(message, message_len, [&] {
    require(data != nullptr && wait_ms >= 0, Status::InvalidArgument, "peers_send: no data or a negative wait");
    code = outcome_code(peers_of(p).send(rank, tag, data, bytes, Clock::now() + std::chrono::milliseconds(wait_ms)));
  });
  return failed ? failed : code;
}

int32_t peers_recv(kx_workers_peers* p, int32_t rank, uint32_t tag, void* data, size_t bytes, int64_t wait_ms,
                   char* message, size_t message_len) {
  int32_t code = 0;
  const int32_t failed = guarded(message, message_len, [&] {
    require(data != nullptr && wait_ms >= 0, Status::InvalidArgument, "peers_recv: no buffer or a negative wait");
    code = outcome_code(peers_of(p).recv(rank, tag, data, bytes, Clock::now() + std::chrono::milliseconds(wait_ms)));
  });
  return failed ? failed : code;
}

int32_t peers_probe(kx_workers_peers* p, int32_t rank, int64_t window_ms, char* message, size_t message_len) {
  return guarded(message, message_len, [&] {
    require(window_ms > 0, Status::InvalidArgument, "peers_probe: the window must be positive");
    peers_of(p).probe(rank, std::chrono::milliseconds(window_ms));
  });
}

const std::string& description() {
  static const std::string text = "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
                                  "." + std::to_string(GLOO_VERSION_PATCH) + " over TCP (TF_CONFIG launches); " +
                                  MpiEngine::description();
  return text;
}

}  // namespace
}  // namespace kx::workers

extern "C" __attribute__((visibility("default"))) const kx_workers_api* kx_workers_module_v1() {
  static const kx_workers_api api = {
      KX_WORKERS_INTERFACE_VERSION,
      kx::workers::description().c_str(),
      &kx::workers::join,
      &kx::workers::leave,
      &kx::workers::worker_address,
      &kx::workers::set_timeout,
      &kx::workers::all_reduce_sum,
      &kx::workers::broadcast,
      &kx::workers::barrier,
      &kx::workers::all_gather,
      &kx::workers::peers_join,
      &kx::workers::peers_leave,
      &kx::workers::peers_send,
      &kx::workers::peers_recv,
      &kx::workers::peers_probe,
  };
  return &api;
}
