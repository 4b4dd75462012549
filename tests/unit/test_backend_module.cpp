// The C table between libkx and a backend module, checked without a GPU: CPU backends behind the
// module's side of the table (the code the CUDA module is built with) and libkx's adapter in front of
// it compute bit for bit what the CPU backend computes when called directly; errors cross as a status
// and a message; recorded steps, transfer rings and collectives cross as handles; and the loader
// refuses a table of another interface.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda_module.hpp"
#include "backend/module/module_abi.hpp"
#include "backend/module/module_backend.hpp"
#include "backend/module/module_export.hpp"
#include "backend/recording_backend.hpp"
#include "distribute/collective.hpp"
#include "kx/error.hpp"
#include "kx/tensor.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using backend::Backend;
using backend::BackendOptions;
using backend::Op;
using backend::Trans;
using backend::Window2d;
namespace module = backend::module;

// A module of two "devices": 0 is the CPU backend, 1 the CPU backend wrapped in the recorder, which
// records steps as a GPU does; its collective is the in-process one.
int32_t cpu_device_count(char*, size_t) { return 2; }
void describe_cpu(int32_t index, char* buf, size_t buf_len) {
  std::snprintf(buf, buf_len, "CPU behind the table %d", index);
}
int32_t create_cpu_backend(module::ModuleError* error, int32_t index, const BackendOptions* options,
                           module::BackendHandle** backend) {
  return module::guarded(error, [&] {
    require(index == 0 || index == 1, Status::Device, "no device " + std::to_string(index));
    std::unique_ptr<Backend> cpu = backend::make_cpu_backend(options->cpu_threads, options->cpu_gemm);
    *backend = module::to_handle(index == 1 ? backend::make_recording_backend(std::move(cpu)) : std::move(cpu));
  });
}
int32_t create_in_process_collective(module::ModuleError* error, module::BackendHandle* const*, int32_t count,
                                     module::CollectiveHandle** collective) {
  return module::guarded(error,
                         [&] { *collective = module::to_handle(distribute::make_in_process_collective(count)); });
}
constexpr module::ModuleTable kCpuModule =
    module::make_module_table(&cpu_device_count, &describe_cpu, &create_cpu_backend, &create_in_process_collective);

// NCCL between workers, faked: an id of 0x5a bytes, and a collective (the identity, one worker's sum)
// made only from the arguments the test passes, so that each is seen to cross.
int32_t fake_nccl_available(char*, size_t) { return 1; }
int32_t fake_nccl_id(module::ModuleError* error, char* id, size_t id_len) {
  return module::guarded(error, [&] { std::memset(id, 0x5a, id_len); });
}
int32_t fake_worker_collective(module::ModuleError* error, module::BackendHandle* replica, const char* id, size_t id_len,
                               int32_t rank, int32_t size, int64_t timeout_ms, module::CollectiveHandle** collective) {
  return module::guarded(error, [&] {
    require(id_len == module::kNcclIdBytes && id[0] == 0x5a && id[id_len - 1] == 0x5a, Status::InvalidArgument,
            "the id did not cross");
    require(rank == 1 && size == 2 && timeout_ms == 1234, Status::InvalidArgument,
            "rank " + std::to_string(rank) + " of " + std::to_string(size) + ", " + std::to_string(timeout_ms) + " ms");
    module::backend_of(replica);
    *collective = module::to_handle(distribute::make_in_process_collective(1));
  });
}
constexpr module::ModuleTable kCpuModuleWithNccl =
    module::make_module_table(&cpu_device_count, &describe_cpu, &create_cpu_backend, &create_in_process_collective,
                              &fake_nccl_available, &fake_nccl_id, &fake_worker_collective);

constexpr BackendOptions kOneThread{.cpu_threads = 1};

// The same call on the CPU backend directly and through the table, each on its own copy of the
// inputs; every output must match bit for bit.
struct Both {
  std::unique_ptr<Backend> direct = backend::make_cpu_backend(1);
  std::unique_ptr<Backend> crossed = module::make_module_backend(kCpuModule, 0, kOneThread);
};

