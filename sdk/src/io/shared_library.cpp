#include "io/shared_library.hpp"

#include <dlfcn.h>

namespace kx::io {

SharedLibrary::SharedLibrary(const std::string& file, int flags) : file_(file) {
  handle_ = dlopen(file.c_str(), flags);
  if (!handle_) {
    const char* why = dlerror();
    error_ = why ? why : file + " could not be opened";
  }
}

SharedLibrary::~SharedLibrary() {
  if (handle_) dlclose(handle_);
}

void* SharedLibrary::symbol(const char* name) const { return handle_ ? dlsym(handle_, name) : nullptr; }

void SharedLibrary::note_missing(const char* name) {
  if (!missing_.empty()) missing_ += ", ";
  missing_ += name;
}

std::string SharedLibrary::problem() const {
  if (!handle_) return error_;
  return missing_.empty() ? std::string() : file_ + " lacks " + missing_;
}

}  // namespace kx::io
