#include "support/dynamic_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>

namespace fmha_jit::support {

DynamicLibrary::DynamicLibrary(const std::vector<std::string>& candidates) {
  for (const auto& name : candidates) {
    // RTLD_LOCAL keeps the vendor's symbols out of the global namespace of the host program (which
    // may itself have loaded another copy, e.g. PyTorch's bundled NVRTC).
    handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) break;
    const char* why = dlerror();
    error_ += "  " + name + ": " + (why ? why : "not found") + "\n";
  }
  if (!handle_) return;
  error_.clear();
  link_map* map = nullptr;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) {
    std::error_code ec;
    const auto canonical = std::filesystem::canonical(map->l_name, ec);
    path_ = ec ? std::string(map->l_name) : canonical.string();
  }
}

DynamicLibrary::~DynamicLibrary() {
  // Deliberately not dlclose'd: driver libraries register atexit handlers and threads that must
  // outlive static destructors of the host program.
}

void* DynamicLibrary::symbol(const char* name) const {
  return handle_ ? dlsym(handle_, name) : nullptr;
}

std::string library_identity(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const std::string file = std::filesystem::path(path).filename().string();
  return file.substr(0, file.find(".so")) + (ec ? "" : ", " + std::to_string(size) + " bytes");
}

std::string library_identity(const DynamicLibrary& library) {
  return library_identity(library.path());
}

}  // namespace fmha_jit::support