TEST(BackendModule, KernelsThroughTheTableComputeWhatTheCpuComputes) {
  Both b;
  const int64_t M = 37, N = 29, K = 41;
  const std::vector<float> A = test::random_floats(M * K, 1), B = test::random_floats(K * N, 2),
                           bias = test::random_floats(N, 3);
  std::vector<float> c1(M * N), c2(M * N);
  const backend::Epilogue ep{bias.data(), Activation::Relu};
  b.direct->gemm(Trans::No, Trans::No, M, N, K, A.data(), K, B.data(), N, 0.0f, c1.data(), N, ep);
  b.crossed->gemm(Trans::No, Trans::No, M, N, K, A.data(), K, B.data(), N, 0.0f, c2.data(), N, ep);
  EXPECT_EQ(c1, c2);
  b.direct->activation_forward(Activation::Softmax, M, N, c1.data());
  b.crossed->activation_forward(Activation::Softmax, M, N, c2.data());
  EXPECT_EQ(c1, c2);

  // A loss with its gradient, and the running sums it leaves.
  std::vector<float> labels(M);
  for (int64_t r = 0; r < M; ++r) labels[r] = static_cast<float>(r % N);
  const backend::LossSpec spec{LossKind::SparseCategoricalCrossentropy, false, AccuracyKind::SparseCategorical};
  std::vector<float> d1(M * N), d2(M * N);
  const std::vector<float> weights = test::random_floats(M, 5, 0.0f, 2.0f);
  b.direct->loss(spec, M, N, c1.data(), labels.data(), 1, weights.data(), 0.5f, d1.data());
  b.crossed->loss(spec, M, N, c2.data(), labels.data(), 1, weights.data(), 0.5f, d2.data());
  EXPECT_EQ(d1, d2);
  const backend::LossSums s1 = b.direct->take_loss_sums(), s2 = b.crossed->take_loss_sums();
  EXPECT_EQ(s1.loss, s2.loss);
  EXPECT_EQ(s1.correct, s2.correct);
  EXPECT_EQ(s1.weight, s2.weight);
  EXPECT_GT(s1.weight, 0.0);
  EXPECT_EQ(b.crossed->take_loss_sums().loss, 0.0);
  // Sums handed back are the running sums again, and the next loss adds to them.
  b.crossed->put_back_loss_sums(s2);
  b.direct->put_back_loss_sums(s1);
  b.direct->loss(spec, M, N, c1.data(), labels.data(), 1, weights.data(), 0.5f, d1.data());
  b.crossed->loss(spec, M, N, c2.data(), labels.data(), 1, weights.data(), 0.5f, d2.data());
  const backend::LossSums t1 = b.direct->take_loss_sums(), t2 = b.crossed->take_loss_sums();
  EXPECT_EQ(t2.loss, t1.loss);
  EXPECT_EQ(t2.weight, 2 * s1.weight);

  // A window op (its geometry crosses as a pointer to the struct) and Adam over an arena.
  Window2d g;
  g.in_h = 9, g.in_w = 7, g.channels = 3, g.k_h = g.k_w = 3, g.stride_h = g.stride_w = 2;
  g.out_h = 4, g.out_w = 3;
  const int64_t rows = 2;
  const std::vector<float> x = test::random_floats(rows * g.in_h * g.in_w * g.channels, 4);
  std::vector<float> col1(rows * g.out_h * g.out_w * g.patch()), col2(col1.size());
  b.direct->im2col(g, rows, x.data(), col1.data());
  b.crossed->im2col(g, rows, x.data(), col2.data());
  EXPECT_EQ(col1, col2);
  const int64_t n = 1000;
  std::vector<float> p1 = test::random_floats(n, 5), p2 = p1, m1(n), m2(n), v1(n), v2(n);
  const std::vector<float> grad = test::random_floats(n, 6);
  const float lr_t = 0.01f;
  for (int step = 0; step < 3; ++step) {
    b.direct->adam_update(n, p1.data(), grad.data(), m1.data(), v1.data(), &lr_t, 0.1f, 0.001f, 1e-7f, nullptr);
    b.crossed->adam_update(n, p2.data(), grad.data(), m2.data(), v2.data(), &lr_t, 0.1f, 0.001f, 1e-7f, nullptr);
  }
  EXPECT_EQ(p1, p2);
}

