// libFuzzer target for the IDX reader (Dataset::from_idx, kx_dataset_from_idx): any bytes give a
// dataset or a kx::Error, never a crash, a hang or an allocation beyond what the files hold. The
// input is [n][n bytes: the labels file][the rest: the images file]; each is written to a file as it
// is (so a gzip stream the fuzzer made is read as gzip) and read, then written gzip-compressed and
// read again.
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_models.hpp"
#include "kx/kx.hpp"

namespace {

const kx::fuzz::ScratchFile kImages("images"), kLabels("labels");

void write_gzip(const kx::fuzz::ScratchFile& file, const uint8_t* data, size_t size) {
  gzFile f = gzopen(file.path().c_str(), "wb1");
  if (!f) return;
  if (size) gzwrite(f, data, static_cast<unsigned>(size));
  gzclose(f);
}

void read() {
  try {
    kx::Dataset d = kx::Dataset::from_idx(kImages.path(), kLabels.path());
    d.num_samples();
  } catch (const kx::Error&) {
    // a clear error is the expected outcome for damaged input
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t n = std::min<size_t>(data[0], size - 1);
  const uint8_t* labels = data + 1;
  const uint8_t* images = labels + n;
  const size_t images_size = size - 1 - n;
  kLabels.write(labels, n);
  kImages.write(images, images_size);
  read();
  write_gzip(kLabels, labels, n);
  write_gzip(kImages, images, images_size);
  read();
  return 0;
}
