// Hooks for kx's own tests and benches, settable only from C++ code linked with the SDK (kx_sdk): a
// program that goes through libkx cannot reach them, and no environment variable sets them. Set them
// before the fit they are for (they are read when it starts), from the test program's own command line;
// the counters kx writes are read after it.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
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
  // Written by kx, read by tests: the training steps recorded as graphs (CUDA graphs, or the recording
  // backend's) since the process started. A test that compares replayed steps with direct ones reads
  // it before and after its fit, so that a recording that failed and fell back to direct steps
  // cannot pass as a replay.
  std::atomic<int64_t> step_graphs_recorded{0};
  // Step plans made from now on give every buffer memory of its own (no reuse between buffers whose
  // lifetimes do not overlap), filled with NaN first: the reference a test compares reuse with, bit
  // for bit, and what a bench measures reuse against.
  bool no_arena_reuse = false;
  // Step plans made from now on zero every buffer of the arena right after its last use: a layer that
  // reads a buffer the plan holds dead (a wrong backward_reads_input or _output) computes from zeros,
  // which a test comparing with buffers apart sees.
  bool zero_dead_buffers = false;
  // Models compiled from now on run every layer themselves: no activation applied by the batch
  // normalisation before it (Network::fuse_activations), no padding added by the convolution after it
  // (Network::absorb_paddings): what a test compares fusion with.
  bool no_layer_fusion = false;
  // Step plans made from now on give every input gradient a block of its own: no layer writes it over
  // its output's gradient (Layer::writes_input_grad_in_place). What a test compares that with.
  bool no_in_place_grads = false;
  // Written by kx, read by tests: the bytes of the arena a step plan allocated last.
  std::atomic<int64_t> training_arena_bytes{0};
};

// The process's hooks (all off unless a test program sets them).
inline TestHooks& test_hooks() {
  static TestHooks hooks;
  return hooks;
}

}  // namespace kx::config
