// One interface over the run-time compilers: NVRTC for sm_* targets (cubin) and hipRTC for gfx*
// targets (code object). Both are dlopen'd on first use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fmha_jit/config.hpp"

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

// Per-kernel resources from the compiler's report (ptxas -v on NVIDIA; not reported by hipRTC).
struct KernelResources {
  std::string symbol;
  int registers = -1;
  int spill_store_bytes = -1;
  int spill_load_bytes = -1;
  int stack_frame_bytes = -1;
  int static_smem_bytes = -1;
  // ptxas serialised the kernel's wgmma instructions ("Potential Performance Loss", C7510-C7520):
  // each one then waits for the one before, so no MMA overlaps the softmax or another
  // warpgroup's work. Compiles and runs correctly, at a fraction of the speed; the rtc tests
  // require it false for every shipped Hopper kernel.
  bool wgmma_serialized = false;
};
nlohmann::json to_json(const KernelResources& r);
KernelResources resources_from_json(const nlohmann::json& j);

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
