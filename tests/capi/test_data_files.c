/* The C ABI of the data pipeline: .npy and CSV files, image-folder errors, class names, augmentation
 * maps and their arguments, and a fit that reads a mapped dataset with prefetch and cache. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"
/* These tests call the deprecated twins too: they stay part of the ABI. */
#define KX_ALLOW_DEPRECATED
#include "kx/kx.h"

#define EXPECT_OK(call) EXPECT((call) == KX_OK)
#define EXPECT_ERR(code, call) EXPECT((call) == (code))

static void write_file(const char* path, const void* bytes, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f) return;
  fwrite(bytes, 1, n, f);
  fclose(f);
}

/* A version 1 .npy of `count` little-endian values with the given descr and shape text. */
static void write_npy(const char* path, const char* descr, const char* shape, const void* data, size_t bytes) {
  char header[128];
  unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
  int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
  FILE* f = fopen(path, "wb");
  if (!f) return;
  while ((10 + len + 1) % 64 != 0) header[len++] = ' ';
  header[len++] = '\n';
  prefix[8] = (unsigned char)(len & 0xff);
  prefix[9] = (unsigned char)(len >> 8);
  fwrite(prefix, 1, sizeof prefix, f);
  fwrite(header, 1, (size_t)len, f);
  fwrite(data, 1, bytes, f);
  fclose(f);
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : ".";
  char x_path[1024], y_path[1024], csv_path[1024];
  const double x[6] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5};
  const int64_t y[3] = {0, 1, 0};
  const char* csv = "f1,label,f2\n1,0,2\n3,1,4\n";
  const char* bad_csv = "f1,label,f2\n1,0,2\n3,1,four\n";
  const char* name = NULL;
  float mean[2], variance[2];
  kx_dataset* d = NULL;
  kx_dataset* images = NULL;
  float pixels[2 * 4 * 4 * 3];
  int32_t labels[2] = {0, 1};
  const int64_t px_shape[4] = {2, 4, 4, 3}, label_shape[1] = {2}, input[3] = {2, 2, 3};
  kx_strategy* s = NULL;
  kx_model* m = NULL;
  kx_compile_options co;
  kx_fit_options fo;
  int i;

  snprintf(x_path, sizeof x_path, "%s/capi_x.npy", dir);
  snprintf(y_path, sizeof y_path, "%s/capi_y.npy", dir);
  snprintf(csv_path, sizeof csv_path, "%s/capi.csv", dir);

  /* .npy */
  write_npy(x_path, "<f8", "(3, 2)", x, sizeof x);
  write_npy(y_path, "<i8", "(3,)", y, sizeof y);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_npy(NULL, y_path, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_npy(x_path, y_path, NULL));
  EXPECT_OK(kx_dataset_from_npy(x_path, y_path, &d));
  EXPECT(kx_dataset_num_samples(d) == 3);
  EXPECT_OK(kx_dataset_feature_moments(d, mean, variance, 2));
  EXPECT(mean[0] == 2.5f && mean[1] == 3.5f);
  EXPECT(kx_dataset_num_classes(d) == 0 && kx_dataset_num_skipped(d) == 0);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_class_name(d, 0, &name));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_random_flip(d, 1)); /* samples are not images */
  kx_dataset_destroy(d);
  d = NULL;
  write_npy(x_path, ">f4", "(3, 2)", x, 24);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_npy(x_path, y_path, &d));
  EXPECT(strstr(kx_last_error_message(), "capi_x.npy") != NULL);
  write_file(x_path, "junk", 4);
  EXPECT_ERR(KX_E_CORRUPT, kx_dataset_from_npy(x_path, y_path, &d));
  EXPECT(d == NULL);
  remove(x_path);
  remove(y_path);

  /* CSV */
  write_file(csv_path, csv, strlen(csv));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_csv(csv_path, NULL, &d));
  EXPECT_OK(kx_dataset_from_csv(csv_path, "label", &d));
  EXPECT(kx_dataset_num_samples(d) == 2);
  EXPECT_OK(kx_dataset_feature_moments(d, mean, variance, 2));
  EXPECT(mean[0] == 2.0f && mean[1] == 3.0f);
  kx_dataset_destroy(d);
  d = NULL;
  write_file(csv_path, bad_csv, strlen(bad_csv));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_csv(csv_path, "label", &d));
  EXPECT(strstr(kx_last_error_message(), "line 3, column 3 ('f2')") != NULL);
  remove(csv_path);

  /* Image folders: the errors (the folder itself is tested in C++ and the bindings) */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_image_directory(NULL, 8, 8, 3, &images));
  EXPECT(kx_dataset_from_image_directory("/nonexistent/kx-images", 8, 8, 3, &images) ==
         (kx_dataset_from_image_directory(dir, 8, 8, 3, &images) == KX_E_UNSUPPORTED ? KX_E_UNSUPPORTED : KX_E_IO));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_image_directory(dir, 8, 8, 2, &images));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_image_directory(dir, 0, 8, 3, &images));
  EXPECT(images == NULL);
  EXPECT(kx_dataset_num_classes(NULL) == -1 && kx_dataset_num_skipped(NULL) == -1);

  /* Augmentation over image arrays, read by fit with prefetch and a memory cache */
  for (i = 0; i < 2 * 4 * 4 * 3; ++i) pixels[i] = (float)(i % 17) / 17.0f;
  EXPECT_OK(kx_dataset_from_arrays(pixels, KX_DTYPE_F32, px_shape, 4, labels, KX_DTYPE_I32, label_shape, 1, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_random_flip(NULL, 1));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_random_crop(d, 5, 2, 1));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_random_crop(d, 0, 2, 1));
  EXPECT_OK(kx_dataset_random_flip(d, 1));
  EXPECT_OK(kx_dataset_random_crop(d, 2, 2, 2));
  EXPECT_OK(kx_dataset_prefetch(d, 2));
  EXPECT_OK(kx_dataset_cache(d, NULL));
  EXPECT_OK(kx_dataset_batch(d, 1, 0));
  EXPECT_OK(kx_strategy_create_default(&s));
  EXPECT_OK(kx_model_create_sequential(s, input, 3, &m));
  EXPECT_OK(kx_model_add_flatten(m));
  EXPECT_OK(kx_model_add_dense(m, 2, KX_ACT_SOFTMAX));
  kx_compile_options_init(&co, sizeof co);
  EXPECT_OK(kx_model_compile(m, &co));
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = 2;
  EXPECT_OK(kx_fit(m, d, &fo, NULL, NULL));
  kx_model_destroy(m);
  kx_strategy_destroy(s);
  kx_dataset_destroy(d);

  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
