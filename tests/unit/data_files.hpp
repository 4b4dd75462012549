// Helpers for the data-pipeline tests: a scratch directory and numpy (/usr/bin/python3) run at test time.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kx::test {

// A fresh directory under the system's temporary one, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("kx-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline bool have_numpy() {
  static const bool have = std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return have;
}

// Runs a Python script (with numpy imported as np and `d` the directory) and returns its exit status.
inline int run_python(const std::string& dir, const std::string& script) {
  const std::string path = dir + "/script.py";
  std::ofstream(path) << "import numpy as np, sys\nd = sys.argv[1]\n" << script << "\n";
  return std::system(("/usr/bin/python3 " + path + " " + dir).c_str());
}

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace kx::test
