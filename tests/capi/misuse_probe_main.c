/* The misuse probe (the cases are generated from kx.h by gen_misuse_probe.py): each case runs in a
 * child process of its own, with a fresh fixture, under a 30 s alarm; the parent names every case
 * that crashed, hung or reported a finding.
 *
 *   kx_misuse_probe [function-substring]
 */
#define _POSIX_C_SOURCE 200809L
#include "misuse_probe_main.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_findings = 0;

void report(const char* function, const char* what) {
  ++g_findings;
  fprintf(stderr, "  %s: %s\n", function, what);
}

void check_status(const char* function, kx_status st) {
  char what[160];
  if (st == KX_E_INTERNAL) {
    snprintf(what, sizeof what, "KX_E_INTERNAL: %s", kx_last_error_message());
    report(function, what);
  } else if (st != KX_OK && st != KX_STOPPED && (st > -1 || st < -9)) {
    snprintf(what, sizeof what, "returned %d, not a code of kx.h", (int)st);
    report(function, what);
  } else if (st < 0 && kx_last_error_message()[0] == '\0') {
    report(function, "failed without a message");
  }
}

int32_t probe_kx_callback_fn(const kx_event* ev, void* user_data) {
  (void)ev;
  (void)user_data;
  return 0;
}

double probe_kx_lr_schedule_fn(int32_t epoch, double lr, void* user_data) {
  (void)epoch;
  (void)user_data;
  return lr;
}

static int make_fixture(fixture* f) {
  static const float x[8 * 2] = {0, 1, 1, 0, 1, 1, 0, 0, 2, 1, 1, 2, 0, 2, 2, 0};
  static const float y[8] = {0, 1, 1, 0, 1, 0, 1, 0};
  const int64_t shape[1] = {2}, xs[2] = {8, 2}, ys[1] = {8};
  kx_fit_options fo;
  memset(f, 0, sizeof *f);
  if (kx_strategy_create_default(&f->s) != KX_OK || kx_model_create_sequential(f->s, shape, 1, &f->m) != KX_OK ||
      kx_model_add_dense_flags(f->m, 2, KX_ACT_SOFTMAX, 0) != KX_OK || kx_model_compile(f->m, NULL) != KX_OK ||
      kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_F32, ys, 1, &f->d) != KX_OK ||
      kx_dataset_batch(f->d, 4, 0) != KX_OK || kx_callbacks_create(&f->cb) != KX_OK)
    return 0;
  kx_fit_options_init(&fo, sizeof fo);
  return kx_fit(f->m, f->d, &fo, NULL, &f->h) == KX_OK;
}

static void free_fixture(fixture* f) {
  kx_history_destroy(f->h);
  kx_callbacks_destroy(f->cb);
  kx_dataset_destroy(f->d);
  kx_model_destroy(f->m);
  kx_strategy_destroy(f->s);
}

typedef struct {
  const probe_case* c;
  fixture* f;
  int ran;
} in_fit;

static int32_t run_in_callback(const kx_event* ev, void* user_data) {
  in_fit* p = (in_fit*)user_data;
  if (ev->kind == KX_EVENT_BATCH_END && !p->ran) {
    p->ran = 1;
    p->c->run(p->f);
  }
  return 0;
}

/* The child: one case, then its findings as the exit status. */
static int run_case(const probe_case* c) {
  fixture f;
  alarm(30);
  if (!make_fixture(&f)) {
    fprintf(stderr, "  fixture: %s\n", kx_last_error_message());
    return 2;
  }
  if (c->from_callback) {
    /* The fit reads its own copy of the data, so that the case may change f.d as it likes. */
    kx_dataset* train = NULL;
    kx_callbacks* cb = NULL;
    in_fit p = {c, &f, 0};
    if (kx_dataset_take(f.d, 8, &train) != KX_OK || kx_callbacks_create(&cb) != KX_OK ||
        kx_callbacks_add_function_flags(cb, run_in_callback, &p, 0) != KX_OK) {
      fprintf(stderr, "  callback fixture: %s\n", kx_last_error_message());
      return 2;
    }
    const kx_status st = kx_fit(f.m, train, NULL, cb, NULL);
    if (st < 0 && st != KX_E_MISUSE) check_status("the fit around the callback", st);
    if (!p.ran) report(c->function, "the callback never ran");
    kx_callbacks_destroy(cb);
    kx_dataset_destroy(train);
  } else {
    c->run(&f);
  }
  free_fixture(&f);
  fflush(stderr);
  return g_findings == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : NULL;
  size_t i, run = 0, failed = 0;
  for (i = 0; i < kProbeCaseCount; ++i) {
    const probe_case* c = &kProbeCases[i];
    pid_t child;
    int status = 0;
    if (only && !strstr(c->function, only)) continue;
    ++run;
    fflush(stdout);
    fflush(stderr);
    child = fork();
    if (child == 0) _exit(run_case(c));
    if (child < 0 || waitpid(child, &status, 0) != child) {
      perror("fork");
      return 2;
    }
    if (WIFSIGNALED(status)) {
      ++failed;
      fprintf(stderr, "FAILED %s (%s): %s signal %d\n", c->function, c->group,
              WTERMSIG(status) == SIGALRM ? "hung, stopped by" : "crashed with", WTERMSIG(status));
    } else if (WEXITSTATUS(status) != 0) {
      ++failed;
      fprintf(stderr, "FAILED %s (%s): the findings above\n", c->function, c->group);
    }
  }
  printf("%zu cases, %zu failed\n", run, failed);
  return failed == 0 && run > 0 ? 0 : 1;
}
