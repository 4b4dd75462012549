// Hostile files (issue 30): an IDX header that claims far more data than its file holds, and checkpoints
// whose metadata was crafted (steps at INT64_MAX, negative counts, NaN sums). Each is refused with a
// clear error naming the file and the field, before anything that size is allocated and before any
// counter overflows.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "data_files.hpp"
#include "io/durable_write.hpp"
#include "io/safetensors.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

std::string name_of(Status s) {
  switch (s) {
    case Status::InvalidArgument: return "invalid_argument";
    case Status::Corrupt: return "corrupt";
    case Status::Io: return "io";
    case Status::OutOfMemory: return "out_of_memory";
    default: return "status " + std::to_string(static_cast<int>(s));
  }
}

// What fn did in a child process whose address space may grow by `headroom` bytes only: "ok", the
// status and message of the kx::Error it threw, "bad_alloc", or how the child died. A loader that
// allocates what a header claims runs out of address space there, instead of taking the machine's
// memory (the limit is relative: AddressSanitizer's shadow is already mapped).
std::string in_child_with_headroom(size_t headroom, const std::function<void()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    std::string result;
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + headroom;
    const rlimit rl{limit, limit};
    if (pages <= 0 || setrlimit(RLIMIT_AS, &rl) != 0) {
      result = "setrlimit failed";
    } else {
      try {
        fn();
        result = "ok";
      } catch (const Error& e) {
        result = name_of(e.status()) + ": " + e.what();
      } catch (const std::bad_alloc&) {
        result = "bad_alloc";
      } catch (const std::exception& e) {
        result = std::string("exception: ") + e.what();
      }
    }
    const ssize_t written = write(fds[1], result.data(), result.size());
    _exit(written == static_cast<ssize_t>(result.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return out + " [child killed by signal " + std::to_string(WTERMSIG(status)) + "]";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return out + " [child exited with " + std::to_string(WEXITSTATUS(status)) + "]";
  return out;
}

constexpr size_t kHeadroom = size_t{512} << 20;  // far below what the crafted headers claim

std::vector<uint8_t> idx_header(const std::vector<uint32_t>& dims) {
  std::vector<uint8_t> b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  return b;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The header of issue 30: 20 bytes that claim 2 x 258 x 16,777,218 bytes (8.7 GB).
TEST(HostileIdx, AHeaderClaimingGigabytesIsRefusedBeforeAnythingIsAllocated) {
  test::ScratchDir dir("hostile-idx");
  const std::vector<uint8_t> header = idx_header({2, 258, 16777218});
  ASSERT_EQ(header.size(), 16u);
  std::vector<uint8_t> twenty = header;
  twenty.insert(twenty.end(), {1, 2, 3, 4});  // 4 bytes of the 8.6 GB it claims
  const std::string labels = dir.file("labels");
  write_file(labels, {0, 0, 0x08, 1, 0, 0, 0, 2, 0, 1}, false);
  for (bool gz : {false, true}) {
    SCOPED_TRACE(gz ? "gzip" : "plain");
    const std::string images = dir.file(gz ? "images.gz" : "images");
    write_file(images, twenty, gz);
    const std::string result = in_child_with_headroom(kHeadroom, [&] { Dataset::from_idx(images, labels); });
    EXPECT_TRUE(result.starts_with("corrupt: ")) << result;
    EXPECT_TRUE(contains(result, images)) << result;
    EXPECT_TRUE(contains(result, "claims 8657044488 bytes")) << result;
  }
}

// A gzip file may inflate to a thousand times its size: one of 1 MiB may claim 1 GB, and is then
// read in chunks that grow with the data, so that its true (short) length ends the read early.
TEST(HostileIdx, AGzipFileShorterThanItsClaimIsReadInChunksThatFollowTheData) {
  test::ScratchDir dir("hostile-idx-gz");
  std::vector<uint8_t> bytes = idx_header({1000, 1000, 1000});
  std::mt19937 gen(7);
  for (int i = 0; i < (1 << 20); ++i) bytes.push_back(static_cast<uint8_t>(gen()));  // incompressible
  const std::string images = dir.file("images.gz"), labels = dir.file("labels");
  write_file(images, bytes, true);
  write_file(labels, {0, 0, 0x08, 1, 0, 0, 0x03, 0xE8}, false);
  const std::string result = in_child_with_headroom(kHeadroom, [&] { Dataset::from_idx(images, labels); });
  EXPECT_TRUE(result.starts_with("corrupt: ")) << result;
  EXPECT_TRUE(contains(result, images + ": truncated data (the header claims 1000000000 bytes)")) << result;
}

TEST(HostileIdx, DimensionsWhoseProductOverflowsAreRefusedNamingTheFile) {
  test::ScratchDir dir("hostile-idx-dims");
  const std::string images = dir.file("images"), labels = dir.file("labels");
  write_file(images, idx_header({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}), false);
  write_file(labels, {0, 0, 0x08, 1, 0xFF, 0xFF, 0xFF, 0xFF}, false);
  try {
    Dataset::from_idx(images, labels);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument) << e.what();
    EXPECT_TRUE(contains(e.what(), images)) << e.what();
  }
  // A plain file one byte shorter than its header says: refused before its data is read.
  std::vector<uint8_t> short_by_one = idx_header({3, 2, 2});
  short_by_one.resize(short_by_one.size() + 11);
  write_file(images, short_by_one, false);
  write_file(labels, {0, 0, 0x08, 1, 0, 0, 0, 3, 0, 1, 2}, false);
  try {
    Dataset::from_idx(images, labels);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Corrupt) << e.what();
    EXPECT_TRUE(contains(e.what(), "claims 12 bytes of data (dimensions (3, 2, 2)), the file holds 11")) << e.what();
  }
}

// A checkpoint written mid-epoch by a 2-epoch fit of a tiny model, and copies of it with one metadata
// value changed (the checksums recomputed, as a deliberate forger would).
class HostileCheckpoint : public ::testing::Test {
 protected:
  test::ScratchDir dir{"hostile-ckpt"};
  Dataset data = make_data();

  static Dataset make_data() {
    const std::vector<float> x = test::random_floats(40 * 3, 5);
    std::vector<float> y(40);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(x[i * 3] > 0);
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {40, 3}, y.data(), DType::F32, {40});
    d.shuffle(40, 3);
    d.batch(8, false);  // 5 steps an epoch
    return d;
  }
  static Model model() {
    Model m = Model::sequential(Strategy::default_strategy(), {3});
    m.add_dense(4, Activation::Relu);
    m.add_dense(2, Activation::Softmax);
    CompileOptions co;
    co.accuracy = true;
    m.compile(co);
    return m;
  }
  // The checkpoint at global step `step` (step 7: epoch 1, batch 2 of 5), as the file's path.
  std::string checkpoint(int64_t step = 7) {
    Model m = model();
    Callbacks cb;
    cb.add_model_checkpoint(dir.file("written/ckpt-{step}.kx"), step, 0);
    FitOptions fo;
    fo.epochs = 2;
    m.fit(data, fo, &cb, nullptr);
    return dir.file("written/ckpt-" + std::to_string(step) + ".kx");
  }
  static void rewrite(const std::string& from, const std::string& to, const io::Metadata& changes) {
    std::ifstream in(from, std::ios::binary);
    const io::SafetensorsFile f =
        io::SafetensorsFile::decode(std::string(std::istreambuf_iterator<char>(in), {}), from);
    std::vector<std::vector<float>> values;
    values.reserve(f.tensors().size());
    std::vector<io::TensorToWrite> tensors;
    for (const io::TensorEntry& e : f.tensors()) {
      values.emplace_back(static_cast<size_t>(num_elements(e.shape)));
      f.read(e, values.back().data());
      tensors.push_back({e.name, e.shape, values.back().data()});
    }
    io::Metadata meta = f.metadata();
    for (const auto& [k, v] : changes) meta[k] = v;
    io::write_file_durably(to, io::encode_safetensors(tensors, meta));
  }
  // The error of a 2-epoch fit resuming from `path`, as "status: message" ("ok" when none).
  std::string resume(const std::string& path) {
    Model m = model();
    FitOptions fo;
    fo.epochs = 2;
    fo.resume_from = path;
    try {
      m.fit(data, fo, nullptr, nullptr);
      return "ok";
    } catch (const Error& e) {
      return name_of(e.status()) + ": " + e.what();
    }
  }
};

