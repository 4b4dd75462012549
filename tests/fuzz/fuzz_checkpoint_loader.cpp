// libFuzzer target for the checkpoint loader: any bytes must give a model or a kx::Error, never a
// crash, a hang or a huge allocation. Each input is decoded twice: with the checksums checked (the
// real path) and without, so that mutations reach the metadata parsing and the restore behind them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/train/train_position.hpp"
#include "core/model/model_impl.hpp"
#include "io/safetensors.hpp"
#include "kx/kx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (kx::io::Checksums checksums : {kx::io::Checksums::Required, kx::io::Checksums::Unchecked}) {
    try {
      const kx::io::SafetensorsFile f = kx::io::SafetensorsFile::decode(bytes, "fuzz-input", checksums);
      kx::Model m = kx::Model::Impl::load_file(kx::Strategy::default_strategy(), f);
      if (kx::core::has_position(f)) {
        kx::core::get_position(f);
        kx::core::get_data_order(f);
      }
    } catch (const kx::Error&) {
      // a clear error is the expected outcome for damaged input
    }
  }
  return 0;
}
