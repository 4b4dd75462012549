/* Calls into the model being fit, from its own callback: evaluate and predict work there (as Keras's
 * custom validation callbacks use them) and give what they give outside a fit; fit, train/test_on_batch
 * and compile are KX_E_MISUSE with a message. Either way the fit ends exactly as a fit without them
 * (bitwise the same weights and epoch loss). Another model may be used there.
 *
 *   kx_reentrancy_tests
 */
#include <kx/kx.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"

#define N 64
#define IN 6

static float g_x[N * IN], g_y[N], g_x2[N * IN];

typedef struct {
  kx_model* fitting;
  kx_model* other;
  kx_dataset* data;
  kx_dataset* other_data; /* another dataset: evaluating it moves the replicas' feeds */
  int calls;
  int misuse;    /* calls on the fitting model that answered KX_E_MISUSE */
  int nested_ok; /* evaluate and predict on the fitting model that worked */
  int other_ok;  /* calls on the other model that worked */
  double eval_loss;
  float predicted[6];
} probe;

static int32_t reenter(const kx_event* ev, void* user_data) {
  probe* p = (probe*)user_data;
  double loss, acc;
  float out[2 * 3], w[128];
  kx_compile_options co;
  if (ev->kind != KX_EVENT_BATCH_END || p->calls++ > 0) return 0;
  kx_compile_options_init(&co, sizeof co);
  p->misuse += kx_fit(p->fitting, p->data, NULL, NULL, NULL) == KX_E_MISUSE && kx_last_error_message()[0];
  p->nested_ok += kx_evaluate(p->fitting, p->other_data, &p->eval_loss, &acc) == KX_OK;
  p->nested_ok += kx_predict(p->fitting, g_x, 2, p->predicted, 6) == KX_OK;
  p->misuse += kx_model_train_on_batch(p->fitting, g_x, g_y, 8, NULL, NULL) == KX_E_MISUSE;
  p->misuse += kx_model_test_on_batch(p->fitting, g_x, g_y, 8, NULL, NULL) == KX_E_MISUSE;
  p->misuse += kx_model_compile(p->fitting, &co) == KX_E_MISUSE;
  /* The same weights in another model give the same figures: the nested calls read the fit's state. */
  p->other_ok += kx_model_get_weights(p->fitting, w, 128) == KX_OK;
  p->other_ok += kx_model_set_weights(p->other, w, (size_t)kx_model_num_params(p->other)) == KX_OK;
  p->other_ok += kx_predict(p->other, g_x, 2, out, 6) == KX_OK && memcmp(out, p->predicted, sizeof out) == 0;
  p->other_ok += kx_evaluate(p->other, p->other_data, &loss, &acc) == KX_OK && loss == p->eval_loss;
  return 0;
}

static kx_model* make_model(kx_strategy* s) {
  const int64_t shape[1] = {IN};
  kx_model* m = NULL;
  kx_compile_options co;
  if (kx_model_create_sequential(s, shape, 1, &m) != KX_OK) return NULL;
  kx_compile_options_init(&co, sizeof co);
  co.seed = 5;
  if (kx_model_add_dense_flags(m, 8, KX_ACT_RELU, 0) != KX_OK ||
      kx_model_add_dense_flags(m, 3, KX_ACT_SOFTMAX, 0) != KX_OK || kx_model_compile(m, &co) != KX_OK) {
    kx_model_destroy(m);
    return NULL;
  }
  return m;
}

int main(void) {
  kx_strategy* s = NULL;
  kx_dataset* d = NULL;
  kx_dataset* d2 = NULL;
  kx_model *quiet, *probed, *other;
  kx_callbacks* cb = NULL;
  kx_fit_options fo;
  probe p;
  float a[128], b[128];
  kx_history *hq = NULL, *hp = NULL;
  double lq = -1, lp = -2;
  const int64_t xs[2] = {N, IN}, ys[1] = {N};
  int i;
  for (i = 0; i < N * IN; ++i) g_x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
  for (i = 0; i < N; ++i) g_y[i] = (float)(i % 3);
  for (i = 0; i < N * IN; ++i) g_x2[i] = 1.0f - 2.0f * g_x[i];
  if (kx_strategy_create_default(&s) != KX_OK ||
      kx_dataset_from_arrays(g_x, KX_DTYPE_F32, xs, 2, g_y, KX_DTYPE_F32, ys, 1, &d) != KX_OK ||
      kx_dataset_batch(d, 16, 0) != KX_OK || kx_callbacks_create(&cb) != KX_OK ||
      kx_dataset_from_arrays(g_x2, KX_DTYPE_F32, xs, 2, g_y, KX_DTYPE_F32, ys, 1, &d2) != KX_OK ||
      kx_dataset_batch(d2, 32, 0) != KX_OK) {
    fprintf(stderr, "setup: %s\n", kx_last_error_message());
    return 1;
  }
  quiet = make_model(s);
  probed = make_model(s);
  other = make_model(s);
  EXPECT(quiet && probed && other);
  if (!quiet || !probed || !other) return 1;
  memset(&p, 0, sizeof p);
  p.fitting = probed;
  p.other = other;
  p.data = d;
  p.other_data = d2;
  /* No batch metrics: the fit leaves its steps' loss sums unread when the callback runs, so evaluate
   * takes them from the backends and must hand them back. */
  EXPECT(kx_callbacks_add_function_flags(cb, reenter, &p, KX_CALLBACK_NO_BATCH_METRICS) == KX_OK);
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = 2;
  EXPECT(kx_fit(quiet, d, &fo, NULL, &hq) == KX_OK);
  EXPECT(kx_fit(probed, d, &fo, cb, &hp) == KX_OK);
  EXPECT(hq && hp && kx_history_get(hq, "loss", 0, &lq) == KX_OK && kx_history_get(hp, "loss", 0, &lp) == KX_OK);
  EXPECT(lq == lp);
  kx_history_destroy(hq);
  kx_history_destroy(hp);
  EXPECT(p.calls > 1 && p.misuse == 4 && p.nested_ok == 2 && p.other_ok == 4);
  EXPECT(kx_model_num_params(quiet) <= 128);
  EXPECT(kx_model_get_weights(quiet, a, 128) == KX_OK && kx_model_get_weights(probed, b, 128) == KX_OK);
  EXPECT(memcmp(a, b, sizeof(float) * (size_t)kx_model_num_params(quiet)) == 0);
  /* After the fit the model is the caller's again. */
  EXPECT(kx_predict(probed, g_x, 2, b, 6) == KX_OK);
  kx_callbacks_destroy(cb);
  kx_model_destroy(quiet);
  kx_model_destroy(probed);
  kx_model_destroy(other);
  kx_dataset_destroy(d);
  kx_dataset_destroy(d2);
  kx_strategy_destroy(s);
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  return g_failures == 0 ? 0 : 1;
}