TEST(BackendModule, AnErrorCrossesAsItsStatusAndMessage) {
  Both b;
  std::vector<float> A(16), B(16), C(16), db(4);
  backend::Epilogue with_bias_grad;
  with_bias_grad.bias_grad = db.data();
  // The CPU refuses a bias gradient beside a transposed B.
  auto gemm = [&](Backend& be) {
    be.gemm(Trans::No, Trans::Yes, 4, 4, 4, A.data(), 4, B.data(), 4, 0.0f, C.data(), 4, with_bias_grad);
  };
  std::string direct_message, crossed_message;
  try {
    gemm(*b.direct);
    FAIL() << "the CPU backend accepted the call";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Internal);
    direct_message = e.what();
  }
  try {
    gemm(*b.crossed);
    FAIL() << "the call through the table was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Internal);
    crossed_message = e.what();
  }
  EXPECT_FALSE(direct_message.empty());
  EXPECT_EQ(crossed_message, direct_message);

  // No memory: OutOfMemory, with the size in the message.
  try {
    b.crossed->allocate(size_t{1} << 62);
    FAIL() << "2^62 bytes were allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find(std::to_string(size_t{1} << 62)), std::string::npos) << e.what();
  }
  // A device the module does not have.
  EXPECT_EQ(test::status_of([] { module::make_module_backend(kCpuModule, 7, kOneThread); }), Status::Device);
}

TEST(BackendModule, QueriesMemoryAndTransferRingsCrossTheTable) {
  Both b;
  Window2d g;
  g.in_h = g.in_w = 8, g.channels = 3, g.k_h = g.k_w = 3, g.out_h = g.out_w = 6;
  for (Op op : {Op::gemm, Op::loss, Op::conv2d_forward, Op::conv2d_backward, Op::gather_rows})
    EXPECT_EQ(b.crossed->supports({op, g}), b.direct->supports({op, g})) << static_cast<int>(op);
  EXPECT_FALSE(b.crossed->supports({Op::conv2d_forward, g}));
  EXPECT_EQ(b.crossed->gemm_kernel_name(), b.direct->gemm_kernel_name());
  EXPECT_TRUE(b.crossed->host_accessible());

  const std::vector<float> host = test::random_floats(64, 7);
  backend::DeviceBuffer buf = b.crossed->allocate(host.size() * sizeof(float));
  for (int64_t i = 0; i < buf.floats(); ++i) ASSERT_EQ(buf.data()[i], 0.0f) << "zero-filled";
  b.crossed->to_device(host.data(), host.size() * sizeof(float), buf.data());
  std::vector<float> back(host.size());
  b.crossed->to_host(buf.data(), back.size() * sizeof(float), back.data());
  EXPECT_EQ(back, host);
  b.crossed->fill_zero(8 * sizeof(float), buf.data());
  b.crossed->synchronize();
  EXPECT_EQ(buf.data()[7], 0.0f);
  EXPECT_EQ(buf.data()[8], host[8]);

  const size_t slot_bytes = 16 * sizeof(float);
  std::unique_ptr<backend::TransferRing> ring = b.crossed->make_transfer_ring(2, slot_bytes);
  ring->wait_host_writable(1);
  std::memcpy(ring->host_slot(1), host.data(), slot_bytes);
  ring->upload(1, slot_bytes);
  ring->release(1);
  const float* device_slot = static_cast<const float*>(ring->device_slots()) + 16;
  EXPECT_EQ(std::vector<float>(device_slot, device_slot + 16), std::vector<float>(host.begin(), host.begin() + 16));
}

