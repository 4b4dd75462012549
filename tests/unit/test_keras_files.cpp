// Keras's files: the zip reader and writer of .keras files against hostile archives, and (where
// libhdf5 is installed; skipped otherwise; read through kx-hdf5-reader) .keras / .h5 / .weights.h5 files made by the real Keras
// (tests/fuzz/corpus/keras_file/, tests/tools/make_keras_fixtures.py), kx's own .keras files, and
// damaged or crafted ones: Corrupt or Unsupported with a message that names the problem.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/hdf5_writer.hpp"
#include "io/json.hpp"
#include "io/stored_zip.hpp"
#include "kx/kx.hpp"

namespace fs = std::filesystem;

namespace kx {
namespace {

const fs::path kFixtures = fs::path(KX_SOURCE_DIR) / "tests/fuzz/corpus/keras_file";

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kx_keras_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

// The status and message of what f throws; Ok and "" when it does not.
template <class F>
std::pair<Status, std::string> outcome(F f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.status(), e.what()};
  }
  return {Status::Ok, ""};
}

// libhdf5 is there (writing runs it in this process), and the reader program is found: the build's,
// unless the environment names another.
bool hdf5_available() {
  ::setenv("KX_HDF5_READER", KX_HDF5_READER_PATH, 0);
  return outcome([] { io::Hdf5Writer f; }).first == Status::Ok;
}

#define REQUIRE_HDF5() \
  if (!hdf5_available()) GTEST_SKIP() << "libhdf5 is not installed"

// ---- the zip of .keras files ----

TEST(KerasZip, StoredEntriesRoundTrip) {
  const std::string zip = io::write_stored_zip({{"a.json", "{\"x\": 1}"}, {"empty", ""}, {"b.bin", std::string(300, '\7')}});
  ASSERT_TRUE(io::looks_like_zip(zip));
  const io::ZipArchive archive(zip, "test.keras");
  ASSERT_EQ(archive.entries().size(), 3u);
  EXPECT_EQ(archive.read(*archive.find("a.json")), "{\"x\": 1}");
  EXPECT_EQ(archive.read(*archive.find("empty")), "");
  EXPECT_EQ(archive.read(*archive.find("b.bin")), std::string(300, '\7'));
  EXPECT_EQ(archive.find("missing"), nullptr);
}

TEST(KerasZip, EveryTruncationIsCorruptNeverAnOverread) {
  const std::string zip = io::write_stored_zip({{"config.json", "{}"}, {"model.weights.h5", std::string(64, 'w')}});
  for (size_t n = 0; n < zip.size(); ++n) {
    const std::string cut = zip.substr(0, n);
    const auto [status, message] = outcome([&] {
      const io::ZipArchive a(cut, "cut.keras");
      for (const auto& e : a.entries()) a.read(e);
    });
    EXPECT_EQ(status, Status::Corrupt) << "length " << n << ": " << message;
  }
}

TEST(KerasZip, DamageIsNamed) {
  const std::string zip = io::write_stored_zip({{"config.json", "{\"class_name\": 1}"}});
  std::string flipped = zip;
  flipped[zip.find("class_name")] ^= 1;  // a byte of the entry's data: the CRC32 no longer matches
  const auto crc = outcome([&] {
    const io::ZipArchive a(flipped, "f.keras");
    a.read(a.entries().front());
  });
  EXPECT_EQ(crc.first, Status::Corrupt);
  EXPECT_NE(crc.second.find("CRC32"), std::string::npos) << crc.second;
  EXPECT_NE(crc.second.find("f.keras"), std::string::npos) << crc.second;

  const size_t central = zip.find("PK\x01\x02");
  std::string huge = zip;  // the entry claims 4 GiB - 2 bytes: past the archive
  huge[central + 20] = huge[central + 24] = '\xfe';
  huge[central + 21] = huge[central + 22] = huge[central + 23] = '\xff';
  huge[central + 25] = huge[central + 26] = huge[central + 27] = '\xff';
  EXPECT_EQ(outcome([&] { io::ZipArchive a(huge, "h.keras"); }).first, Status::Corrupt);

  std::string zip64 = zip;  // Zip64's marker in the entry's sizes
  for (int i = 20; i < 28; ++i) zip64[central + i] = '\xff';
  EXPECT_EQ(outcome([&] { io::ZipArchive a(zip64, "z.keras"); }).first, Status::Unsupported);

  std::string encrypted = zip;
  encrypted[central + 8] |= 1;
  EXPECT_EQ(outcome([&] { io::ZipArchive a(encrypted, "e.keras"); }).first, Status::Unsupported);

  std::string method = zip;
  method[central + 10] = 12;  // bzip2
  const auto m = outcome([&] {
    const io::ZipArchive a(method, "m.keras");
    a.read(a.entries().front());
  });
  EXPECT_EQ(m.first, Status::Unsupported);
  EXPECT_NE(m.second.find("method 12"), std::string::npos) << m.second;
}

