/* TensorBoard logs and ONNX export through the C ABI: argument errors, and the files' framing (every
 * TFRecord's masked CRC-32C, recomputed here bit by bit, and the number of records). Their protobuf
 * contents are decoded by tests/python (protoc, onnx, OpenCV).
 *
 *   kx_export_logs_tests <scratch directory>
 */
#include <dirent.h>
/* These tests call the deprecated twins too: they stay part of the ABI. */
#define KX_ALLOW_DEPRECATED
#include <kx/kx.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"

#define EXPECT_OK(call)                                                                           \
  do {                                                                                            \
    kx_status st_ = (call);                                                                       \
    ++g_checks;                                                                                   \
    if (st_ != KX_OK) {                                                                           \
      ++g_failures;                                                                               \
      fprintf(stderr, "%s:%d: FAILED: %s returned %s: %s\n", __FILE__, __LINE__, #call,           \
              kx_status_name(st_), kx_last_error_message());                                      \
    }                                                                                             \
  } while (0)

/* CRC-32C one bit at a time (kx uses a table): an independent computation. */
static uint32_t crc32c(const unsigned char* p, size_t n) {
  uint32_t c = 0xffffffffu;
  size_t i;
  int k;
  for (i = 0; i < n; ++i) {
    c ^= p[i];
    for (k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
  }
  return ~c;
}
static uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }
static uint64_t read_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  int i;
  for (i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/* The one event file in dir: its records counted, every CRC checked; -1 when it cannot be read,
 * -2 on a bad CRC or a truncated record. *tags_found counts records holding `tag`. */
static int count_records(const char* dir, const char* tag, int* tags_found) {
  char path[1024] = {0};
  unsigned char* data;
  long size, pos = 0;
  int records = 0, files = 0;
  FILE* f;
  struct dirent* e;
  DIR* d = opendir(dir);
  *tags_found = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, "events.out.tfevents.") == e->d_name) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      ++files;
    }
  closedir(d);
  if (files != 1 || !(f = fopen(path, "rb"))) return -1;
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, 0, SEEK_SET);
  data = (unsigned char*)malloc((size_t)size + 1);
  if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) size = -1;
  fclose(f);
  while (size >= 0 && pos < size) {
    uint64_t len;
    if (pos + 12 > size) { records = -2; break; }
    len = read_le(data + pos, 8);
    if (read_le(data + pos + 8, 4) != masked(crc32c(data + pos, 8)) || pos + 16 + (long)len > size) {
      records = -2;
      break;
    }
    if (read_le(data + pos + 12 + len, 4) != masked(crc32c(data + pos + 12, (size_t)len))) { records = -2; break; }
    {
      size_t t = strlen(tag), i;
      for (i = 0; i + t <= len; ++i)
        if (memcmp(data + pos + 12 + i, tag, t) == 0) { ++*tags_found; break; }
    }
    pos += 16 + (long)len;
    ++records;
  }
  free(data);
  return size < 0 ? -1 : records;
}

/* 64 samples of 4 features, 3 classes. */
static kx_dataset* blobs(void) {
  static float x[64 * 4];
  static int32_t y[64];
  const int64_t xs[] = {64, 4}, ys[] = {64};
  kx_dataset* d = NULL;
  int i, j;
  for (i = 0; i < 64; ++i) {
    y[i] = i % 3;
    for (j = 0; j < 4; ++j) x[i * 4 + j] = (float)((i * 7 + j * 13) % 17) / 17.0f + (float)(y[i] == j);
  }
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_I32, ys, 1, &d));
  if (d) EXPECT_OK(kx_dataset_batch(d, 16, 0));
  return d;
}

