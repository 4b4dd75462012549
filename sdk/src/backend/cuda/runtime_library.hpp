// A shared library the CUDA module opens at run time rather than links (NCCL, cuDNN): opened once and
// never unloaded (threads it starts may outlive any one use), its entry points resolved by name.
#pragma once
#include <dlfcn.h>

#include <string>

namespace kx::backend::cuda {

class RuntimeLibrary {
 public:
  explicit RuntimeLibrary(const char* file) : file_(file) {
    handle_ = dlopen(file, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!handle_) {
      const char* e = dlerror();
      why_ = e ? e : std::string(file) + " not found";
    }
  }

  // Sets f to the entry point `name`, or to null and notes it as missing.
  template <class F>
  void resolve(const char* name, F& f) {
    f = handle_ ? reinterpret_cast<F>(dlsym(handle_, name)) : nullptr;
    if (handle_ && !f) missing_ += missing_.empty() ? name : std::string(", ") + name;
  }

  // Empty when the library opened and every resolved entry point was found; else what is wrong.
  std::string why() const { return !handle_ ? why_ : missing_.empty() ? "" : file_ + " lacks " + missing_; }

 private:
  std::string file_;
  void* handle_ = nullptr;
  std::string why_, missing_;
};

}  // namespace kx::backend::cuda
