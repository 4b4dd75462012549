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
#define KX_WORKERS_INTERFACE_VERSION 2
/* The module exports one function of this name: const kx_workers_api* (void). */
#define KX_WORKERS_ENTRY_NAME "kx_workers_module_v1"

typedef struct kx_workers_group kx_workers_group; /* opaque, owned by the module */
typedef struct kx_workers_peers kx_workers_peers; /* opaque, owned by the module (version 2) */

/* peers_send / peers_recv: not done within the wait; the operation stays posted (call again with the
   same rank, tag and size to go on waiting). Positive, so never mistaken for a kx status. */
#define KX_WORKERS_PENDING 1

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
  /* Version 2: each task's name for messages ("chief", "worker 0", "ps 1"), `size` of them in rank
     order, or NULL ("worker N"). Read only when struct_size covers it. */
  const char* const* names;
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

  /* Version 2: point-to-point messages between the tasks of a cluster (the parameter-server strategy).
     Every pair of tasks has its own connection, and a failed one fails only the operations with that
     peer: the group keeps serving the others. join_args as for join (addresses of every task, rank 0
     the chief). Operations with different peers, or on different tags, may run concurrently from
     different threads; one thread at a time per (peer, tag, direction). */
  int32_t (*peers_join)(const kx_workers_join_args* args, kx_workers_peers** out, char* message, size_t message_len);
  void (*peers_leave)(kx_workers_peers* peers);
  /* Sends `bytes` to `rank` on `tag` (the peer receives it with the same tag and size); the data is
     copied at once. Waits up to wait_ms for the peer to take it: 0, KX_WORKERS_PENDING (still posted;
     call again with the same arguments to wait on, the data is not sent twice), or KX_E_COMM when the
     connection with that peer failed (then every later operation with it fails the same way). */
  int32_t (*peers_send)(kx_workers_peers* peers, int32_t rank, uint32_t tag, const void* data, size_t bytes,
                        int64_t wait_ms, char* message, size_t message_len);
  /* Receives the next message of exactly `bytes` from `rank` on `tag` into data; returns as
     peers_send. */
  int32_t (*peers_recv)(kx_workers_peers* peers, int32_t rank, uint32_t tag, void* data, size_t bytes,
                        int64_t wait_ms, char* message, size_t message_len);
  /* 0 when `rank` is alive (its process answers within window_ms), else KX_E_COMM saying whether it is
     gone, silent (stopped or hung) or its connection failed. */
  int32_t (*peers_probe)(kx_workers_peers* peers, int32_t rank, int64_t window_ms, char* message, size_t message_len);
} kx_workers_api;

typedef const kx_workers_api* (*kx_workers_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* KX_WORKERS_MODULE_API_H */
