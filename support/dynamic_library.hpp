// dlopen wrapper: libcuda, NVRTC and hipRTC are loaded at run time so one binary runs with or
// without either vendor's stack. A missing library is reported with what to install.
#pragma once

#include <string>
#include <vector>

namespace fmha_jit::support {

class DynamicLibrary {
 public:
  // Tries each candidate name in order (plain sonames first, so LD_LIBRARY_PATH and the system
  // search order win, then absolute fallbacks). Returns an empty library if none loads; `error()`
  // then lists every attempt.
  explicit DynamicLibrary(const std::vector<std::string>& candidates);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  // The resolved file, e.g. /usr/local/cuda/lib64/libnvrtc.so.13.0.88 (symlinks followed).
  const std::string& path() const { return path_; }

  // nullptr when absent.
  void* symbol(const char* name) const;
  template <class Fn>
  bool bind(Fn*& out, const char* name) const {
    out = reinterpret_cast<Fn*>(symbol(name));
    return out != nullptr;
  }

 private:
  void* handle_ = nullptr;
  std::string error_;
  std::string path_;
};

// "libnvrtc, 109338064 bytes": a loaded library's name up to ".so" and its size, which enter the
// cache key (through the RTC compiler's version). Toolkits name their RTC libraries by major
// version only (libnvrtc.so.13 for every 13.x.y), so the size is what tells two patch releases
// apart. The rest of the file name is left out because packagings of one build differ in it: one
// CUDA 13.0.88 packaging ships a plain libnvrtc.so.13, another a symlink to
// libnvrtc.so.13.0.88, and a cache warmed on one must hit on the other.
std::string library_identity(const DynamicLibrary& library);
// The same for the file at `path` (its size left out where it cannot be read).
std::string library_identity(const std::string& path);

}  // namespace fmha_jit::support
