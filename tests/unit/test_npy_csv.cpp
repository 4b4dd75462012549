// Datasets from numpy .npy files written by numpy itself, and from CSV files: equal to the arrays;
// every unsupported or damaged input a clear error naming the file (and the row and column).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "data_files.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"
#include "reference.hpp"

namespace kx {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> v;
  float f;
  while (in.read(reinterpret_cast<char*>(&f), sizeof f)) v.push_back(f);
  return v;
}

class NpyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_numpy()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy";
  }
  test::ScratchDir dir{"npy"};
};

// numpy writes arrays of every supported dtype (and the float32 values it expects kx to hold).
TEST_F(NpyFiles, LoadsEveryDtypeEqualToNumpysArrays) {
  ASSERT_EQ(test::run_python(dir.path(), R"(
rng = np.random.default_rng(7)
x = {'f4': rng.standard_normal((5, 3, 2)).astype('<f4'), 'f8': rng.standard_normal((5, 3, 2)),
     'u1': rng.integers(0, 256, (5, 3, 2)).astype('u1'), 'i4': rng.integers(-1000, 1000, (5, 3, 2)).astype('<i4'),
     'i8': rng.integers(-2**24, 2**24, (5, 3, 2)).astype('<i8')}
y = rng.integers(0, 4, 5)
for k, a in x.items():
    np.save(f'{d}/x_{k}.npy', a)
    (a.astype(np.float32) * np.float32(1/255) if k == 'u1' else a.astype(np.float32)).tofile(f'{d}/x_{k}.f32')
np.save(f'{d}/y.npy', y.astype('<i8'))
np.save(f'{d}/y_onehot.npy', np.eye(4, dtype='<f4')[y])
y.astype(np.float32).tofile(f'{d}/y.f32')
# version 2 and 3 headers, as numpy writes them when asked
with open(f'{d}/x_v2.npy', 'wb') as f:
    np.lib.format.write_array(f, x['f4'], version=(2, 0))
with open(f'{d}/x_v3.npy', 'wb') as f:
    np.lib.format.write_array(f, x['f4'], version=(3, 0))
)"), 0);
  for (const char* k : {"f4", "f8", "u1", "i4", "i8", "v2", "v3"}) {
    SCOPED_TRACE(k);
    const std::string name = std::string(k).front() == 'v' ? "f4" : k;
    Dataset d = Dataset::from_npy(dir.file(std::string("x_") + k + ".npy"), dir.file("y.npy"));
    EXPECT_EQ(d.num_samples(), 5);
    EXPECT_EQ(d.x_shape(), Shape({3, 2}));
    EXPECT_EQ(d.y_shape(), Shape({}));
    const std::vector<float> want = read_floats(dir.file("x_" + name + ".f32"));
    ASSERT_EQ(want.size(), d.storage().x.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(d.storage().x[i], want[i]) << i;
    EXPECT_EQ(std::vector<float>(d.storage().y.begin(), d.storage().y.end()), read_floats(dir.file("y.f32")));
  }
  Dataset onehot = Dataset::from_npy(dir.file("x_f4.npy"), dir.file("y_onehot.npy"));
  EXPECT_EQ(onehot.y_shape(), Shape({4}));
}

TEST_F(NpyFiles, RejectsWhatItCannotReadNamingTheFileAndWhy) {
  ASSERT_EQ(test::run_python(dir.path(), R"(
a = np.arange(12, dtype='<f4').reshape(4, 3)
np.save(f'{d}/ok.npy', a)
np.save(f'{d}/y.npy', np.arange(4))
np.save(f'{d}/y3.npy', np.arange(3))
np.save(f'{d}/big_endian.npy', a.astype('>f4'))
np.save(f'{d}/fortran.npy', np.asfortranarray(a))
np.save(f'{d}/f2.npy', a.astype('<f2'))
np.save(f'{d}/u2.npy', a.astype('<u2'))
np.save(f'{d}/scalar.npy', np.float32(1))
np.save(f'{d}/empty.npy', np.zeros((0, 3), '<f4'))
raw = open(f'{d}/ok.npy', 'rb').read()
open(f'{d}/truncated.npy', 'wb').write(raw[:-5])
open(f'{d}/long.npy', 'wb').write(raw + b'x')
open(f'{d}/cut_header.npy', 'wb').write(raw[:30])
open(f'{d}/not_npy.npy', 'wb').write(b'hello world, not numpy')
open(f'{d}/v9.npy', 'wb').write(raw[:6] + b'\x09' + raw[7:])
)"), 0);
  const std::string y = dir.file("y.npy");
  EXPECT_NO_THROW(Dataset::from_npy(dir.file("ok.npy"), y));
  struct Case {
    const char* file;
    Status status;
    const char* says;
  };
  for (const Case& c : {Case{"big_endian.npy", Status::InvalidArgument, "'>f4' is not supported"},
                        Case{"fortran.npy", Status::InvalidArgument, "Fortran order"},
                        Case{"f2.npy", Status::InvalidArgument, "'<f2'"},
                        Case{"u2.npy", Status::InvalidArgument, "'<u2'"},
                        Case{"scalar.npy", Status::InvalidArgument, "0-d"},
                        Case{"empty.npy", Status::InvalidArgument, "empty dimension"},
                        Case{"v9.npy", Status::InvalidArgument, "version 9"},
                        Case{"truncated.npy", Status::Corrupt, "truncated"},
                        Case{"long.npy", Status::Corrupt, "1 bytes after"},
                        Case{"cut_header.npy", Status::Corrupt, "truncated .npy header"},
                        Case{"not_npy.npy", Status::Corrupt, "not a .npy file"},
                        Case{"missing.npy", Status::Io, "cannot open"}}) {
    SCOPED_TRACE(c.file);
    const auto load = [&] { Dataset::from_npy(dir.file(c.file), y); };
    EXPECT_EQ(test::status_of(load), c.status);
    const std::string msg = error_of(load);
    EXPECT_NE(msg.find(c.file), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
  }
  const std::string msg = error_of([&] { Dataset::from_npy(dir.file("ok.npy"), dir.file("y3.npy")); });
  EXPECT_NE(msg.find("4 samples"), std::string::npos) << msg;
}

TEST(CsvFiles, LoadsTheLabelColumnAndTheFeaturesInOrder) {
  test::ScratchDir dir("csv");
  test::write_text(dir.file("iris.csv"),
                   "sepal_length, sepal_width,\"species\",petal\r\n"
                   "5.1,3.5,0,1.4\r\n"
                   "\r\n"
                   "4.9, 3.0e0 ,\"1\",-2\r\n"
                   "+6.5,2.8,2,.5\r\n");
  Dataset d = Dataset::from_csv(dir.file("iris.csv"), "species");
  EXPECT_EQ(d.num_samples(), 3);
  EXPECT_EQ(d.x_shape(), Shape({3}));
  EXPECT_EQ(d.y_shape(), Shape({}));
  const std::vector<float> x(d.storage().x.begin(), d.storage().x.end());
  EXPECT_EQ(x, std::vector<float>({5.1f, 3.5f, 1.4f, 4.9f, 3.0f, -2.0f, 6.5f, 2.8f, 0.5f}));
  EXPECT_EQ(d.storage().y, std::vector<float>({0, 1, 2}));
}

TEST(CsvFiles, NamesTheLineAndColumnOfABadCell) {
  test::ScratchDir dir("csv-bad");
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{"a,b,y\n1,2,0\n3,oops,1\n", "line 3, column 2 ('b'): 'oops' is not a finite number"},
                        Case{"a,b,y\n1,,0\n", "line 2, column 2 ('b') is empty"},
                        Case{"a,b,y\n1,2,0\n1,nan,0\n", "line 3, column 2 ('b'): 'nan'"},
                        Case{"a,b,y\n1,2,0\n1,2\n", "line 3 has 2 cells, the header has 3"},
                        Case{"a,b,y\n1,\"2,0\n", "quoted cell is not closed"},
                        Case{"a,b,z\n1,2,0\n", "no column named 'y'"},
                        Case{"a,b,y\n", "no data rows"},
                        Case{"", "empty file"},
                        Case{"y\n1\n", "no feature column"}}) {
    SCOPED_TRACE(c.text);
    test::write_text(dir.file("bad.csv"), c.text);
    const auto load = [&] { Dataset::from_csv(dir.file("bad.csv"), "y"); };
    EXPECT_EQ(test::status_of(load), Status::InvalidArgument);
    const std::string msg = error_of(load);
    EXPECT_NE(msg.find("bad.csv"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
  }
  EXPECT_EQ(test::status_of([&] { Dataset::from_csv(dir.file("none.csv"), "y"); }), Status::Io);
}

TEST(CsvFiles, AgreesWithNumpyOnAWrittenTable) {
  if (!test::have_numpy()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy";
  test::ScratchDir dir("csv-np");
  ASSERT_EQ(test::run_python(dir.path(), R"(
rng = np.random.default_rng(3)
x = rng.standard_normal((50, 4))
y = rng.integers(0, 3, 50)
with open(f'{d}/t.csv', 'w') as f:
    f.write('f0,f1,label,f2,f3\n')
    for r in range(50):
        f.write(','.join([repr(x[r, 0]), repr(x[r, 1]), str(y[r]), repr(x[r, 2]), repr(x[r, 3])]) + '\n')
x.astype(np.float32).tofile(f'{d}/x.f32')
y.astype(np.float32).tofile(f'{d}/y.f32')
)"), 0);
  Dataset d = Dataset::from_csv(dir.file("t.csv"), "label");
  EXPECT_EQ(std::vector<float>(d.storage().x.begin(), d.storage().x.end()), read_floats(dir.file("x.f32")));
  EXPECT_EQ(d.storage().y, read_floats(dir.file("y.f32")));
}

}  // namespace
}  // namespace kx
