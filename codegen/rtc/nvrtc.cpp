// NVRTC backend: compiles the rendered entry straight to a cubin for the real arch (-arch=sm_XX),
// never PTX, so no driver-side JIT happens at load time.
#include <nvrtc.h>

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "codegen/rtc/compiler.hpp"
#include "codegen/rtc/ptxas_report.hpp"
#include "fmha_jit/error.hpp"
#include "support/dynamic_library.hpp"
#include "support/env.hpp"

namespace fmha_jit::codegen::rtc {
namespace {

struct NvrtcApi {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) error_string = nullptr;
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) cubin = nullptr;
};

class NvrtcCompiler final : public RtcCompiler {
 public:
  NvrtcCompiler()
      : lib_({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
              "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so"}) {
    if (!lib_.loaded()) {
      unavailable_ =
          "NVRTC could not be loaded; install the CUDA toolkit's NVRTC (e.g. the "
          "cuda-nvrtc-13-0 package) or add its lib64 folder to LD_LIBRARY_PATH. "
          "Tried:\n" +
          lib_.error();
      return;
    }
    const bool ok = lib_.bind(api_.version, "nvrtcVersion") &&
                    lib_.bind(api_.error_string, "nvrtcGetErrorString") &&
                    lib_.bind(api_.create, "nvrtcCreateProgram") &&
                    lib_.bind(api_.destroy, "nvrtcDestroyProgram") &&
                    lib_.bind(api_.compile, "nvrtcCompileProgram") &&
                    lib_.bind(api_.log_size, "nvrtcGetProgramLogSize") &&
                    lib_.bind(api_.log, "nvrtcGetProgramLog") &&
                    lib_.bind(api_.cubin_size, "nvrtcGetCUBINSize") &&
                    lib_.bind(api_.cubin, "nvrtcGetCUBIN");
    if (!ok) {
      unavailable_ = lib_.path() + " lacks NVRTC entry points (needs NVRTC 11.1 or newer)";
      return;
    }
    int major = 0, minor = 0;
    api_.version(&major, &minor);
    version_ = std::to_string(major) + "." + std::to_string(minor) + " (" +
               support::library_identity(lib_) + ")";
  }

  std::string_view id() const override { return "nvrtc"; }
  const std::string& version() const override {
    require();
    return version_;
  }
  std::string_view binary_file_name() const override { return "kernel.cubin"; }

  std::vector<std::string> options(const FmhaKernelConfig& c) const override {
    // -arch=sm_XX (not compute_XX) makes NVRTC run ptxas and return SASS for that arch.
    // --ptxas-options=-v asks for the resource report kept in the manifest.
    // -std=c++17 is what the templates are written against.
    std::vector<std::string> o{"-arch=" + c.arch, "-std=c++17", "--ptxas-options=-v",
                               "-DFMHA_JIT_NVRTC=1"};
    // FMHA_JIT_LINEINFO=1: line tables, for Nsight Compute's stall reasons per source line. They
    // leave the SASS as it is, but the cubin differs, so the option enters the key like the rest.
    if (lineinfo_from_env()) o.emplace_back("-lineinfo");
    return o;
  }

  CompileOutput compile(const CompileRequest& req) const override {
    require();
    const auto start = std::chrono::steady_clock::now();
    ProgramSources src(req);
    nvrtcProgram prog = nullptr;
    check(api_.create(&prog, src.entry_text.c_str(), src.entry_name.c_str(), src.header_count(),
                      src.header_ptrs.data(), src.name_ptrs.data()),
          "nvrtcCreateProgram", req);
    const nvrtcResult rc = api_.compile(prog, src.option_count(), src.option_ptrs.data());
    CompileOutput out;
    std::size_t log_size = 0;
    api_.log_size(prog, &log_size);
    out.log.resize(log_size);
    if (log_size > 0) api_.log(prog, out.log.data());
    trim_log(out.log);
    if (rc != NVRTC_SUCCESS) {
      api_.destroy(&prog);
      throw CompileError("NVRTC failed to compile " + src.entry_name + " for " + req.arch + ": " +
                             api_.error_string(rc),
                         out.log, req.options, "");
    }
    std::size_t size = 0;
    api_.cubin_size(prog, &size);
    out.binary.resize(size);
    if (size > 0) api_.cubin(prog, reinterpret_cast<char*>(out.binary.data()));
    api_.destroy(&prog);
    if (size == 0) {
      throw CompileError(
          "NVRTC returned no cubin for " + src.entry_name + " (arch " + req.arch + ")", out.log,
          req.options, "");
    }
    out.resources = parse_ptxas_report(out.log);
    // ptxas warnings compile fine but may cost speed silently (e.g. wgmma serialised around a
    // register access it could not prove safe): say so once per compile.
    std::size_t at = 0;
    while ((at = out.log.find("warning", at)) != std::string::npos) {
      const std::size_t begin = out.log.rfind('\n', at) + 1;  // npos + 1 = 0: the first line
      const std::size_t end = out.log.find('\n', at);
      spdlog::warn("{}: {}", src.entry_name, out.log.substr(begin, end - begin));
      at = end;
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }

 private:
  void require() const {
    if (!unavailable_.empty()) throw Error(ErrorCode::rtc_unavailable, unavailable_);
  }
  void check(nvrtcResult rc, const char* what, const CompileRequest& req) const {
    if (rc != NVRTC_SUCCESS) {
      throw CompileError(std::string(what) + " failed: " + api_.error_string(rc), "", req.options,
                         "");
    }
  }

  support::DynamicLibrary lib_;
  NvrtcApi api_;
  std::string version_;
  std::string unavailable_;
};

}  // namespace

const RtcCompiler& nvrtc_compiler() {
  static const NvrtcCompiler compiler;
  return compiler;
}

bool lineinfo_from_env() {
  static constexpr std::string_view kAccepted[] = {"0", "1"};
  return env::choice_value("FMHA_JIT_LINEINFO", kAccepted) == "1";
}

}  // namespace fmha_jit::codegen::rtc
