#include "cache/manifest.hpp"

#include <ctime>

#include "fmha_jit/error.hpp"

namespace fmha_jit::cache {

nlohmann::json to_json(const Manifest& m) {
  nlohmann::json resources = nlohmann::json::array();
  for (const auto& r : m.resources) resources.push_back(support::to_json(r));
  nlohmann::json templates = nlohmann::json::array();
  for (const auto& [path, sha] : m.templates)
    templates.push_back({{"path", path}, {"sha256", sha}});
  return {
      {"format_version", m.format_version},
      {"key", m.key},
      {"config", m.config},
      {"kernel_symbols", m.kernel_symbols},
      {"arch", m.arch},
      {"compiler", {{"id", m.compiler_id}, {"version", m.compiler_version}}},
      {"options", m.options},
      {"templates", templates},
      {"binary", {{"file", m.binary_file}, {"size", m.binary_size}, {"xxh3_128", m.binary_xxh3}}},
      {"source_file", m.source_file},
      {"resources", resources},
      {"compile_seconds", m.compile_seconds},
      {"created", m.created},
      {"last_used", m.last_used},
      {"fmha_jit_version", m.fmha_jit_version}};
}

Manifest manifest_from_json(const nlohmann::json& j) {
  try {
    Manifest m;
    m.format_version = j.at("format_version").get<int>();
    m.key = j.at("key").get<std::string>();
    m.config = j.at("config");
    m.kernel_symbols = j.at("kernel_symbols").get<std::vector<std::string>>();
    m.arch = j.at("arch").get<std::string>();
    m.compiler_id = j.at("compiler").at("id").get<std::string>();
    m.compiler_version = j.at("compiler").at("version").get<std::string>();
    m.options = j.at("options").get<std::vector<std::string>>();
    for (const auto& t : j.at("templates")) {
      m.templates.emplace_back(t.at("path").get<std::string>(), t.at("sha256").get<std::string>());
    }
    m.binary_file = j.at("binary").at("file").get<std::string>();
    m.binary_size = j.at("binary").at("size").get<std::uint64_t>();
    m.binary_xxh3 = j.at("binary").at("xxh3_128").get<std::string>();
    m.source_file = j.at("source_file").get<std::string>();
    for (const auto& r : j.at("resources")) m.resources.push_back(support::resources_from_json(r));
    m.compile_seconds = j.value("compile_seconds", 0.0);
    m.created = j.at("created").get<std::string>();
    m.last_used = j.at("last_used").get<std::string>();
    m.fmha_jit_version = j.value("fmha_jit_version", "");
    if (!is_entry_file_name(m.binary_file) || !is_entry_file_name(m.source_file)) {
      throw Error(ErrorCode::cache_error, "manifest names a file outside its entry");
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::cache_error, std::string("malformed manifest: ") + e.what());
  }
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool is_entry_file_name(std::string_view name) {
  return name == "manifest.json" || name == "kernel.cubin" || name == "kernel.hsaco" ||
         name == "source.cu";
}

}  // namespace fmha_jit::cache
