#include "codegen/rtc/compiler.hpp"

#include <nlohmann/json.hpp>

#include "core/arch.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::codegen::rtc {

ProgramSources::ProgramSources(const CompileRequest& request)
    : entry_text(request.entry.text), entry_name(request.entry.name) {
  for (const auto& h : request.headers) {
    header_text.emplace_back(h.text);
    header_name.emplace_back(h.name);
  }
  for (std::size_t i = 0; i < header_text.size(); ++i) {
    header_ptrs.push_back(header_text[i].c_str());
    name_ptrs.push_back(header_name[i].c_str());
  }
  for (const auto& o : request.options) option_ptrs.push_back(o.c_str());
}

void trim_log(std::string& log) {
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
}

const RtcCompiler& compiler_for(std::string_view arch) {
  const ArchInfo* info = find_arch(arch);
  if (!info) {
    throw FieldError(ErrorCode::invalid_config, "arch", "\"" + std::string(arch) + "\"",
                     accepted_archs());
  }
  return info->vendor == Vendor::nvidia ? nvrtc_compiler() : hiprtc_compiler();
}

}  // namespace fmha_jit::codegen::rtc
