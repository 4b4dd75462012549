/* A stand-in for libcuda.so.1 in the driver probe's tests, built in several variants:
 * KX_FAKE_DEVICES GPUs, cuInit failing with KX_FAKE_INIT_RESULT, or (KX_FAKE_WITHOUT_ENTRIES) neither entry. */
#ifndef KX_FAKE_WITHOUT_ENTRIES
int cuInit(unsigned int flags) {
  (void)flags;
  return KX_FAKE_INIT_RESULT;
}
int cuDeviceGetCount(int* count) {
  *count = KX_FAKE_DEVICES;
  return 0;
}
int cuGetErrorString(int error, const char** text) {
  *text = error == 100 ? "no CUDA-capable device is detected" : "unknown error";
  return 0;
}
#else
int kx_fake_library_without_a_driver(void) { return 0; }
#endif
