// A compiled module: immutable, shared by every runner of its key in this process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/manifest.hpp"
#include "fmha_jit/config.hpp"

namespace fmha_jit::dispatch {

struct CompiledKernel {
  std::string key;
  FmhaKernelConfig config;  // canonical
  cache::Manifest manifest;
  std::vector<std::uint8_t> binary;
};

}  // namespace fmha_jit::dispatch
