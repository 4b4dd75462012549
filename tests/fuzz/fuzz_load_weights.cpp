// libFuzzer target for load_weights (kx_model_load_weights): any bytes, as a safetensors file whose
// tensors go into a small compiled model by name, load or give a kx::Error, never a crash, a hang or a
// huge allocation. Each input is loaded strictly, then skipping mismatches.
#include <cstddef>
#include <cstdint>

#include "fuzz_models.hpp"
#include "kx/kx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kx::fuzz::ScratchFile file("weights.safetensors");
  static kx::Model model = kx::fuzz::weights_model();
  file.write(data, size);
  for (bool skip_mismatch : {false, true}) {
    try {
      model.load_weights(file.path(), skip_mismatch);
    } catch (const kx::Error&) {
      // a clear error is the expected outcome for damaged input
    }
  }
  return 0;
}