TEST_F(HostileCheckpoint, EveryMetadataValueOutOfItsRangeIsCorruptNamingTheField) {
  const std::string good = checkpoint();
  ASSERT_EQ(resume(good), "ok");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"optimizer_steps", "9223372036854775807"},  // INT64_MAX: the next step's count overflowed
      {"optimizer_steps", "9007199254740993"},     // 2^53 + 1
      {"optimizer_steps", "-1"},
      {"replicas", "-2"},
      {"replicas", "0"},
      {"epoch", "2147483647"},  // the next epoch's number overflowed an int32
      {"epoch", "-1"},
      {"steps_per_epoch", "0"},
      {"step_in_epoch", "-1"},
      {"step_in_epoch", "6"},  // beyond the 5 steps of an epoch
      {"data_pass", "18446744073709551615"},
      {"data_position", "-3"},
      {"epoch_loss_sum", "nan"},
      {"epoch_loss_sum", "inf"},
      {"epoch_loss_sum", "-inf"},
      {"epoch_loss_sum", "1e999"},
      {"epoch_correct_sum", "nan"},
      {"epoch_weight_sum", "inf"},
      {"epoch_seen", "9223372036854775807"},  // the epoch's sample count overflowed at the next batch
      {"epoch_seen", "17"},                   // more than 2 batches of 8 hold
      {"epoch_seen", "-1"},
      {"data_batch", "0"},
      {"data_samples", "-40"},
      {"data_drop_remainder", "7"},
      {"epoch", " 1"},   // not a number as kx writes one
      {"epoch", "1e0"},
      {"epoch", "0x1"},
      {"epoch_loss_sum", "0x1p3"},
      {"epoch_loss_sum", " 2.5"},
  };
  for (const auto& [key, value] : cases) {
    SCOPED_TRACE(key + " = " + value);
    const std::string bad = dir.file("bad.kx");
    rewrite(good, bad, {{key, value}});
    const std::string result = resume(bad);
    EXPECT_TRUE(result.starts_with("corrupt: ")) << result;
    EXPECT_TRUE(contains(result, bad)) << result;
    EXPECT_TRUE(contains(result, "\"" + key + "\"")) << result;
  }
}

