/* The boundary between libkx and the cross-process engine module (libkx_workers.so, Gloo over TCP,
 * bootstrapped by TF_CONFIG or mpirun). Plain C on purpose: no C++ object, exception or allocator
 * crosses the dlopen, so the module may be built by another compiler or standard library, and a
 * mismatch is caught by the interface version instead of a crash.
 *
 * Every fallible function returns a kx status code (the values of kx::Status / kx_status: 0 = OK,
 * KX_E_INVALID_ARGUMENT -1, KX_E_COMM -9, ...) and, when it fails, writes a one-line NUL-terminated
 * message into (message, message_len). A group is used by one thread at a time. */
#ifndef KX_WORKERS_MODULE_API_H
#define KX_WORKERS_MODULE_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised when a function of this table changes meaning or signature. */
#define KX_WORKERS_INTERFACE_VERSION 1
/* The module exports one function of this name: const kx_workers_api* (void). */
#define KX_WORKERS_ENTRY_NAME "kx_workers_module_v1"

typedef struct kx_workers_group kx_workers_group; /* opaque, owned by the module */

/* How the processes were started. */
enum { KX_WORKERS_LAUNCH_TF_CONFIG = 0, KX_WORKERS_LAUNCH_MPI = 1 };
/* Element types of all_reduce_sum. */
enum { KX_WORKERS_FLOAT32 = 0, KX_WORKERS_FLOAT64 = 1 };

typedef struct kx_workers_join_args {
  uint32_t struct_size;  /* sizeof(kx_workers_join_args) of the caller */
  int32_t launcher;      /* KX_WORKERS_LAUNCH_* */
  int32_t rank;          /* this worker, 0 = the chief */
  int32_t size;          /* workers in the group, >= 2 */
  /* TF_CONFIG: `size` addresses "host:port" in rank order; each worker listens on its own (the
     chief's also serves the rendezvous). mpirun: NULL, the module exchanges addresses over MPI. */
  const char* const* addresses;
  int64_t timeout_ms; /* for joining and, until set_timeout, for every operation */
} kx_workers_join_args;

/* Receives worker `rank`'s blob during all_gather, in rank order; returns 0, or non-zero to fail the
   call with KX_E_OUT_OF_MEMORY (the sink could not keep it). */
typedef int32_t (*kx_workers_sink)(void* user_data, int32_t rank, const void* data, size_t bytes);

typedef struct kx_workers_api {
  int32_t interface_version; /* KX_WORKERS_INTERFACE_VERSION of the module's build */
  /* One line: the engine and what it was built with (for messages and logs). */
  const char* description;

  int32_t (*join)(const kx_workers_join_args* args, kx_workers_group** out, char* message, size_t message_len);
  /* Leaves the group without waiting for the others (they see this worker as gone); NULL is fine. */
  void (*leave)(kx_workers_group* group);
  /* The worker's address as the group knows it ("host:port"), for messages; NUL-terminated in buf. */
  void (*worker_address)(const kx_workers_group* group, int32_t rank, char* buf, size_t buf_len);

  int32_t (*set_timeout)(kx_workers_group* group, int64_t timeout_ms, char* message, size_t message_len);
  /* data := the sum over workers of data (count elements of `dtype`), the same bytes on every worker,
     reduced in an order fixed by the cluster's shape. */
  int32_t (*all_reduce_sum)(kx_workers_group* group, void* data, size_t count, int32_t dtype, char* message,
                            size_t message_len);
  /* data := root's data (bytes equal on every worker). */
  int32_t (*broadcast)(kx_workers_group* group, void* data, size_t bytes, int32_t root, char* message,
                       size_t message_len);
  int32_t (*barrier)(kx_workers_group* group, char* message, size_t message_len);
  /* Every worker's blob (sizes may differ), handed to sink in rank order. */
  int32_t (*all_gather)(kx_workers_group* group, const void* data, size_t bytes, kx_workers_sink sink,
                        void* sink_user_data, char* message, size_t message_len);
} kx_workers_api;

typedef const kx_workers_api* (*kx_workers_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* KX_WORKERS_MODULE_API_H */