TEST(BackendModule, ARecordedStepCrossesAsAHandleAndReadsTheValuesOfTheStepItRuns) {
  std::unique_ptr<Backend> be = module::make_module_backend(kCpuModule, 1, kOneThread);
  const int64_t n = 50;
  FloatBuffer p(n, 1.0f), g = test::to_buffer(test::random_floats(n, 8));
  float rate = 0.5f;
  std::unique_ptr<backend::StepGraph> graph =
      be->capture([&] { be->sgd_update(n, p.data(), g.data(), nullptr, &rate, 0.0f, nullptr); });
  ASSERT_TRUE(graph);
  for (float w : p) ASSERT_EQ(w, 1.0f) << "recording runs nothing";
  rate = 0.25f;
  graph->launch();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 1.0f - 0.25f * g[i]) << i;

  // A body that fails: nothing recorded, nothing thrown (the caller runs the body itself) ...
  EXPECT_FALSE(be->capture([&] { fail(Status::Device, "a kernel failed"); }));
  FloatBuffer out(4);
  EXPECT_FALSE(be->capture([&] { be->to_host(p.data(), 4 * sizeof(float), out.data()); }));
  // ... except for lack of memory, which is never swallowed.
  EXPECT_EQ(test::status_of([&] { be->capture([&] { fail(Status::OutOfMemory, "no memory"); }); }),
            Status::OutOfMemory);
  EXPECT_THROW(be->capture([&] { throw std::bad_alloc(); }), std::bad_alloc);
  // The backend records again afterwards.
  EXPECT_TRUE(be->capture([&] { be->sgd_update(n, p.data(), g.data(), nullptr, &rate, 0.0f, nullptr); }));
}

TEST(BackendModule, ACollectiveCrossesAsAHandle) {
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int k = 0; k < 2; ++k) replicas.push_back(module::make_module_backend(kCpuModule, 0, kOneThread));
  std::unique_ptr<distribute::Collective> all_reduce =
      module::make_module_collective(kCpuModule, {replicas[0].get(), replicas[1].get()});
  EXPECT_FALSE(all_reduce->capturable());
  const int64_t n = 100;
  std::vector<float> a = test::random_floats(n, 9), b = test::random_floats(n, 10), want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
  std::thread other([&] { all_reduce->all_reduce_sum(1, *replicas[1], b.data(), n); });
  all_reduce->all_reduce_sum(0, *replicas[0], a.data(), n);
  other.join();
  EXPECT_EQ(a, want);
  EXPECT_EQ(b, want);

  // Only backends of this module's table take part.
  std::unique_ptr<Backend> cpu = backend::make_cpu_backend(1);
  EXPECT_EQ(test::status_of([&] { module::make_module_collective(kCpuModule, {replicas[0].get(), cpu.get()}); }),
            Status::Misuse);
}

TEST(BackendModule, NcclBetweenWorkersCrossesTheTableOrIsRefusedSayingWhy) {
  using namespace std::chrono_literals;
  // A module without the entries (as the CPU test module): a reason, and every call refused.
  EXPECT_NE(module::module_nccl_unavailable(kCpuModule).find("no NCCL"), std::string::npos);
  EXPECT_EQ(test::status_of([&] { module::module_nccl_unique_id(kCpuModule); }), Status::Unsupported);
  std::unique_ptr<Backend> plain = module::make_module_backend(kCpuModule, 0, kOneThread);
  std::array<char, module::kNcclIdBytes> id{};
  EXPECT_EQ(test::status_of([&] { module::make_module_worker_collective(kCpuModule, plain.get(), id, 1, 2, 1234ms); }),
            Status::Unsupported);

  // With them: the id, rank, size and timeout reach the module, and the collective it makes works.
  EXPECT_EQ(module::module_nccl_unavailable(kCpuModuleWithNccl), "");
  id = module::module_nccl_unique_id(kCpuModuleWithNccl);
  EXPECT_EQ(id[0], 0x5a);
  EXPECT_EQ(id.back(), 0x5a);
  std::unique_ptr<Backend> replica = module::make_module_backend(kCpuModuleWithNccl, 0, kOneThread);
  std::unique_ptr<distribute::Collective> across =
      module::make_module_worker_collective(kCpuModuleWithNccl, replica.get(), id, 1, 2, 1234ms);
  std::vector<float> x = test::random_floats(40, 11);
  const std::vector<float> want = x;
  across->all_reduce_sum(0, *replica, x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(x, want);
  // The module's error crosses with its status; a backend of another table is refused.
  EXPECT_EQ(test::status_of([&] {
              module::make_module_worker_collective(kCpuModuleWithNccl, replica.get(), id, 0, 2, 1234ms);
            }),
            Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] {
              module::make_module_worker_collective(kCpuModuleWithNccl, plain.get(), id, 1, 2, 1234ms);
            }),
            Status::Misuse);
}