static kx_model* mlp(kx_strategy* s, int compile) {
  const int64_t shape[] = {4};
  kx_model* m = NULL;
  kx_compile_options o;
  EXPECT_OK(kx_model_create_sequential(s, shape, 1, &m));
  if (!m) return NULL;
  EXPECT_OK(kx_model_add_dense(m, 8, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_dense(m, 3, KX_ACT_SOFTMAX));
  kx_compile_options_init(&o, sizeof o);
  o.metrics = KX_METRIC_ACCURACY;
  if (compile) EXPECT_OK(kx_model_compile(m, &o));
  return m;
}

static void test_tensorboard(kx_strategy* s, const char* scratch) {
  char dir[900], sub[1000];
  kx_callbacks* cb = NULL;
  kx_dataset* d = blobs();
  kx_model* m = mlp(s, 1);
  kx_fit_options o;
  kx_history* h = NULL;
  int found = 0;
  snprintf(dir, sizeof dir, "%s/tensorboard-c", scratch);
  EXPECT_OK(kx_callbacks_create(&cb));
  if (!cb || !d || !m) return;
  EXPECT(kx_callbacks_add_tensorboard(NULL, dir, 0, 0) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_callbacks_add_tensorboard(cb, NULL, 0, 0) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_callbacks_add_tensorboard(cb, "", 0, 0) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_callbacks_add_tensorboard(cb, dir, -1, 0) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_callbacks_add_tensorboard(cb, dir, 0, -1) == KX_E_INVALID_ARGUMENT);
  EXPECT(strstr(kx_last_error_message(), "histogram_freq") != NULL);
  EXPECT_OK(kx_callbacks_add_tensorboard(cb, dir, 2, 1));
  kx_fit_options_init(&o, sizeof o);
  o.epochs = 3;
  o.validation = d;
  EXPECT_OK(kx_fit(m, d, &o, cb, &h));
  /* train: the version, then per epoch loss, accuracy, learning rate and 4 histograms, and every
   * 2 of the 12 batches loss, accuracy and learning rate: 1 + 3 * 7 + 6 * 3. */
  snprintf(sub, sizeof sub, "%s/train", dir);
  EXPECT(count_records(sub, "epoch_loss", &found) == 1 + 3 * 7 + 6 * 3);
  EXPECT(found == 3);
  EXPECT(count_records(sub, "dense_1/kernel/histogram", &found) > 0 && found == 3);
  EXPECT(count_records(sub, "brain.Event:2", &found) > 0 && found == 1);
  /* validation: the version, then loss and accuracy per epoch. */
  snprintf(sub, sizeof sub, "%s/validation", dir);
  EXPECT(count_records(sub, "epoch_accuracy", &found) == 1 + 3 * 2);
  EXPECT(found == 3);
  kx_history_destroy(h);

  /* A log directory that cannot be made fails the fit with KX_E_IO. */
  {
    kx_callbacks* bad = NULL;
    char blocked[1000];
    FILE* f;
    snprintf(blocked, sizeof blocked, "%s/a-file", scratch);
    f = fopen(blocked, "w");
    if (f) fclose(f);
    snprintf(blocked, sizeof blocked, "%s/a-file/logs", scratch);
    EXPECT_OK(kx_callbacks_create(&bad));
    EXPECT_OK(kx_callbacks_add_tensorboard(bad, blocked, 0, 0));
    EXPECT(kx_fit(m, d, &o, bad, NULL) == KX_E_IO);
    EXPECT(strstr(kx_last_error_message(), "TensorBoard") != NULL);
    kx_callbacks_destroy(bad);
  }
  kx_callbacks_destroy(cb);
  kx_model_destroy(m);
  kx_dataset_destroy(d);
}

static void test_onnx_export(kx_strategy* s, const char* scratch) {
  char path[1000];
  unsigned char head[2] = {0, 0};
  FILE* f;
  kx_model* uncompiled = mlp(s, 0);
  kx_model* m = mlp(s, 1);
  snprintf(path, sizeof path, "%s/mlp.onnx", scratch);
  remove(path);
  if (!m || !uncompiled) return;
  EXPECT(kx_model_export_onnx(NULL, path) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_export_onnx(m, NULL) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_export_onnx(uncompiled, path) == KX_E_MISUSE);
  EXPECT((f = fopen(path, "rb")) == NULL); /* nothing written on error */
  if (f) fclose(f);
  EXPECT(kx_model_export_onnx(m, "/nonexistent-dir/x.onnx") == KX_E_IO);
  EXPECT_OK(kx_model_export_onnx(m, path));
  f = fopen(path, "rb");
  EXPECT(f != NULL);
  if (f) {
    EXPECT(fread(head, 1, 2, f) == 2);
    fclose(f);
  }
  EXPECT(head[0] == 0x08 && head[1] == 7); /* ModelProto.ir_version = 7 */
  kx_model_destroy(m);
  kx_model_destroy(uncompiled);
}

int main(int argc, char** argv) {
  kx_strategy* s = NULL;
  const char* scratch = argc > 1 ? argv[1] : ".";
  EXPECT_OK(kx_strategy_create_default(&s));
  if (s) test_tensorboard(s, scratch);
  if (s) test_onnx_export(s, scratch);
  kx_strategy_destroy(s);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
