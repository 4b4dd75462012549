/* A disk that fills up during a checkpoint (a file-size limit in a child process: writes past it fail
 * with EFBIG, as on a full disk): kx_fit and kx_model_save fail with KX_E_IO naming the file, the
 * checkpoint written before stays intact and loadable, and no temporary file is left behind.
 *
 *   kx_disk_full_tests scratch_dir
 */
#define _POSIX_C_SOURCE 200809L
#include <kx/kx.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "expect.h"

#define N 64
#define IN 32

static kx_model* make_model(kx_strategy* s, int64_t units) {
  const int64_t shape[1] = {IN};
  kx_model* m = NULL;
  if (kx_model_create_sequential(s, shape, 1, &m) != KX_OK) return NULL;
  if (kx_model_add_dense_flags(m, units, KX_ACT_RELU, 0) != KX_OK ||
      kx_model_add_dense_flags(m, 3, KX_ACT_SOFTMAX, 0) != KX_OK || kx_model_compile(m, NULL) != KX_OK) {
    kx_model_destroy(m);
    return NULL;
  }
  return m;
}

static int exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Runs in the child: every check counts there, and the exit status says whether all held. */
static int scenario(const char* dir) {
  kx_strategy* s = NULL;
  kx_model *small, *big, *back = NULL;
  kx_dataset* d = NULL;
  kx_callbacks* cb = NULL;
  kx_fit_options fo;
  char path[512], tmp[600], pattern[600];
  float x[N * IN], y[N];
  const int64_t xs[2] = {N, IN}, ys[1] = {N};
  struct rlimit limit;
  int i;
  for (i = 0; i < N * IN; ++i) x[i] = (float)(i % 13) / 13.0f;
  for (i = 0; i < N; ++i) y[i] = (float)(i % 3);
  EXPECT(kx_strategy_create_default(&s) == KX_OK);
  small = make_model(s, 4);   /* a few KiB on disk */
  big = make_model(s, 4096);  /* about 540 KiB */
  EXPECT(small && big);
  if (!small || !big) return 1;
  snprintf(path, sizeof path, "%s/model.kx", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  EXPECT(kx_model_save(small, path) == KX_OK);

  /* From here on no file may grow past 64 KiB; SIGXFSZ ignored, the write fails with EFBIG. */
  signal(SIGXFSZ, SIG_IGN);
  limit.rlim_cur = limit.rlim_max = 64 * 1024;
  EXPECT(setrlimit(RLIMIT_FSIZE, &limit) == 0);
  EXPECT(kx_model_save(big, path) == KX_E_IO && strstr(kx_last_error_message(), "model.kx.tmp") != NULL);
  EXPECT(!exists(tmp));
  EXPECT(kx_model_load(s, path, &back) == KX_OK && kx_model_num_params(back) == kx_model_num_params(small));
  kx_model_destroy(back);

  /* A fit whose checkpoint does not fit: KX_E_IO from kx_fit, the earlier checkpoint intact. */
  snprintf(pattern, sizeof pattern, "%s/ckpt-{epoch:02d}.kx", dir);
  EXPECT(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_F32, ys, 1, &d) == KX_OK);
  EXPECT(kx_dataset_batch(d, 16, 0) == KX_OK && kx_callbacks_create(&cb) == KX_OK);
  EXPECT(kx_callbacks_add_model_checkpoint(cb, pattern, 0, 0) == KX_OK);
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = 1;
  EXPECT(kx_fit(small, d, &fo, cb, NULL) == KX_OK);
  snprintf(path, sizeof path, "%s/ckpt-01.kx", dir);
  EXPECT(exists(path));
  EXPECT(kx_fit(big, d, &fo, cb, NULL) == KX_E_IO);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  EXPECT(!exists(tmp));
  EXPECT(kx_model_load(s, path, &back) == KX_OK && kx_model_num_params(back) == kx_model_num_params(small));
  kx_model_destroy(back);
  kx_callbacks_destroy(cb);
  kx_dataset_destroy(d);
  kx_model_destroy(small);
  kx_model_destroy(big);
  kx_strategy_destroy(s);
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  fflush(stdout);  /* the child ends with _exit */
  fflush(stderr);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  char dir[512];
  pid_t child;
  int status = 0;
  snprintf(dir, sizeof dir, "%s/disk-full-%ld", argc > 1 ? argv[1] : ".", (long)getpid());
  if (mkdir(dir, 0755) != 0) {
    perror(dir);
    return 1;
  }
  fflush(stdout);
  child = fork();
  if (child == 0) _exit(scenario(dir));
  if (child < 0 || waitpid(child, &status, 0) != child) {
    perror("fork");
    return 1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "the disk-full scenario failed (status %d)\n", status);
    return 1;
  }
  return 0;
}
