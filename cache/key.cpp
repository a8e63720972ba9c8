#include "cache/key.hpp"

#include <nlohmann/json.hpp>

#include "cache/hashing.hpp"

namespace fmha_jit::cache {
namespace {
void field(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += ' ';
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += '\n';
}
}  // namespace

KeyInputs key_inputs(const FmhaKernelConfig& canonical, const codegen::RenderedEntry& entry,
                     const codegen::rtc::RtcCompiler& compiler,
                     const codegen::TemplateSet& templates) {
  KeyInputs in;
  in.canonical_config = to_json(canonical).dump();
  in.arch = canonical.arch;
  in.compiler_id = std::string(compiler.id());
  in.compiler_version = compiler.version();
  in.options = compiler.options(canonical);
  in.entry_hash = xxh3_128_hex(entry.source);
  for (const auto* t : templates.closure(entry.source)) {
    in.templates.emplace_back(std::string(t->path), std::string(t->sha256));
  }
  return in;
}

std::string key_material(const KeyInputs& in) {
  std::string out = "fmha-jit cache key\n";
  field(out, "format", std::to_string(in.format_version));
  field(out, "config", in.canonical_config);
  field(out, "arch", in.arch);
  field(out, "compiler", in.compiler_id);
  field(out, "compiler_version", in.compiler_version);
  for (const auto& o : in.options) field(out, "option", o);
  field(out, "entry", in.entry_hash);
  for (const auto& [path, sha] : in.templates) field(out, "template", path + " " + sha);
  return out;
}

std::string compute_key(const KeyInputs& inputs) { return xxh3_128_hex(key_material(inputs)); }

}  // namespace fmha_jit::cache
