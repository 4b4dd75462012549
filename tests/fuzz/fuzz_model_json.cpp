// libFuzzer target for the Keras JSON config readers: any bytes give a model or a kx::Error, never a
// crash, a hang or a huge allocation. The first byte picks what the rest is: even, a whole model's
// config (Model::from_json, kx_model_from_json); odd, one layer's config (Model::add_layer,
// kx_model_add_layer) added to a model whose input shape the byte's next bits pick. A model that reads
// is written back (to_json, summary) and read again, and compiled when it is small.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kx/kx.hpp"

namespace {

const kx::Shape kInputs[] = {{8}, {6, 6, 2}, {4, 5}, {1}};

void exercise(kx::Model& m) {
  const std::string json = m.to_json();
  m.summary();
  kx::Model again = kx::Model::from_json(kx::Strategy::default_strategy(), json);
  // Compiling allocates the weights: only for models of a size a test would build.
  if (m.num_params() <= (int64_t{1} << 16)) m.compile(kx::CompileOptions{});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if ((data[0] & 1) == 0) {
      kx::Model m = kx::Model::from_json(kx::Strategy::default_strategy(), text);
      exercise(m);
    } else {
      kx::Model m = kx::Model::sequential(kx::Strategy::default_strategy(), kInputs[(data[0] >> 1) & 3]);
      m.add_layer(text);
      exercise(m);
    }
  } catch (const kx::Error&) {
    // a clear error is the expected outcome for a config kx cannot build
  }
  return 0;
}
