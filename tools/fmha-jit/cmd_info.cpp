// `fmha-jit info KEY-PREFIX | FILE.json`: everything known about one cache entry, or about the
// configs of a file: canonical form, key, the key material that was hashed, and whether the cache
// holds them. The key material answers "why did this not hit the cache?".
#include <spdlog/fmt/fmt.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "cache/file_io.hpp"
#include "cache/key.hpp"
#include "codegen/kernel_name.hpp"
#include "dispatcher/pipeline.hpp"
#include "tools/fmha-jit/cache_access.hpp"
#include "tools/fmha-jit/cli.hpp"
#include "tools/fmha-jit/format.hpp"
#include "tools/fmha-jit/sweep_files.hpp"

namespace fmha_jit::cli {
namespace {
namespace fs = std::filesystem;

struct InfoOptions {
  std::string target;
  bool json = false;
};

std::string indent(const std::string& text, const std::string& prefix = "  ") {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += prefix + line + "\n";
  return out;
}

// The manifest as stored (not re-serialised), pretty-printed when it parses.
nlohmann::json stored_manifest(const fs::path& dir, std::string& raw) {
  const auto bytes = cache::read_file(dir / "manifest.json");
  if (!bytes) return nullptr;
  raw.assign(bytes->begin(), bytes->end());
  return nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
}

void info_entry(const InfoOptions& o, const GlobalOptions& g) {
  auto disk = open_existing_cache(g.cache_root());
  if (!disk) throw CommandFailed("no cache at " + g.cache_root().string());
  const auto entries = disk->list();
  const cache::EntryInfo& e = resolve_key_prefix(entries, o.target);
  const fs::path dir = disk->entry_dir(e.key);

  nlohmann::json files = nlohmann::json::object();
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    const auto size = f.file_size(size_ec);
    files[f.path().filename().string()] = size_ec ? 0 : size;
  }
  std::string raw;
  const nlohmann::json manifest = stored_manifest(dir, raw);

  if (o.json) {
    fmt::print("{}\n", nlohmann::json{{"key", e.key},
                                      {"path", dir.string()},
                                      {"bytes", e.bytes},
                                      {"last_used", local_time(e.last_used)},
                                      {"files", files},
                                      {"manifest", manifest.is_discarded() ? nullptr : manifest}}
                           .dump(2));
    return;
  }
  fmt::print("key:       {}\n", e.key);
  fmt::print("kernel:    {}\n", e.manifest ? entry_label(*e.manifest) : "?");
  fmt::print("path:      {}\n", dir.string());
  fmt::print("last used: {}\n", local_time(e.last_used));
  fmt::print("size:      {}\n", human_bytes(e.bytes));
  for (const auto& [name, size] : files.items()) {
    fmt::print("  {:<16} {}\n", name, human_bytes(size.get<std::uint64_t>()));
  }
  if (raw.empty()) {
    fmt::print("manifest:  missing or unreadable\n");
  } else if (manifest.is_discarded()) {
    fmt::print("manifest (not valid JSON):\n{}", indent(raw));
  } else {
    fmt::print("manifest:\n{}", indent(manifest.dump(2)));
  }
}

// Whether the cache holds a valid entry for `k`. load() also refreshes the entry's LRU time,
// which is harmless: asking about a config is a sign it is about to be used.
std::string cache_state(cache::DiskCache* disk, const dispatch::KeyedConfig& k) {
  if (!disk) return "no (no cache folder)";
  const auto loaded = disk->load(
      k.key, {k.resolved.canonical.arch, k.inputs.compiler_id, k.inputs.compiler_version});
  if (loaded.entry) return "yes";
  if (!loaded.rejected.empty()) return "present but invalid: " + loaded.rejected;
  return "no";
}

void info_file(const InfoOptions& o, const GlobalOptions& g) {
  SweepPlan plan;
  add_to_plan(plan, read_json_file(o.target), o.target);
  auto disk = open_existing_cache(g.cache_root());
  cache::DiskCache* cache_ptr = disk ? &*disk : nullptr;

  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < plan.configs.size(); ++i) {
    // The key needs the compiler's version; without a compiler this throws rtc_unavailable,
    // which is the answer the user needs.
    const auto k = dispatch::key_config(plan.configs[i]);
    const std::string material = cache::key_material(k.inputs);
    const std::string cached = cache_state(cache_ptr, k);
    // Where `auto` on Hopper fell back from the wgmma_sm90a kernels, and why.
    const std::string& fallback = plan.impl_fallbacks[i];
    if (o.json) {
      out.push_back({{"config", to_json(k.resolved.canonical)},
                     {"key", k.key},
                     {"key_material", material},
                     {"kernel_symbols", k.entry.symbols},
                     {"cached", cached},
                     {"impl_fallback", fallback}});
      continue;
    }
    fmt::print("[{}/{}] {}\n", i + 1, plan.configs.size(),
               codegen::kernel_base_name(k.resolved.canonical));
    fmt::print("  canonical: {}\n", to_json(k.resolved.canonical).dump());
    if (!fallback.empty()) fmt::print("  fallback:  {}\n", fallback);
    fmt::print("  key:       {}\n", k.key);
    fmt::print("  cached:    {}\n", cached);
    fmt::print("  symbols:\n{}",
               indent(fmt::format("{}", fmt::join(k.entry.symbols, "\n")), "    "));
    fmt::print("  key material:\n{}", indent(material, "    "));
  }
  if (o.json) {
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& s : plan.skipped)
      skipped.push_back({{"point", s.point}, {"reason", s.reason}});
    fmt::print("{}\n", nlohmann::json{{"configs", out}, {"skipped", skipped}}.dump(2));
    return;
  }
  for (const auto& s : plan.skipped) fmt::print("skipped {}\n", describe(s));
}

void run_info(const InfoOptions& o, const GlobalOptions& g) {
  // A hex word that is not a file is a key prefix; anything else is read as a file (and a missing
  // file is reported as such).
  std::error_code ec;
  if (looks_like_key_prefix(o.target) && !fs::exists(o.target, ec)) return info_entry(o, g);
  info_file(o, g);
}

}  // namespace

Command add_info_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<InfoOptions>();
  auto* sub = app.add_subcommand("info", "Show a cache entry, or the keys of a config file");
  sub->footer(
      "With a key prefix (as `list` prints it; must match one entry): the manifest, path and file "
      "sizes. With a file: each config's canonical form, key, key material, kernel symbols and "
      "whether it is cached.");
  sub->add_option("target", o->target, "Key prefix or config / sweep file")
      ->required()
      ->type_name("KEY-PREFIX|FILE.json");
  sub->add_flag("--json", o->json, "Print JSON");
  return {sub, [o, &g] { run_info(*o, g); }};
}

}  // namespace fmha_jit::cli