TEST(BackendModule, TheLoaderTakesAMatchingTableAndRefusesAnother) {
  const backend::CudaModule ok = backend::CudaModule::from_table(&kCpuModule, "cpu-module");
  EXPECT_EQ(ok.device_count(), 2);
  EXPECT_EQ(ok.status(), "cpu-module: 2 CUDA devices");
  EXPECT_EQ(ok.describe_device(1), "CPU behind the table 1");
  std::vector<float> in = test::random_floats(8, 11), out(8);
  std::unique_ptr<Backend> be = ok.create_backend(0, kOneThread);
  be->copy(8, in.data(), out.data());
  EXPECT_EQ(out, in);
  EXPECT_EQ(test::status_of([&] { ok.create_backend(2); }), Status::Device);

  module::ModuleTable older = kCpuModule;
  older.interface_version = module::kInterfaceVersion - 1;
  const backend::CudaModule refused = backend::CudaModule::from_table(&older, "old-module");
  EXPECT_EQ(refused.device_count(), 0);
  EXPECT_NE(refused.status().find("built for backend interface " + std::to_string(module::kInterfaceVersion - 1)),
            std::string::npos)
      << refused.status();
  EXPECT_EQ(test::status_of([&] { refused.create_backend(0); }), Status::Device);

  module::ModuleTable other_operations = kCpuModule;
  other_operations.operations = "gemm();";
  EXPECT_EQ(backend::CudaModule::from_table(&other_operations, "other-module").device_count(), 0);
}

// The structs that cross the table, or that both sides read in device memory, are compared field by
// field at load: a module whose StepValues differs would read the step's rate from the wrong bytes.
TEST(BackendModule, TheLoaderRefusesAModuleThatLaysOutAStructOtherwise) {
  const std::string ours = module::kLayoutList;
  for (const std::string& entry :
       {"Epilogue " + std::to_string(sizeof(backend::Epilogue)) + "/",
        "Window2d " + std::to_string(sizeof(Window2d)) + "/",
        "LossSpec " + std::to_string(sizeof(backend::LossSpec)) + "/",
        "LossScaleState " + std::to_string(sizeof(backend::LossScaleState)) + "/",
        "StepValues " + std::to_string(sizeof(backend::StepValues)) + "/",
        "BackendOptions " + std::to_string(sizeof(BackendOptions)) + "/",
        "ModuleTable " + std::to_string(sizeof(module::ModuleTable)) + "/"})
    EXPECT_NE(ours.find(entry), std::string::npos) << entry << " in " << ours;
  EXPECT_NE(ours.find(" learning_rate@" + std::to_string(offsetof(backend::StepValues, learning_rate))),
            std::string::npos)
      << ours;

  std::string moved = ours;  // StepValues::one somewhere else in the module's build
  moved.insert(moved.find(" one@", moved.find("StepValues ")) + 5, "1");
  module::ModuleTable other_layout = kCpuModule;
  other_layout.layouts = moved.c_str();
  const backend::CudaModule refused = backend::CudaModule::from_table(&other_layout, "drifted-module");
  EXPECT_EQ(refused.device_count(), 0);
  EXPECT_NE(refused.status().find("drifted-module was built with another layout of StepValues than this libkx"),
            std::string::npos)
      << refused.status();
  EXPECT_EQ(test::status_of([&] { refused.create_backend(0); }), Status::Device);

  std::string shorter = ours;  // a module that knows one type fewer
  shorter.resize(shorter.rfind(';', shorter.size() - 2) + 1);
  other_layout.layouts = shorter.c_str();
  EXPECT_NE(backend::CudaModule::from_table(&other_layout, "m").status().find("another layout of ModuleTable"),
            std::string::npos);
  other_layout.layouts = nullptr;
  EXPECT_EQ(backend::CudaModule::from_table(&other_layout, "m").device_count(), 0);
}

TEST(BackendModule, TheCudaModuleIsLookedForOncePerProcess) {
  const backend::CudaModule& first = backend::CudaModule::load();
  EXPECT_EQ(&backend::CudaModule::load(), &first);
}

}  // namespace
}  // namespace kx