TEST_F(HostileCheckpoint, ValuesAtTheEdgeOfTheirRangesStillResume) {
  const std::string good = checkpoint();
  const std::string edge = dir.file("edge.kx");
  // 2^53 steps so far; 16 samples in the 2 batches; a negative loss sum (a loss may be negative).
  rewrite(good, edge, {{"optimizer_steps", "9007199254740992"}, {"epoch_seen", "16"}, {"epoch_loss_sum", "-1.5"}});
  EXPECT_EQ(resume(edge), "ok");
}

TEST_F(HostileCheckpoint, AModelFileWithAnOptimizerStepCountBeyondRangeDoesNotLoad) {
  const std::string good = checkpoint();
  const std::string bad = dir.file("bad-model.kx");
  rewrite(good, bad, {{"optimizer_steps", "9223372036854775807"}});
  try {
    Model::load(Strategy::default_strategy(), bad);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Corrupt) << e.what();
    EXPECT_TRUE(contains(e.what(), "\"optimizer_steps\" is \"9223372036854775807\", not a number in [0, "))
        << e.what();
  }
}

TEST_F(HostileCheckpoint, ResumingFromADirectorySkipsANewerFileWithCraftedMetadata) {
  const std::string good = checkpoint(3);  // step 3
  // A newer file (step 8) whose epoch loss sum is NaN: skipped, the fit resumes at step 3.
  std::filesystem::create_directories(dir.path() / "resume");
  std::filesystem::copy_file(good, dir.file("resume/ckpt-3.kx"));
  rewrite(good, dir.file("resume/ckpt-8.kx"), {{"optimizer_steps", "8"}, {"epoch_loss_sum", "nan"}});
  Model m = model();
  FitOptions fo;
  fo.epochs = 2;
  fo.resume_from = dir.file("resume");
  int64_t first_step = -1;
  Callbacks watch;
  watch.add([&](const Event& e) {
    if (e.kind == EventKind::TrainBegin) first_step = e.global_step;
    return false;
  });
  ASSERT_EQ(m.fit(data, fo, &watch, nullptr), Status::Ok);
  EXPECT_EQ(first_step, 3);
}

}  // namespace
}  // namespace kx
