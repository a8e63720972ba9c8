// hipRTC backend (ROCm 5.2, libamdhip64): compiles the rendered entry to a gfx code object.
#include <hip/hiprtc.h>

#include <chrono>
#include <mutex>
#include <string>

#include "codegen/rtc/compiler.hpp"
#include "core/arch.hpp"
#include "fmha_jit/error.hpp"
#include "support/dynamic_library.hpp"

namespace fmha_jit::codegen::rtc {
namespace {

struct HiprtcApi {
  decltype(&::hiprtcVersion) version = nullptr;
  decltype(&::hiprtcGetErrorString) error_string = nullptr;
  decltype(&::hiprtcCreateProgram) create = nullptr;
  decltype(&::hiprtcDestroyProgram) destroy = nullptr;
  decltype(&::hiprtcCompileProgram) compile = nullptr;
  decltype(&::hiprtcGetProgramLogSize) log_size = nullptr;
  decltype(&::hiprtcGetProgramLog) log = nullptr;
  decltype(&::hiprtcGetCodeSize) code_size = nullptr;
  decltype(&::hiprtcGetCode) code = nullptr;
};

class HiprtcCompiler final : public RtcCompiler {
 public:
  HiprtcCompiler() : lib_({"libamdhip64.so.5", "libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"}) {
    if (!lib_.loaded()) {
      unavailable_ =
          "hipRTC could not be loaded; install libamdhip64-5 (Debian: apt-get install "
          "libamdhip64-dev) or ROCm. Tried:\n" +
          lib_.error();
      return;
    }
    const bool ok = lib_.bind(api_.version, "hiprtcVersion") &&
                    lib_.bind(api_.error_string, "hiprtcGetErrorString") &&
                    lib_.bind(api_.create, "hiprtcCreateProgram") &&
                    lib_.bind(api_.destroy, "hiprtcDestroyProgram") &&
                    lib_.bind(api_.compile, "hiprtcCompileProgram") &&
                    lib_.bind(api_.log_size, "hiprtcGetProgramLogSize") &&
                    lib_.bind(api_.log, "hiprtcGetProgramLog") &&
                    lib_.bind(api_.code_size, "hiprtcGetCodeSize") &&
                    lib_.bind(api_.code, "hiprtcGetCode");
    if (!ok) {
      unavailable_ = lib_.path() + " lacks hipRTC entry points";
      return;
    }
    int major = 0, minor = 0;
    api_.version(&major, &minor);
    // hiprtcVersion reports the compiler's API level only; the library's size tells ROCm builds
    // apart.
    version_ = std::to_string(major) + "." + std::to_string(minor) + " (" +
               support::library_identity(lib_) + ")";
  }

  std::string_view id() const override { return "hiprtc"; }
  const std::string& version() const override {
    require();
    return version_;
  }
  std::string_view binary_file_name() const override { return "kernel.hsaco"; }

  std::vector<std::string> options(const FmhaKernelConfig& c) const override {
    // -O3: hipRTC's default is -O3 in some ROCm releases and not others; spelled out for the key.
    return {"--gpu-architecture=" + c.arch, "-O3", "-std=c++17", "-DFMHA_JIT_HIPRTC=1"};
  }

  CompileOutput compile(const CompileRequest& req) const override {
    require();
    // Never hand hipRTC an arch outside the closed list: ROCm 5.2 aborts the process on unknown
    // gfx targets instead of returning an error.
    const ArchInfo* arch = find_arch(req.arch);
    if (!arch || arch->vendor != Vendor::amd) {
      throw FieldError(ErrorCode::invalid_config, "arch", "\"" + req.arch + "\"",
                       "an AMD arch of: " + accepted_archs());
    }
    // hipRTC of ROCm 5.2 crashes (SIGSEGV in libamd_comgr) when two threads compile at once:
    // compiles are serialised per process. Other processes are unaffected.
    static std::mutex compile_mutex;
    std::lock_guard lock(compile_mutex);
    const auto start = std::chrono::steady_clock::now();
    ProgramSources src(req);
    hiprtcProgram prog = nullptr;
    hiprtcResult rc = api_.create(&prog, src.entry_text.c_str(), src.entry_name.c_str(),
                                  src.header_count(), src.header_ptrs.data(), src.name_ptrs.data());
    if (rc != HIPRTC_SUCCESS) {
      throw CompileError(std::string("hiprtcCreateProgram failed: ") + api_.error_string(rc), "",
                         req.options, "");
    }
    rc = api_.compile(prog, src.option_count(), src.option_ptrs.data());
    CompileOutput out;
    std::size_t log_size = 0;
    api_.log_size(prog, &log_size);
    out.log.resize(log_size);
    if (log_size > 0) api_.log(prog, out.log.data());
    trim_log(out.log);
    if (rc != HIPRTC_SUCCESS) {
      api_.destroy(&prog);
      throw CompileError("hipRTC failed to compile " + src.entry_name + " for " + req.arch + ": " +
                             api_.error_string(rc),
                         out.log, req.options, "");
    }
    std::size_t size = 0;
    api_.code_size(prog, &size);
    out.binary.resize(size);
    if (size > 0) api_.code(prog, reinterpret_cast<char*>(out.binary.data()));
    api_.destroy(&prog);
    if (size == 0) {
      throw CompileError("hipRTC returned no code object for " + src.entry_name, out.log,
                         req.options, "");
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }

 private:
  void require() const {
    if (!unavailable_.empty()) throw Error(ErrorCode::rtc_unavailable, unavailable_);
  }

  support::DynamicLibrary lib_;
  HiprtcApi api_;
  std::string version_;
  std::string unavailable_;
};

}  // namespace

const RtcCompiler& hiprtc_compiler() {
  static const HiprtcCompiler compiler;
  return compiler;
}

}  // namespace fmha_jit::codegen::rtc
