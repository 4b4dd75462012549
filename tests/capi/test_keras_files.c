/* Keras's files from C: kx_model_load_keras, kx_model_save_keras and kx_model_load_weights of Keras
 * files, each error code with *out untouched, and a file that crashes libhdf5 1.10.8 (read in
 * kx-hdf5-reader, never in this process) as KX_E_CORRUPT naming the file. Skipped (77) where libhdf5
 * is missing.
 *
 *   kx_keras_files_tests SOURCE_DIR SCRATCH_DIR
 */
#include <kx/kx.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"

static int says(const char* needle) { return strstr(kx_last_error_message(), needle) != NULL; }

int main(int argc, char** argv) {
  char good[1024], weights[1024], killer[1024], junk[1024], saved[1024];
  kx_strategy* s = NULL;
  kx_model* m = NULL;
  kx_model* const sentinel = (kx_model*)&m;
  kx_model* out = sentinel;
  int64_t loaded = -1, skipped = -1;
  FILE* f = NULL;
  if (argc != 3) {
    fprintf(stderr, "usage: %s SOURCE_DIR SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  snprintf(good, sizeof good, "%s/tests/fuzz/corpus/keras_file/mlp.keras", argv[1]);
  snprintf(weights, sizeof weights, "%s/tests/fuzz/corpus/keras_file/mlp.weights.h5", argv[1]);
  snprintf(killer, sizeof killer, "%s/tests/fuzz/libhdf5_killers/segv-in-H5HG_read.h5", argv[1]);
  snprintf(junk, sizeof junk, "%s/junk.h5", argv[2]);
  snprintf(saved, sizeof saved, "%s/saved.keras", argv[2]);
  if (kx_strategy_create_default(&s) != KX_OK) return 1;

  /* Arguments first: nothing is read or written. */
  EXPECT(kx_model_load_keras(NULL, good, &out) == KX_E_INVALID_ARGUMENT && out == sentinel);
  EXPECT(kx_model_load_keras(s, NULL, &out) == KX_E_INVALID_ARGUMENT && out == sentinel);
  EXPECT(kx_model_load_keras(s, good, NULL) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_load_keras(s, "/nonexistent/model.keras", &out) == KX_E_IO && out == sentinel);

  /* No HDF5 signature and no zip: Corrupt before any reader runs. */
  f = fopen(junk, "wb");
  if (f) {
    fputs("not a Keras file", f);
    fclose(f);
  }
  EXPECT(kx_model_load_keras(s, junk, &out) == KX_E_CORRUPT && out == sentinel && says("junk.h5"));

  if (kx_model_load_keras(s, good, &m) == KX_E_UNSUPPORTED && says("HDF5")) {
    printf("skipped: %s\n", kx_last_error_message());
    kx_strategy_destroy(s);
    return 77;
  }
  EXPECT(m != NULL);

  /* libhdf5 segfaults on this file: the reader dies, this process answers. */
  EXPECT(kx_model_load_keras(s, killer, &out) == KX_E_CORRUPT && out == sentinel);
  EXPECT(says("segv-in-H5HG_read.h5") && says("HDF5 reader"));
  if (m) {
    EXPECT(kx_model_load_weights(m, killer, 0, &loaded, &skipped) == KX_E_CORRUPT && loaded == -1 && skipped == -1);
    EXPECT(says("segv-in-H5HG_read.h5"));
    EXPECT(kx_model_load_weights(m, weights, 0, &loaded, &skipped) == KX_OK && loaded == 4 && skipped == 0);
    EXPECT(kx_model_save_keras(m, saved) == KX_OK);
    EXPECT(kx_model_save_keras(NULL, saved) == KX_E_INVALID_ARGUMENT);
    EXPECT(kx_model_load_keras(s, saved, &out) == KX_OK && out != sentinel);
    if (out != sentinel) kx_model_destroy(out);
    kx_model_destroy(m);
  }
  kx_strategy_destroy(s);
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  return g_failures == 0 ? 0 : 1;
}
