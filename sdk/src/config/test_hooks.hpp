// Hooks for kx's own tests and benches, settable only from C++ code linked with the SDK (kx_sdk): a
// program that goes through libkx cannot reach them, and no environment variable sets them. Set them
// before the fit they are for (they are read when it starts), from the test program's own command line.
#pragma once
#include <chrono>
#include <string>

namespace kx::config {

struct TestHooks {
  // A parameter-server worker's fit: while this file exists, the worker waits before it asks for each
  // batch (a worker held back for as long as a test says, whatever the others' speed). Empty: no hold.
  std::string ps_hold_file;
  // A parameter-server worker's fit: a pause after each of its steps (a slow worker).
  std::chrono::milliseconds ps_step_delay{0};
  // The HDF5 reader's deadline (kx-hdf5-reader, io/hdf5_reader_process.cpp); 0: the one its file's
  // size earns.
  std::chrono::milliseconds hdf5_reader_timeout{0};
};

// The process's hooks (all off unless a test program sets them).
inline TestHooks& test_hooks() {
  static TestHooks hooks;
  return hooks;
}

}  // namespace kx::config