TEST(KerasZip, DeflatedEntriesInflateAndBombsAreRefused) {
  const std::string text(5000, 'k');
  std::string packed(compressBound(text.size()), '\0');
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(packed.data());
  z.avail_out = static_cast<uInt>(packed.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  packed.resize(z.total_out);
  deflateEnd(&z);
  // A stored archive of the packed bytes, then marked deflated with the true sizes and CRC.
  std::string zip = io::write_stored_zip({{"config.json", packed}});
  const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
  const auto patch = [&](std::string& b, size_t header, uint32_t size) {
    b[header + 8] = 8;  // the method, at the same offset after each header's signature and version
    for (int i = 0; i < 4; ++i) {
      b[header + 14 + i] = static_cast<char>(crc >> (8 * i));
      b[header + 22 + i] = static_cast<char>(size >> (8 * i));
    }
  };
  const size_t central = zip.find("PK\x01\x02");
  patch(zip, 0, static_cast<uint32_t>(text.size()));
  patch(zip, central + 2, static_cast<uint32_t>(text.size()));
  const io::ZipArchive a(zip, "d.keras");
  EXPECT_EQ(a.read(a.entries().front()), text);

  std::string bomb = zip;
  patch(bomb, central + 2, 0xfff00000u);  // claims ~4 GiB from a few bytes: refused before allocating
  const auto b = outcome([&] {
    const io::ZipArchive a(bomb, "bomb.keras");
    a.read(a.entries().front());
  });
  EXPECT_EQ(b.first, Status::Corrupt);
  EXPECT_NE(b.second.find("inflate"), std::string::npos) << b.second;
}

// ---- Keras's files through libhdf5 ----

TEST(KerasFiles, OpensWhatKerasWroteAndPredictsAsKeras) {
  REQUIRE_HDF5();
  std::ifstream expected_in(kFixtures / "expected.txt");
  std::vector<float> expected(4);
  for (float& v : expected) expected_in >> v;
  const float x[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0, 0, 0, 0};
  for (const char* file : {"mlp.keras", "mlp.h5"}) {
    SCOPED_TRACE(file);
    Model m = Model::load_keras(Strategy::default_strategy(), (kFixtures / file).string());
    EXPECT_TRUE(m.compiled());
    EXPECT_EQ(m.layer_names(), (std::vector<std::string>{"hidden", "probs"}));
    const std::vector<float> p = m.predict(x, 2);
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(p[i], expected[i], 1e-5 * std::abs(expected[i]) + 1e-7);
  }
  Model fresh = Model::load_keras(Strategy::default_strategy(), (kFixtures / "mlp.keras").string());
  fresh.set_weights(std::vector<float>(static_cast<size_t>(fresh.num_params()), 0.0f));
  const WeightsReport r = fresh.load_weights((kFixtures / "mlp.weights.h5").string(), false);
  EXPECT_EQ(r.loaded, 4);
  EXPECT_EQ(r.skipped, 0);
  const std::vector<float> p = fresh.predict(x, 2);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(p[i], expected[i], 1e-5 * std::abs(expected[i]) + 1e-7);
  // An uncompiled functional model opens uncompiled, its weights kept for compile.
  Model graph = Model::load_keras(Strategy::default_strategy(), (kFixtures / "graph.keras").string());
  EXPECT_FALSE(graph.compiled());
  EXPECT_EQ(graph.layer_names().back(), "sum");
}

TEST(KerasFiles, KxsOwnKerasFileRoundTrips) {
  REQUIRE_HDF5();
  Model m = Model::load_keras(Strategy::default_strategy(), (kFixtures / "mlp.keras").string());
  const float x[8] = {1, 2, 3, 4, -1, 0, 1, 0}, y[2] = {1, 0};
  m.train_on_batch(x, y, 2);
  const fs::path out = scratch("roundtrip.keras");
  m.save_keras(out.string());
  Model again = Model::load_keras(Strategy::default_strategy(), out.string());
  EXPECT_EQ(again.get_weights(), m.get_weights());
  // The optimizer state came along: the next steps are the same.
  m.train_on_batch(x, y, 2);
  again.train_on_batch(x, y, 2);
  EXPECT_EQ(again.get_weights(), m.get_weights());
  EXPECT_EQ(outcome([&] { Model::load(Strategy::default_strategy(), out.string()); }).first, Status::Corrupt);
}

// The fixture's .keras file with its config.json replaced by edit(config).
template <class Edit>
fs::path with_config(const std::string& name, Edit edit) {
  const std::string bytes = read_bytes(kFixtures / "mlp.keras");
  const io::ZipArchive zip(bytes, "mlp.keras");
  std::string config = zip.read(*zip.find("config.json"));
  edit(config);
  const fs::path p = scratch(name);
  write_bytes(p, io::write_stored_zip({{"config.json", config}, {"model.weights.h5", zip.read(*zip.find("model.weights.h5"))}}));
  return p;
}

void replace(std::string& s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
}

TEST(KerasFiles, WhatKxCannotTrainIsUnsupportedByName) {
  REQUIRE_HDF5();
  const struct {
    const char* from;
    const char* to;
    const char* named;
  } cases[] = {
      {"\"class_name\": \"Dense\"", "\"class_name\": \"SimpleRNN\"", "layer class SimpleRNN"},
      {"\"kernel_regularizer\": null", "\"kernel_regularizer\": \"l2\"", "kernel_regularizer"},
      {"\"activation\": \"relu\"", "\"activation\": \"mish\"", "mish"},
      {"\"class_name\": \"Adam\"", "\"class_name\": \"Adagrad\"", "Adagrad"},
      {"\"amsgrad\": false", "\"amsgrad\": true", "amsgrad"},
      {"\"module\": \"keras.layers\", \"class_name\": \"Dense\"", "\"module\": \"keras.src.ops.numpy\", \"class_name\": \"Power\"",
       "op Power"},
  };
  for (const auto& c : cases) {
    const fs::path p = with_config("refused.keras", [&](std::string& s) { replace(s, c.from, c.to); });
    const auto [status, message] = outcome([&] { Model::load_keras(Strategy::default_strategy(), p.string()); });
    EXPECT_EQ(status, Status::Unsupported) << c.to << ": " << message;
    EXPECT_NE(message.find(c.named), std::string::npos) << message;
  }
}

TEST(KerasFiles, DamagedOrHostileFilesAreCorruptNamingTheFile) {
  REQUIRE_HDF5();
  const auto corrupt = [](const fs::path& p, const std::string& says) {
    const auto [status, message] = outcome([&] { Model::load_keras(Strategy::default_strategy(), p.string()); });
    EXPECT_EQ(status, Status::Corrupt) << p << ": " << message;
    EXPECT_NE(message.find(p.filename().string()), std::string::npos) << message;
    EXPECT_NE(message.find(says), std::string::npos) << message;
  };
  // A config whose Dense needs ~4 GB of weights from a 20 kB file: refused before allocating them.
  corrupt(with_config("huge.keras", [](std::string& s) { replace(s, "\"units\": 3", "\"units\": 1000000000"); }),
          "bytes of weights");
  // A layer the weights file does not have.
  corrupt(with_config("renamed.keras", [](std::string& s) { replace(s, "\"name\": \"hidden\"", "\"name\": \"other\""); }),
          "no weight \"other/kernel\"");
  corrupt(with_config("shape.keras", [](std::string& s) { replace(s, "\"units\": 3", "\"units\": 5"); }), "has shape");
  corrupt(with_config("json.keras", [](std::string& s) { s.resize(s.size() / 2); }), "not valid JSON");
  // Every truncation of the legacy .h5 and some of the .keras file: a clear error, never a crash.
  for (const char* file : {"mlp.h5", "mlp.keras"}) {
    const std::string bytes = read_bytes(kFixtures / file);
    for (size_t n : {size_t{0}, size_t{7}, size_t{600}, bytes.size() / 2, bytes.size() - 1}) {
      const fs::path p = scratch(std::string("cut-") + file);
      write_bytes(p, bytes.substr(0, n));
      const auto [status, message] = outcome([&] { Model::load_keras(Strategy::default_strategy(), p.string()); });
      EXPECT_EQ(status, Status::Corrupt) << file << " cut at " << n << ": " << message;
    }
  }
  // A weights-only file is no model.
  const auto weights_only =
      outcome([&] { Model::load_keras(Strategy::default_strategy(), (kFixtures / "mlp.weights.h5").string()); });
  EXPECT_EQ(weights_only.first, Status::InvalidArgument);
  EXPECT_NE(weights_only.second.find("load_weights"), std::string::npos) << weights_only.second;
}

TEST(KerasFiles, LoadWeightsKeepsTheSkipAndRejectRules) {
  REQUIRE_HDF5();
  Model m = Model::sequential(Strategy::default_strategy(), {4});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "hidden", "units": 3, "activation": "relu"}})");
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "other", "units": 2}})");
  CompileOptions o;
  o.loss.kind = LossKind::MeanSquaredError;
  m.compile(o);
  for (const char* file : {"mlp.weights.h5", "mlp.h5", "mlp.keras"}) {
    SCOPED_TRACE(file);
    m.set_weights(std::vector<float>(static_cast<size_t>(m.num_params()), 0.5f));
    const std::vector<float> before = m.get_weights();
    const auto strict = outcome([&] { m.load_weights((kFixtures / file).string(), false); });
    EXPECT_EQ(strict.first, Status::InvalidArgument);
    EXPECT_NE(strict.second.find("other/kernel"), std::string::npos) << strict.second;
    EXPECT_EQ(m.get_weights(), before);  // nothing changed
    const WeightsReport r = m.load_weights((kFixtures / file).string(), true);
    EXPECT_EQ(r.loaded, 2);
    EXPECT_EQ(r.skipped, 2);
  }
}

}  // namespace
}  // namespace kx
