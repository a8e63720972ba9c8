#include "cache/key.hpp"

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
