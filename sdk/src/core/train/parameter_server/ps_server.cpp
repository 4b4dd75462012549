#include "core/train/parameter_server/ps_server.hpp"

#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/train/parameter_server/ps_shard.hpp"
#include "kx/error.hpp"

namespace kx::distribute {
namespace {

PsHeader header(PsKind kind) {
  PsHeader h;
  h.kind = static_cast<uint32_t>(kind);
  return h;
}

class Service {
 public:
  Service(PsCluster& c, int threads) : c_(c), shard_(threads) {
    for (int i = 0; i < c_.num_workers(); ++i) reply_params_[c_.worker_rank(i)];
  }

  void serve_chief() {
    try {
      for (;;) {
        PsHeader request;
        std::vector<char> payload;
        c_.next_request(0, request, payload, {});
        switch (static_cast<PsKind>(request.kind)) {
          case PsKind::Init: {
            ShardState s = ShardState::decode(payload);
            std::lock_guard<std::mutex> lock(mutex_);
            shard_.reset(std::move(s));
            break;
          }
          case PsKind::PullState: {
            std::vector<char> bytes;
            {
              std::lock_guard<std::mutex> lock(mutex_);
              bytes = shard_.state().encode();
            }
            PsHeader h = header(PsKind::Ok);
            h.payload = bytes.size();
            c_.reply(0, h, bytes.data());
            continue;
          }
          case PsKind::End:
            c_.reply(0, header(PsKind::Ok), nullptr);
            return;
          default:
            c_.reply_error(0, Status::Misuse, "the chief sent a ps a request it does not serve");
            continue;
        }
        c_.reply(0, header(PsKind::Ok), nullptr);
      }
    } catch (...) {
      chief_failure_ = std::current_exception();
      chief_lost_ = true;
    }
  }

  void serve_worker(int rank) {
    try {
      PsHeader request;
      std::vector<char> payload;  // reused: a gradient a step
      for (;;) {
        if (!c_.next_request(rank, request, payload, [&] { return chief_lost_.load(); })) return;
        if (!answer(rank, request, payload)) return;
      }
    } catch (const Error&) {
      // A lost worker is dropped; the chief learns it on its own and gives its batches to the others.
    }
  }

  void rethrow_chief_failure() {
    if (chief_failure_) std::rethrow_exception(chief_failure_);
  }

 private:
  // One request of a worker; false once it said goodbye.
  bool answer(int rank, const PsHeader& request, const std::vector<char>& payload) {
    PsHeader h = header(PsKind::Ok);
    switch (static_cast<PsKind>(request.kind)) {
      case PsKind::Pull: {
        std::vector<float>& params = reply_params_.at(rank);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!shard_.ready()) {
            c_.reply_error(rank, Status::Misuse, "a worker pulled parameters before the chief set them");
            return true;
          }
          params = shard_.state().params;
        }
        h.payload = params.size() * sizeof(float);
        c_.reply(rank, h, params.data());
        return true;
      }
      case PsKind::Push: {
        try {
          std::lock_guard<std::mutex> lock(mutex_);
          h.a = shard_.apply(reinterpret_cast<const float*>(payload.data()), payload.size() / sizeof(float),
                             static_cast<float>(request.x));
        } catch (const Error& e) {
          c_.reply_error(rank, e.status(), e.what());
          return true;
        }
        c_.reply(rank, h, nullptr);
        return true;
      }
      case PsKind::Bye:
        c_.reply(rank, h, nullptr);
        return false;
      default:
        c_.reply_error(rank, Status::Misuse, "a worker sent a ps a request it does not serve");
        return true;
    }
  }

  PsCluster& c_;
  std::map<int, std::vector<float>> reply_params_;  // per worker rank, reused; filled before the threads start
  std::mutex mutex_;
  PsShard shard_;
  std::atomic<bool> chief_lost_{false};
  std::exception_ptr chief_failure_;
};

}  // namespace

void serve_parameters(PsCluster& cluster, int threads) {
  Service service(cluster, threads);
  std::vector<std::thread> workers;
  for (int i = 0; i < cluster.num_workers(); ++i)
    workers.emplace_back([&service, rank = cluster.worker_rank(i)] { service.serve_worker(rank); });
  service.serve_chief();
  for (std::thread& t : workers) t.join();
  service.rethrow_chief_failure();
}

}  // namespace kx::distribute
