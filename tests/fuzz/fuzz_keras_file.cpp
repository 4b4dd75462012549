// libFuzzer target for Keras's files (kx_model_load_keras, and kx_model_load_weights of .h5 and
// .keras files): any bytes, as a .keras zip or an HDF5 file, open or give a kx::Error, never a crash,
// a hang or an allocation the file's size does not justify. Seeds: tests/fuzz/corpus/keras_file/
// (files made by Keras 3). HDF5 goes through kx-hdf5-reader as in libkx, so libhdf5's own crashes on
// damaged files (1.10.8: H5HG_read) must come back here as Corrupt; at exit the target prints how
// often the reader died or was stopped. Without libhdf5 only the zip and config paths are reached.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/test_hooks.hpp"
#include "fuzz_models.hpp"
#include "kx/kx.hpp"

namespace {

struct ReaderOutcomes {
  long inputs = 0, crashes = 0, stopped = 0, corrupt = 0, other = 0;
  ~ReaderOutcomes() {
    std::fprintf(stderr,
                 "fuzz_keras_file: %ld inputs; errors: %ld Corrupt, %ld other; of them the HDF5 reader crashed %ld "
                 "times (a signal, or its sanitizer's exit status) and was stopped (time, size) %ld times\n",
                 inputs, corrupt, other, crashes, stopped);
  }
  void note(const kx::Error& e) {
    const std::string m = e.what();
    (e.status() == kx::Status::Corrupt ? corrupt : other)++;
    if (m.find("died with signal") != std::string::npos || m.find("exited with status") != std::string::npos) ++crashes;
    if (m.find("took longer than") != std::string::npos || m.find("wrote more than") != std::string::npos ||
        m.find("was killed") != std::string::npos || m.find("CPU time") != std::string::npos)
      ++stopped;
  }
};

ReaderOutcomes outcomes;  // the fuzz run's tally, printed at exit

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("KX_HDF5_READER", KX_HDF5_READER_PATH, 0);  // the build's reader unless one is named
  // libhdf5 spins forever on some damaged global heaps: the reader's deadline (10 s and more in
  // libkx) is shortened so that three reads of one input stay within libFuzzer's -timeout=10.
  kx::config::test_hooks().hdf5_reader_timeout = std::chrono::milliseconds(2000);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kx::fuzz::ScratchFile file("model.keras");
  static kx::Model weights = kx::fuzz::weights_model();
  file.write(data, size);
  ++outcomes.inputs;
  try {
    kx::Model m = kx::Model::load_keras(kx::Strategy::default_strategy(), file.path());
  } catch (const kx::Error& e) {
    outcomes.note(e);  // a clear error is the expected outcome for damaged input
  }
  for (bool skip_mismatch : {false, true}) {
    try {
      weights.load_weights(file.path(), skip_mismatch);
    } catch (const kx::Error& e) {
      outcomes.note(e);
    }
  }
  return 0;
}
