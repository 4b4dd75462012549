/* The misuse probe's frame (misuse_probe_main.c) and what the generated cases use. */
#ifndef KX_TESTS_MISUSE_PROBE_MAIN_H
#define KX_TESTS_MISUSE_PROBE_MAIN_H
#define KX_ALLOW_DEPRECATED
#include <kx/kx.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SENTINEL ((void*)0x5a5a)

/* Valid handles for the cases: a compiled model, a dataset that fits it, callbacks, a history. */
typedef struct {
  kx_strategy* s;
  kx_model* m;
  kx_dataset* d;
  kx_callbacks* cb;
  kx_history* h;
} fixture;

typedef struct {
  const char* function;
  const char* group;
  void (*run)(fixture* f);
  int from_callback; /* run inside a BATCH_END callback of a fit of f->m */
} probe_case;

extern const probe_case kProbeCases[];
extern const size_t kProbeCaseCount;

/* Records a finding of the running case (the child then exits non-zero). */
void report(const char* function, const char* what);
/* A status must be a code of kx.h other than KX_E_INTERNAL, with a message when it is an error. */
void check_status(const char* function, kx_status st);
/* Callbacks the cases hand to kx when a function pointer is wanted. */
int32_t probe_kx_callback_fn(const kx_event* ev, void* user_data);
double probe_kx_lr_schedule_fn(int32_t epoch, double lr, void* user_data);

#endif
