/* The C ABI's contract, from C: every status code has its name, the header's version macros agree with
 * the library, functions that return a count report a NULL handle as every other function does (-1
 * and a message naming the function), and the strategy switches check their arguments.
 *
 *   kx_contract_tests
 */
#include <kx/kx.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"

/* The last error names `function` and says what was NULL. */
static int message_names(const char* function, const char* what) {
  const char* m = kx_last_error_message();
  return strstr(m, function) != NULL && strstr(m, what) != NULL && strstr(m, "NULL") != NULL;
}

static void test_status_names(void) {
  /* Each code with the name of its macro, written out here independently of the library's table. */
  static const struct {
    kx_status code;
    const char* name;
  } known[] = {
      {KX_OK, "KX_OK"},
      {KX_STOPPED, "KX_STOPPED"},
      {KX_E_INVALID_ARGUMENT, "KX_E_INVALID_ARGUMENT"},
      {KX_E_MISUSE, "KX_E_MISUSE"},
      {KX_E_OUT_OF_MEMORY, "KX_E_OUT_OF_MEMORY"},
      {KX_E_DEVICE, "KX_E_DEVICE"},
      {KX_E_IO, "KX_E_IO"},
      {KX_E_CORRUPT, "KX_E_CORRUPT"},
      {KX_E_UNSUPPORTED, "KX_E_UNSUPPORTED"},
      {KX_E_DIVERGED, "KX_E_DIVERGED"},
      {KX_E_COMM, "KX_E_COMM"},
      {KX_E_INTERNAL, "KX_E_INTERNAL"},
  };
  size_t i;
  int code;
  for (i = 0; i < sizeof known / sizeof known[0]; ++i) {
    const char* name = kx_status_name(known[i].code);
    EXPECT(name != NULL && strcmp(name, known[i].name) == 0);
    if (name && strcmp(name, known[i].name) != 0)
      fprintf(stderr, "  status %d is named %s, want %s\n", (int)known[i].code, name, known[i].name);
  }
  /* Every value in the range kx uses has a name; the ones kx does not define say so, never NULL. */
  for (code = -120; code <= 5; ++code) {
    const char* name = kx_status_name(code);
    int defined = 0;
    EXPECT(name != NULL && strncmp(name, "KX_", 3) == 0);
    for (i = 0; i < sizeof known / sizeof known[0]; ++i) defined |= known[i].code == code;
    if (!defined) EXPECT(name != NULL && strcmp(name, "KX_UNKNOWN_STATUS") == 0);
  }
  EXPECT(strcmp(kx_status_name(INT32_MIN), "KX_UNKNOWN_STATUS") == 0);
  EXPECT(strcmp(kx_status_name(INT32_MAX), "KX_UNKNOWN_STATUS") == 0);
}

static void test_version(void) {
  char text[32];
  snprintf(text, sizeof text, "%d.%d.%d", KX_VERSION_MAJOR, KX_VERSION_MINOR, KX_VERSION_PATCH);
  EXPECT(KX_VERSION_NUMBER == KX_VERSION_MAJOR * 10000 + KX_VERSION_MINOR * 100 + KX_VERSION_PATCH);
  /* This test is built with the library it runs against: the header and the library agree. */
  EXPECT(kx_version_number() == (uint32_t)KX_VERSION_NUMBER);
  EXPECT(strcmp(kx_version_string(), text) == 0);
}

static void test_null_handles(void) {
  EXPECT(kx_strategy_num_replicas(NULL) == -1 && message_names("kx_strategy_num_replicas", "s"));
  EXPECT(kx_model_num_params(NULL) == -1 && message_names("kx_model_num_params", "m"));
  EXPECT(kx_model_input_size(NULL) == -1 && message_names("kx_model_input_size", "m"));
  EXPECT(kx_model_output_size(NULL) == -1 && message_names("kx_model_output_size", "m"));
  EXPECT(kx_model_num_layers(NULL) == -1 && message_names("kx_model_num_layers", "m"));
  EXPECT(kx_model_num_trainable_params(NULL) == -1 && message_names("kx_model_num_trainable_params", "m"));
  EXPECT(kx_dataset_num_samples(NULL) == -1 && message_names("kx_dataset_num_samples", "d"));
  EXPECT(kx_history_epochs(NULL) == -1 && message_names("kx_history_epochs", "h"));
  EXPECT(kx_strategy_set_step_graphs(NULL, KX_STEP_GRAPHS_OFF) == KX_E_INVALID_ARGUMENT &&
         message_names("kx_strategy_set_step_graphs", "s"));
  EXPECT(kx_strategy_set_data_streaming(NULL, KX_DATA_STREAMING_ALWAYS) == KX_E_INVALID_ARGUMENT &&
         message_names("kx_strategy_set_data_streaming", "s"));
  EXPECT(kx_strategy_set_cudnn(NULL, 0) == KX_E_INVALID_ARGUMENT && message_names("kx_strategy_set_cudnn", "s"));
}

static void test_strategy_switches(void) {
  kx_strategy* s = NULL;
  EXPECT(kx_strategy_create_default(&s) == KX_OK);
  if (!s) return;
  EXPECT(kx_strategy_set_step_graphs(s, KX_STEP_GRAPHS_OFF) == KX_OK);
  EXPECT(kx_strategy_set_step_graphs(s, KX_STEP_GRAPHS_EMULATE) == KX_OK);
  EXPECT(kx_strategy_set_step_graphs(s, KX_STEP_GRAPHS_AUTO) == KX_OK);
  EXPECT(kx_strategy_set_step_graphs(s, (kx_step_graphs)3) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_strategy_set_step_graphs(s, (kx_step_graphs)-1) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_strategy_set_data_streaming(s, KX_DATA_STREAMING_ALWAYS) == KX_OK);
  EXPECT(kx_strategy_set_data_streaming(s, (kx_data_streaming)2) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_strategy_set_cudnn(s, 0) == KX_OK);
  kx_strategy_destroy(s);
}

int main(void) {
  test_status_names();
  test_version();
  test_null_handles();
  test_strategy_switches();
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
