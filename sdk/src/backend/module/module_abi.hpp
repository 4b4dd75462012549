// The C table between libkx and a backend module it loads at run time (libkx_cuda.so), after ggml's
// backend registry: plain C function pointers taking plain data (scalars, enums, pointers and
// standard-layout structs such as Window2d), opaque handles on the module's objects, and a status code
// with a message written into the caller's ModuleError instead of exceptions. No C++ object, std:: type
// or exception crosses it, so the two sides share no C++ runtime state.
//
// The backend's kernels get their entries from backend_ops.hpp; the rest is written out below. The
// module side of every entry is module_export.hpp, libkx's side module_backend.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backend/backend.hpp"

namespace kx::backend::module {

// Bumped with every change to these tables or to the types they pass. The operation list and the
// types' layouts are checked as well (kOperationList, kLayoutList), so that a new operation or a moved
// field cannot mix builds even where the bump is forgotten.
inline constexpr int32_t kInterfaceVersion = 20;

// The operations of backend_ops.hpp as text: "name(parameters);" each.
#define KX_OPERATION_TEXT(name, params, args) #name #params ";"
inline constexpr const char kOperationList[] =
    KX_BACKEND_KERNELS(KX_OPERATION_TEXT) KX_BACKEND_DIRECT_CALLS(KX_OPERATION_TEXT);
#undef KX_OPERATION_TEXT

// NCCL's ncclUniqueId, as bytes.
inline constexpr size_t kNcclIdBytes = 128;

// Opaque handles on the module's objects: declared, never defined on libkx's side.
struct BackendHandle;
struct TransferRingHandle;
struct StepGraphHandle;
struct CollectiveHandle;

// A failing entry returns its kx::Status code (never 0) and writes a NUL-terminated message here.
struct ModuleError {
  char message[1024];
};

// How a parameter of an operation crosses: as it is, or a const reference as a pointer.
template <class T>
struct CArg {
  using type = T;
  static T pass(T v) { return v; }
  static T take(T v) { return v; }
};
template <class T>
struct CArg<const T&> {
  using type = const T*;
  static const T* pass(const T& v) { return &v; }
  static const T& take(const T* p) { return *p; }
};
template <class T>
using CArgType = typename CArg<T>::type;

template <class T>
inline constexpr bool kPlainData = std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>;

// The C entry of the Backend member function type M: the handle, the error, then the parameters.
template <class M>
struct OperationEntry;
template <class... Args>
struct OperationEntry<void (Backend::*)(Args...)> {
  static_assert((kPlainData<CArgType<Args>> && ...), "a backend operation takes plain data only");
  using type = int32_t (*)(BackendHandle*, ModuleError*, CArgType<Args>...);
};
template <class M>
using OperationEntryType = typename OperationEntry<M>::type;

struct BackendTable {
#define KX_OPERATION_ENTRY(name, params, args) OperationEntryType<decltype(&Backend::name)> name;
  KX_BACKEND_KERNELS(KX_OPERATION_ENTRY)
  KX_BACKEND_DIRECT_CALLS(KX_OPERATION_ENTRY)
#undef KX_OPERATION_ENTRY
  void (*destroy)(BackendHandle*);
  int32_t (*supports)(BackendHandle*, const OpQuery* query);  // 1 or 0
  void (*gemm_kernel_name)(BackendHandle*, char* buf, size_t buf_len);
  int32_t (*allocate)(BackendHandle*, ModuleError*, size_t bytes, void** memory);
  void (*release)(BackendHandle*, void* memory, size_t bytes);
  int32_t (*host_accessible)(BackendHandle*);  // 1 or 0
  int32_t (*set_tf32)(BackendHandle*, ModuleError*, int32_t on);
  int32_t (*take_loss_sums)(BackendHandle*, ModuleError*, LossSums* sums);
  int32_t (*put_back_loss_sums)(BackendHandle*, ModuleError*, const LossSums* sums);
  int32_t (*sum_across)(BackendHandle*, ModuleError*, int64_t first, int64_t n, float* const* buffers,
                        int32_t count);
  int32_t (*make_transfer_ring)(BackendHandle*, ModuleError*, int32_t slots, size_t slot_bytes,
                                TransferRingHandle** ring);
  // Backend::capture with body a C callback (body(context) returns 0, or nonzero when it failed): the
  // recorded graph, or null in *graph when nothing was recorded.
  int32_t (*capture)(BackendHandle*, ModuleError*, int32_t (*body)(void* context), void* context,
                     StepGraphHandle** graph);
};

struct TransferRingTable {
  void (*destroy)(TransferRingHandle*);
  void* (*host_slot)(TransferRingHandle*, int32_t slot);
  void* (*device_slots)(TransferRingHandle*);
  int32_t (*wait_host_writable)(TransferRingHandle*, ModuleError*, int32_t slot);
  int32_t (*upload)(TransferRingHandle*, ModuleError*, int32_t slot, size_t bytes);
  int32_t (*release)(TransferRingHandle*, ModuleError*, int32_t slot);
};

struct StepGraphTable {
  void (*destroy)(StepGraphHandle*);
  int32_t (*launch)(StepGraphHandle*, ModuleError*);
};

struct CollectiveTable {
  void (*destroy)(CollectiveHandle*);
  int32_t (*capturable)(CollectiveHandle*);  // 1 or 0
  // Collective::all_reduce_sum by replica `replica`, whose backend is `replica_backend`.
  int32_t (*all_reduce_sum)(CollectiveHandle*, ModuleError*, int32_t replica, BackendHandle* replica_backend,
                            float* buffer, int64_t n);
};

// What the module's entry returns.
struct ModuleTable {
  int32_t interface_version;  // kInterfaceVersion of the module's build; first in every version
  const char* operations;     // kOperationList of the module's build
  const char* layouts;        // kLayoutList of the module's build
  // The devices the module can use; 0 with the reason written to why (no driver, no device ...).
  int32_t (*device_count)(char* why, size_t why_len);
  // One line about device `index` (name, memory, compute capability), NUL-terminated in buf.
  void (*describe_device)(int32_t index, char* buf, size_t buf_len);
  // A backend on device `index`, with its own stream.
  int32_t (*create_backend)(ModuleError*, int32_t index, const BackendOptions* options, BackendHandle** backend);
  // The all-reduce between backends this module created on distinct devices (NCCL), one per replica
  // in replica order (errors: no NCCL, a device named twice).
  int32_t (*create_collective)(ModuleError*, BackendHandle* const* replicas, int32_t count,
                               CollectiveHandle** collective);
  // NCCL between worker processes, one GPU each (llm.c's bootstrap). nccl_available: 1, or 0 with the
  // reason in why. nccl_unique_id: the chief's new id, kNcclIdBytes written to id. Then every worker's
  // collective on its replica's backend from that id, whose join and sums fail with Status::Comm past
  // timeout_ms. Null in a module without NCCL support (the CPU test module).
  int32_t (*nccl_available)(char* why, size_t why_len);
  int32_t (*nccl_unique_id)(ModuleError*, char* id, size_t id_len);
  int32_t (*create_worker_collective)(ModuleError*, BackendHandle* replica, const char* id, size_t id_len,
                                      int32_t rank, int32_t size, int64_t timeout_ms, CollectiveHandle** collective);
  const BackendTable* backend;
  const TransferRingTable* transfer_ring;
  const StepGraphTable* step_graph;
  const CollectiveTable* collective;
};

static_assert(kPlainData<BackendOptions> && kPlainData<OpQuery> && kPlainData<LossSums> && kPlainData<ModuleTable>);

// The layouts of what crosses the boundary as text, "Name size/alignment: field@offset ...;" each: the
// structs and enums the tables pass, those both sides read in device memory (StepValues,
// LossScaleState) and the tables themselves. libkx compares its own with the module's at load and
// names the first that differs, so that a struct changed on one side only is refused there and then,
// not read wrong on the device.
namespace layout {
struct Field {
  const char* name;
  size_t offset;
};
// Built at compile time (no std::string: clang 14's constant evaluation refuses libstdc++'s); a list
// longer than the buffer does not compile.
struct Text {
  char chars[4096] = {};
  size_t size = 0;
  constexpr void add(char c) { chars[size++] = c; }
  constexpr void add(const char* s) {
    while (*s) add(*s++);
  }
  constexpr void add_number(size_t v) {
    char digits[24] = {};
    int n = 0;
    do digits[n++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0) add(digits[--n]);
  }
  constexpr void describe(const char* name, size_t bytes, size_t align, std::initializer_list<Field> fields) {
    add(name);
    add(' ');
    add_number(bytes);
    add('/');
    add_number(align);
    add(':');
    for (const Field& f : fields) {
      add(' ');
      add(f.name);
      add('@');
      add_number(f.offset);
    }
    add(';');
  }
};
}  // namespace layout

#define KX_LAYOUT(T, ...) t.describe(#T, sizeof(T), alignof(T), {__VA_ARGS__})
#define KX_FIELD(T, f) layout::Field{#f, offsetof(T, f)}
constexpr layout::Text layout_text() {
  layout::Text t;
  KX_LAYOUT(Epilogue, KX_FIELD(Epilogue, bias), KX_FIELD(Epilogue, activation), KX_FIELD(Epilogue, bias_grad),
            KX_FIELD(Epilogue, rounding), KX_FIELD(Epilogue, keep_float32));
  KX_LAYOUT(BatchedGemm, KX_FIELD(BatchedGemm, ta), KX_FIELD(BatchedGemm, tb), KX_FIELD(BatchedGemm, M),
            KX_FIELD(BatchedGemm, N), KX_FIELD(BatchedGemm, K), KX_FIELD(BatchedGemm, lda), KX_FIELD(BatchedGemm, ldb),
            KX_FIELD(BatchedGemm, ldc), KX_FIELD(BatchedGemm, outer), KX_FIELD(BatchedGemm, inner),
            KX_FIELD(BatchedGemm, a_outer), KX_FIELD(BatchedGemm, a_inner), KX_FIELD(BatchedGemm, b_outer),
            KX_FIELD(BatchedGemm, b_inner), KX_FIELD(BatchedGemm, c_outer), KX_FIELD(BatchedGemm, c_inner),
            KX_FIELD(BatchedGemm, beta), KX_FIELD(BatchedGemm, rounding));
  KX_LAYOUT(LossScaleState, KX_FIELD(LossScaleState, scale), KX_FIELD(LossScaleState, grad_factor),
            KX_FIELD(LossScaleState, applied), KX_FIELD(LossScaleState, finite), KX_FIELD(LossScaleState, good_steps),
            KX_FIELD(LossScaleState, growth_steps));
  KX_LAYOUT(LossSpec, KX_FIELD(LossSpec, kind), KX_FIELD(LossSpec, logits), KX_FIELD(LossSpec, accuracy),
            KX_FIELD(LossSpec, positions), KX_FIELD(LossSpec, huber_delta));
  KX_LAYOUT(Window2d, KX_FIELD(Window2d, in_h), KX_FIELD(Window2d, in_w), KX_FIELD(Window2d, channels),
            KX_FIELD(Window2d, k_h), KX_FIELD(Window2d, k_w), KX_FIELD(Window2d, stride_h),
            KX_FIELD(Window2d, stride_w), KX_FIELD(Window2d, pad_top), KX_FIELD(Window2d, pad_left),
            KX_FIELD(Window2d, out_h), KX_FIELD(Window2d, out_w), KX_FIELD(Window2d, dilation_h),
            KX_FIELD(Window2d, dilation_w));
  KX_LAYOUT(Upsample2d, KX_FIELD(Upsample2d, in_h), KX_FIELD(Upsample2d, in_w), KX_FIELD(Upsample2d, channels),
            KX_FIELD(Upsample2d, size_h), KX_FIELD(Upsample2d, size_w), KX_FIELD(Upsample2d, interpolation));
  KX_LAYOUT(RmsPropConstants, KX_FIELD(RmsPropConstants, rho), KX_FIELD(RmsPropConstants, one_minus_rho),
            KX_FIELD(RmsPropConstants, momentum), KX_FIELD(RmsPropConstants, epsilon));
  KX_LAYOUT(BinaryShape, KX_FIELD(BinaryShape, op), KX_FIELD(BinaryShape, rank), KX_FIELD(BinaryShape, scalar_operand),
            KX_FIELD(BinaryShape, scalar), KX_FIELD(BinaryShape, dims), KX_FIELD(BinaryShape, a_dims),
            KX_FIELD(BinaryShape, b_dims));
  KX_LAYOUT(RecurrentStep, KX_FIELD(RecurrentStep, rows), KX_FIELD(RecurrentStep, units),
            KX_FIELD(RecurrentStep, gates_ld), KX_FIELD(RecurrentStep, recurrent_ld), KX_FIELD(RecurrentStep, state_ld),
            KX_FIELD(RecurrentStep, mask_ld), KX_FIELD(RecurrentStep, y_ld), KX_FIELD(RecurrentStep, activation),
            KX_FIELD(RecurrentStep, recurrent_activation), KX_FIELD(RecurrentStep, zero_masked_output));
  KX_LAYOUT(StepValues, KX_FIELD(StepValues, seed), KX_FIELD(StepValues, learning_rate), KX_FIELD(StepValues, one),
            KX_FIELD(StepValues, base_learning_rate));
  KX_LAYOUT(LossSums, KX_FIELD(LossSums, loss), KX_FIELD(LossSums, correct), KX_FIELD(LossSums, weight));
  KX_LAYOUT(OpQuery, KX_FIELD(OpQuery, op), KX_FIELD(OpQuery, window));
  KX_LAYOUT(BackendOptions, KX_FIELD(BackendOptions, cpu_threads), KX_FIELD(BackendOptions, cpu_gemm),
            KX_FIELD(BackendOptions, cpu_bf16_gemm), KX_FIELD(BackendOptions, tf32), KX_FIELD(BackendOptions, cudnn));
  KX_LAYOUT(ModuleError, KX_FIELD(ModuleError, message));
  // Enums cross as their underlying type.
  KX_LAYOUT(Trans);
  KX_LAYOUT(Activation);
  KX_LAYOUT(Rounding);
  KX_LAYOUT(Interpolation);
  KX_LAYOUT(BinaryOp);
  KX_LAYOUT(LossKind);
  KX_LAYOUT(AccuracyKind);
  KX_LAYOUT(CpuGemm);
  KX_LAYOUT(CpuBf16Gemm);
  KX_LAYOUT(Op);
  KX_LAYOUT(BackendTable);
  KX_LAYOUT(TransferRingTable);
  KX_LAYOUT(StepGraphTable);
  KX_LAYOUT(CollectiveTable);
  KX_LAYOUT(ModuleTable);
  return t;
}
#undef KX_FIELD
#undef KX_LAYOUT

inline constexpr layout::Text kLayoutText = layout_text();
inline constexpr const char* kLayoutList = kLayoutText.chars;

// The module exports one extern "C" function of this name, returning its ModuleTable. The name and
// the table's first field stay the same in every version, so that a module built for another
// interface is recognised and refused by its number.
inline constexpr const char kModuleEntryName[] = "kx_backend_module_v2";
using ModuleEntry = const ModuleTable* (*)();

}  // namespace kx::backend::module
