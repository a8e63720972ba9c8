// manifest.json of a cache entry: what was compiled, by what, and the checksum that load verifies.
// Entries hold no absolute paths, so a cache folder can be moved, exported and imported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/kernel_resources.hpp"

namespace fmha_jit::cache {

struct Manifest {
  int format_version = 0;
  std::string key;
  nlohmann::json config;  // canonical config
  std::vector<std::string> kernel_symbols;
  std::string arch;
  std::string compiler_id;
  std::string compiler_version;
  std::vector<std::string> options;
  std::vector<std::pair<std::string, std::string>> templates;  // (path, sha256)
  std::string binary_file;                                     // file name inside the entry folder
  std::uint64_t binary_size = 0;
  std::string binary_xxh3;  // XXH3-128 hex of the binary
  std::string source_file;  // the rendered entry, kept for inspection and reproduction
  std::vector<support::KernelResources> resources;
  double compile_seconds = 0;
  std::string created;    // UTC ISO-8601
  std::string last_used;  // UTC ISO-8601 at creation; later uses touch the manifest's mtime
  std::string fmha_jit_version;
};

nlohmann::json to_json(const Manifest& m);
// Throws Error(cache_error) naming the missing or mistyped field.
Manifest manifest_from_json(const nlohmann::json& j);

// Current UTC time as 2026-12-02T10:46:03Z.
std::string utc_now_iso8601();

// File names an entry may contain; import rejects anything else.
bool is_entry_file_name(std::string_view name);

}  // namespace fmha_jit::cache
