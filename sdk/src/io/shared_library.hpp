// A shared library opened at run time (dlopen) rather than linked, its entry points resolved by name
// (dlsym): kx's CUDA and multi-worker modules, the CUDA driver, NCCL, cuDNN and Open MPI's libmpi.
// Closed when the object goes; a library opened with RTLD_NODELETE (every kx site opens so) stays
// mapped after that, and what was resolved from it stays valid.
//
// Compiled into each binary that opens libraries: libkx (kx_sdk), libkx_cuda.so and libkx_workers.so.
#pragma once
#include <dlfcn.h>  // the RTLD_* flags

#include <string>

namespace kx::io {

class SharedLibrary {
 public:
  // dlopen(file, flags) (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE, say). A library that does not open
  // is no exception: opened() says so and error() why.
  SharedLibrary(const std::string& file, int flags);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  bool opened() const { return handle_ != nullptr; }
  const std::string& file() const { return file_; }
  // Why the library did not open: dlerror's message, which names the file; empty when it opened.
  const std::string& error() const { return error_; }

  // The address of `name`; null when the library has no such symbol or did not open.
  void* symbol(const char* name) const;

  // Sets `entry` (a function or object pointer) to the symbol `name`, or to null, noting `name` as
  // missing when the library opened. Returns whether it was found.
  template <class Pointer>
  bool resolve(const char* name, Pointer& entry) {
    entry = reinterpret_cast<Pointer>(symbol(name));
    if (!entry && opened()) note_missing(name);
    return entry != nullptr;
  }
  // The names resolve() did not find, ", "-separated; empty when it found every one.
  const std::string& missing() const { return missing_; }

  // Empty when the library opened and resolve() found every entry point; else what is wrong:
  // error(), or "<file> lacks <missing>".
  std::string problem() const;

 private:
  void note_missing(const char* name);

  std::string file_;
  void* handle_ = nullptr;
  std::string error_;
  std::string missing_;
};

}  // namespace kx::io
