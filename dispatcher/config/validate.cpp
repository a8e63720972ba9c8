// validate(): rejects unsupported combinations before anything is rendered or compiled. Messages
// name the field, its value and the accepted values.
#include <algorithm>
#include <array>
#include <string>

#include "codegen/arch.hpp"
#include "codegen/heuristics.hpp"
#include "fmha_jit/config.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit {
namespace {

// Head dims the kernels are generated for. Each needs its own register / shared-memory tiling;
// others would pad to the next one, which a caller can do more cheaply by padding the tensors.
constexpr std::array<int, 6> kHeadDims{32, 64, 96, 128, 192, 256};

std::string join(const auto& values) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += ", ";
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(v)>>) {
      out += std::to_string(v);
    } else {
      out += v;
    }
  }
  return out;
}

[[noreturn]] void reject(const char* field, const std::string& value, const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_config, field, value, accepted);
}

}  // namespace

void validate(const FmhaKernelConfig& c) {
  if (std::find(kHeadDims.begin(), kHeadDims.end(), c.hdim_q) == kHeadDims.end()) {
    reject("hdim_q", std::to_string(c.hdim_q), join(kHeadDims));
  }
  // hdim_v = hdim_q everywhere, plus the (192, 128) shape of DeepSeek-style MLA heads.
  if (c.hdim_v != c.hdim_q && !(c.hdim_q == 192 && c.hdim_v == 128)) {
    reject("hdim_v", std::to_string(c.hdim_v),
           std::to_string(c.hdim_q) + (c.hdim_q == 192 ? ", 128" : "") +
               " (with hdim_q = " + std::to_string(c.hdim_q) + ")");
  }
  // hipRTC of ROCm 5.2 crashes on archs it does not know, so the arch list is closed and checked
  // here, before any compiler is touched.
  if (!codegen::find_arch(c.arch)) reject("arch", "\"" + c.arch + "\"", codegen::accepted_archs());
  codegen::validate_impl_and_tiles(c);
}

}  // namespace fmha_jit
