// Writes the seed corpora of the loader fuzzers, valid inputs of each: DIR/model_json (model configs
// as to_json writes them, and single layers), DIR/idx_reader (IDX files, plain and gzip, in the
// fuzzer's [n][labels][images] framing), DIR/load_weights (files of the small model's tensors: a saved
// model, and a checksum-less safetensors file as Python writes them) and DIR/resume (checkpoints of
// the tiny fit, within an epoch and at its end).
//
//   fuzz_loader_seed_writer DIR
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_models.hpp"
#include "kx/kx.hpp"

namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string idx(const std::vector<uint32_t>& dims, uint8_t fill) {
  std::string b = {0, 0, 0x08, static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<char>(d >> s));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) b.push_back(static_cast<char>(fill + i * 37));
  return b;
}

std::string gzip(const std::string& bytes) {
  const std::string tmp = "/tmp/kx-seed-" + std::to_string(::getpid()) + ".gz";
  gzFile f = gzopen(tmp.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  std::ifstream in(tmp, std::ios::binary);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(tmp);
  return out;
}

std::string framed(const std::string& labels, const std::string& images) {
  return std::string(1, static_cast<char>(labels.size())) + labels + images;
}

// A safetensors file without kx's metadata: header length, JSON header, float32 data.
std::string plain_safetensors(const kx::Model& m) {
  const std::vector<float> w = m.get_weights();
  std::string header = "{";
  std::string data;
  for (const kx::WeightInfo& t : m.weights()) {
    const int64_t n = kx::num_elements(t.shape);
    std::string shape;
    for (int64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(data.size()) + "," + std::to_string(data.size() + 4 * n) + "]}";
    data.append(reinterpret_cast<const char*>(w.data() + t.offset), static_cast<size_t>(4 * n));
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  for (const char* sub : {"model_json", "idx_reader", "load_weights", "resume"}) fs::create_directories(dir / sub);

  // Model configs: a Sequential model, a Functional one with a skip connection, and single layers.
  {
    const kx::Strategy& s = kx::Strategy::default_strategy();
    kx::Model seq = kx::Model::sequential(s, {6, 6, 2});
    seq.add_conv2d(3, 3, 3, 1, kx::Padding::Same, kx::Activation::Relu);
    seq.add_max_pool2d(2, 2);
    seq.add_layer(R"({"class_name": "BatchNormalization", "config": {"momentum": 0.9}})");
    seq.add_flatten();
    seq.add_dropout(0.5f);
    seq.add_dense(4, kx::Activation::Softmax);
    kx::Model fn = kx::Model::functional(s, {8}, "features");
    fn.add_layer(R"({"class_name": "Dense", "config": {"name": "a", "units": 8, "activation": "relu"}})", {"features"});
    fn.add_layer(R"({"class_name": "Add", "config": {"name": "sum"}})", {"a", "features"});
    fn.add_layer(R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})", {"sum"});
    write(dir / "model_json/functional.json", std::string(1, '\0') + fn.to_json());
    write(dir / "model_json/sequential.json", std::string(1, '\0') + seq.to_json());
    const char* layers[][2] = {
        {"\x01", R"({"class_name": "Dense", "config": {"units": 10, "activation": "relu", "use_bias": false}})"},
        {"\x03", R"({"class_name": "Conv2D", "config": {"filters": 4, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same"}})"},
        {"\x03", R"({"class_name": "ZeroPadding2D", "config": {"padding": [[1, 2], [0, 1]]}})"},
        {"\x03", R"({"class_name": "AveragePooling2D", "config": {"pool_size": [2, 2]}})"},
        {"\x03", R"({"class_name": "GlobalAveragePooling2D", "config": {}})"},
        {"\x05", R"({"class_name": "Normalization", "config": {"axis": -1, "mean": [0, 1, 2, 3, 4], "variance": [1, 1, 1, 1, 1]}})"},
        {"\x05", R"({"class_name": "Activation", "config": {"activation": "tanh"}})"},
        {"\x07", R"({"module": "keras.layers", "class_name": "ReLU", "config": {"name": "relu_layer"}})"},
    };
    int n = 0;
    for (const auto& [mode, json] : layers) write(dir / ("model_json/layer-" + std::to_string(n++) + ".json"), std::string(mode) + json);
  }

  // IDX: 3 images of 2 x 2 and their labels, plain and compressed, and a 1 x 1 pair.
  {
    const std::string images = idx({3, 2, 2}, 1), labels = idx({3}, 0);
    write(dir / "idx_reader/plain.idx", framed(labels, images));
    write(dir / "idx_reader/gzip.idx", framed(gzip(labels), gzip(images)));
    write(dir / "idx_reader/one.idx", framed(idx({1}, 5), idx({1, 1, 1}, 9)));
  }

  // load_weights: the model's own saved file, and its tensors without kx's metadata.
  {
    kx::Model m = kx::fuzz::weights_model();
    const std::string saved = (dir / "load_weights/saved.kx").string();
    m.save(saved);
    write(dir / "load_weights/plain.safetensors", plain_safetensors(m));
  }

  // resume: checkpoints of the tiny fit after every step (steps 1..4: within and at the end of epochs).
  {
    kx::Model m = kx::fuzz::resume_model();
    kx::Dataset d = kx::fuzz::resume_data();
    kx::Callbacks cb;
    cb.add_model_checkpoint((dir / "resume/step-{step}.kx").string(), 1, 0);
    kx::FitOptions o;
    o.epochs = 2;
    m.fit(d, o, &cb, nullptr);
  }
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
