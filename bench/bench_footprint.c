/* The footprint of a small start, through the C ABI as an application sees it: how long after main()
 * the first training step of a tiny MLP (784-64-10, Adam, batch 32) ends, and the process's peak
 * resident memory. bench/footprint.sh runs it with the CUDA module present and hidden, several times.
 *
 *   bench_footprint [--threads N] [--status]
 *
 * Prints one line: key=value pairs (milliseconds since main(), kB), and with --status what kx found
 * for CUDA. With $KX_FOOTPRINT_LAUNCH_US (the wall clock in microseconds when the caller started it,
 * bash's ${EPOCHREALTIME/./}) also the time since launch: loading libkx and what it links included. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <kx/kx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* A field of /proc/self/status in kB ("VmHWM", "VmRSS"), or -1. */
static long status_kb(const char* field) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  const size_t n = strlen(field);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = strtol(line + n + 1, NULL, 10);
      break;
    }
  fclose(f);
  return kb;
}

static int check(kx_status st, const char* what) {
  if (st == KX_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, kx_status_name(st), kx_last_error_message());
  return 1;
}

int main(int argc, char** argv) {
  const double start = now_ms();
  int threads = 0, show_status = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--status") == 0) show_status = 1;
    else {
      fprintf(stderr, "usage: %s [--threads N] [--status]\n", argv[0]);
      return 2;
    }
  }
  enum { kBatch = 32, kInputs = 784, kClasses = 10 };
  static float x[kBatch * kInputs], y[kBatch];
  unsigned state = 1;
  for (int i = 0; i < kBatch * kInputs; ++i) x[i] = (float)((state = state * 1103515245u + 12345u) >> 16) / 65536.0f;
  for (int i = 0; i < kBatch; ++i) y[i] = (float)(i % kClasses);

  kx_strategy* s = NULL;
  kx_model* m = NULL;
  if (check(kx_strategy_create_default(&s), "kx_strategy_create_default")) return 1;
  if (threads > 0 && check(kx_strategy_set_num_threads(s, threads), "kx_strategy_set_num_threads")) return 1;
  const double strategy_done = now_ms();
  const int64_t shape[1] = {kInputs};
  if (check(kx_model_create_sequential(s, shape, 1, &m), "kx_model_create_sequential") ||
      check(kx_model_add_dense_flags(m, 64, KX_ACT_RELU, 0), "kx_model_add_dense_flags") ||
      check(kx_model_add_dense_flags(m, kClasses, KX_ACT_SOFTMAX, 0), "kx_model_add_dense_flags") ||
      check(kx_model_compile(m, NULL), "kx_model_compile"))
    return 1;
  const double compiled = now_ms();
  double loss = 0;
  if (check(kx_model_train_on_batch(m, x, y, kBatch, &loss, NULL), "kx_model_train_on_batch")) return 1;
  const double stepped = now_ms();
  const char* launch = getenv("KX_FOOTPRINT_LAUNCH_US");
  const double since_launch = launch ? wall_ms() - (double)strtoll(launch, NULL, 10) / 1e3 : -1.0;

  Dl_info where;
  const char* library = dladdr((void*)&kx_version_string, &where) && where.dli_fname ? where.dli_fname : "?";
  printf("since_launch_ms=%.1f first_step_ms=%.1f strategy_ms=%.1f compile_ms=%.1f step_ms=%.1f ", since_launch,
         stepped - start, strategy_done - start, compiled - strategy_done, stepped - compiled);
  printf("peak_rss_kb=%ld cuda_devices=%d loss=%.4f libkx=%s\n", status_kb("VmHWM"), kx_device_count(KX_DEVICE_CUDA),
         loss, library);
  if (show_status) {
    char* text = NULL;
    if (kx_device_status(KX_DEVICE_CUDA, &text) == KX_OK) printf("cuda: %s\n", text);
    kx_free(text);
  }
  kx_model_destroy(m);
  kx_strategy_destroy(s);
  return 0;
}
