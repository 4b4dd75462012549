// libFuzzer target for the stream kx-hdf5-reader writes and libkx parses (io/hdf5_tree.*): any bytes,
// as that stream, parse or give a kx::Error, and every query of what parsed answers or gives a
// kx::Error — never a crash, an overread or an allocation the stream's size does not justify. Seeds:
// the reader's streams of Keras's files (scripts/run_fuzz.sh makes them with build-fuzz/kx-hdf5-reader).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_tree.hpp"
#include "kx/error.hpp"

namespace {

constexpr const char* kAttributes[] = {"name", "layer_names", "weight_names", "model_config", "training_config",
                                       "keras_version", "backend"};

template <class F>
void tolerate(F f) {
  try {
    f();
  } catch (const kx::Error&) {
    // a clear error is the expected outcome for damaged input
  }
}

void visit(const kx::io::Hdf5Tree& t, const std::string& path, int depth) {
  for (const char* a : kAttributes) tolerate([&] { t.strings(path, a); });
  switch (t.kind(path)) {
    case kx::io::Hdf5Tree::Kind::Group:
      if (depth < 16)
        tolerate([&] {
          for (const std::string& c : t.children(path)) visit(t, path.empty() ? c : path + "/" + c, depth + 1);
        });
      break;
    case kx::io::Hdf5Tree::Kind::Dataset:
      tolerate([&] {
        const kx::Shape s = t.shape(path);
        if (kx::num_elements(s) <= (1 << 20)) {
          std::vector<float> values(static_cast<size_t>(kx::num_elements(s)));
          t.read(path, s, values.data());
        }
      });
      tolerate([&] { t.read_scalar(path); });
      break;
    default:
      tolerate([&] { t.children(path); });
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string stream(reinterpret_cast<const char*>(data), size);
  tolerate([&] {
    const kx::io::Hdf5Tree t(std::move(stream), size, "fuzz.h5");
    visit(t, "", 0);
  });
  return 0;
}
