// libFuzzer target for resume metadata: any bytes, as the checkpoint a fit of a tiny model resumes
// from (FitOptions::resume_from, kx_fit_options.resume_from), give a fit that trains from it or a
// kx::Error, never a crash, an overflow (UBSan) or a hang. A checkpoint's checksums would stop almost
// every mutation at the door: an input that decodes without them is written back with fresh ones, so
// that mutations reach the metadata and the restore; one that does not is written as it is.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_models.hpp"
#include "io/safetensors.hpp"
#include "kx/kx.hpp"

namespace {

// The input with its checksums made right, or the input itself when it does not decode.
std::string with_checksums(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const kx::io::SafetensorsFile f = kx::io::SafetensorsFile::decode(bytes, "fuzz-input", kx::io::Checksums::Unchecked);
    std::vector<std::vector<float>> values;
    values.reserve(f.tensors().size());
    std::vector<kx::io::TensorToWrite> tensors;
    for (const kx::io::TensorEntry& e : f.tensors()) {
      values.emplace_back(static_cast<size_t>(kx::num_elements(e.shape)));
      f.read(e, values.back().data());
      tensors.push_back({e.name, e.shape, values.back().data()});
    }
    return kx::io::encode_safetensors(tensors, f.metadata());
  } catch (const kx::Error&) {
    return bytes;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kx::fuzz::ScratchFile file("checkpoint.kx");
  static kx::Dataset train = kx::fuzz::resume_data();
  const std::string bytes = with_checksums(data, size);
  file.write(bytes.data(), bytes.size());
  try {
    kx::Model m = kx::fuzz::resume_model();
    m.fit(train, kx::fuzz::resume_options(file.path()), nullptr, nullptr);
  } catch (const kx::Error&) {
    // a clear error is the expected outcome for a damaged or crafted checkpoint
  }
  return 0;
}
