// One interface over the run-time compilers: NVRTC for sm_* targets (cubin) and hipRTC for gfx*
// targets (code object). Both are dlopen'd on first use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fmha_jit/config.hpp"
#include "support/kernel_resources.hpp"

namespace fmha_jit::codegen::rtc {

struct SourceFile {
  std::string_view name;  // as #included, or the entry's file name
  std::string_view text;
};

struct CompileRequest {
  SourceFile entry;
  std::vector<SourceFile> headers;
  std::string arch;
  std::vector<std::string> options;  // from RtcCompiler::options(); these enter the cache key
};

using support::KernelResources;

struct CompileOutput {
  std::vector<std::uint8_t> binary;
  std::string log;
  std::vector<KernelResources> resources;
  double seconds = 0;
};

class RtcCompiler {
 public:
  virtual ~RtcCompiler() = default;
  virtual std::string_view id() const = 0;                // "nvrtc" | "hiprtc"
  virtual const std::string& version() const = 0;         // API version and the library file loaded
  virtual std::string_view binary_file_name() const = 0;  // kernel.cubin | kernel.hsaco
  // Every option passed to the compiler for this config. Options that only locate files on this
  // machine are not used: templates are passed in memory and need no include path.
  virtual std::vector<std::string> options(const FmhaKernelConfig& canonical) const = 0;
  // Throws CompileError (log and options; the caller adds the source path) on failure.
  virtual CompileOutput compile(const CompileRequest& request) const = 0;
};

// NUL-terminated copies of a request's sources laid out as the char* arrays that both
// nvrtcCreateProgram and hiprtcCreateProgram take.
struct ProgramSources {
  explicit ProgramSources(const CompileRequest& request);
  std::string entry_text, entry_name;
  std::vector<std::string> header_text, header_name;
  std::vector<const char*> header_ptrs, name_ptrs, option_ptrs;
  int header_count() const { return static_cast<int>(header_ptrs.size()); }
  int option_count() const { return static_cast<int>(option_ptrs.size()); }
};

// Trailing NULs and newlines that both compilers leave at the end of their logs, removed.
void trim_log(std::string& log);

// The compiler for an arch's vendor; throws Error(rtc_unavailable) with what to install when the
// library cannot be loaded. Validates the arch first: hipRTC of ROCm 5.2 crashes on gfx targets it
// does not know.
const RtcCompiler& compiler_for(std::string_view arch);

// FMHA_JIT_LINEINFO: true for 1 (NVIDIA kernels get line tables, -lineinfo), false for 0 or when
// unset; any other value throws FieldError(invalid_argument) naming the variable.
bool lineinfo_from_env();

// Constructors for the two backends (compiler.cpp owns the singletons).
const RtcCompiler& nvrtc_compiler();
const RtcCompiler& hiprtc_compiler();

}  // namespace fmha_jit::codegen::rtc
