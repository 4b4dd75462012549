// libFuzzer target for Keras's files (kx_model_load_keras, and kx_model_load_weights of .h5 and
// .keras files): any bytes, as a .keras zip or an HDF5 file, open or give a kx::Error, never a crash,
// a hang or an allocation the file's size does not justify. Seeds: tests/fuzz/corpus/keras_file/
// (files made by Keras 3). Without libhdf5 only the zip and config paths are reached.
#include <cstddef>
#include <cstdint>

#include "fuzz_models.hpp"
#include "kx/kx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kx::fuzz::ScratchFile file("model.keras");
  static kx::Model weights = kx::fuzz::weights_model();
  file.write(data, size);
  try {
    kx::Model m = kx::Model::load_keras(kx::Strategy::default_strategy(), file.path());
  } catch (const kx::Error&) {
    // a clear error is the expected outcome for damaged input
  }
  for (bool skip_mismatch : {false, true}) {
    try {
      weights.load_weights(file.path(), skip_mismatch);
    } catch (const kx::Error&) {
    }
  }
  return 0;
}
