// `fmha-jit export FILE` / `fmha-jit import FILE`: ship a cache warmed on a GPU-less build machine
// to GPU machines as one file. Entries are verified on both sides; import refuses bad ones.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "cache/archive.hpp"
#include "tools/fmha-jit/cache_access.hpp"
#include "tools/fmha-jit/cli.hpp"

namespace fmha_jit::cli {
namespace {

struct ExportOptions {
  std::string file;
  std::vector<std::string> key_prefixes;
};

void run_export(const ExportOptions& o, const GlobalOptions& g) {
  auto disk = open_existing_cache(g.cache_root());
  if (!disk) throw CommandFailed("no cache at " + g.cache_root().string());
  const auto report = cache::export_archive(*disk, o.file, o.key_prefixes);
  // Export carries on past bad entries (the archive holds the good ones); `verify` deals with them.
  for (const auto& r : report.rejected) spdlog::warn("not exported: {}", r);
  if (!o.key_prefixes.empty() && report.exported == 0 && report.rejected.empty()) {
    spdlog::warn("no cache entry matches {}", fmt::join(o.key_prefixes, ", "));
  }
  if (!g.quiet) {
    fmt::print("exported {} entries to {} ({} rejected)\n", report.exported, o.file,
               report.rejected.size());
  }
}

void run_import(const std::string& file, const GlobalOptions& g) {
  // Import writes, so it may create the cache (unlike the inspecting commands).
  cache::DiskCache disk(g.cache_root());
  const auto report = cache::import_archive(disk, file);
  for (const auto& r : report.rejected) fmt::print(stderr, "rejected: {}\n", r);
  if (!g.quiet) {
    fmt::print("imported {} entries into {}, {} already present, {} rejected\n", report.imported,
               g.cache_root().string(), report.already_present, report.rejected.size());
  }
  if (!report.rejected.empty()) {
    throw CommandFailed(
        fmt::format("{} entries of {} were rejected", report.rejected.size(), file));
  }
}

}  // namespace

Command add_export_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<ExportOptions>();
  auto* sub = app.add_subcommand("export", "Write verified cache entries to one archive file");
  sub->add_option("file", o->file, "Archive to write")->required()->type_name("FILE");
  sub->add_option("--key", o->key_prefixes, "Only entries whose key starts with PREFIX")
      ->type_name("PREFIX")
      ->check(CLI::Validator(
          [](std::string& value) {
            return looks_like_key_prefix(value) ? std::string()
                                                : "expected 1-32 lowercase hex digits";
          },
          "HEX"));
  return {sub, [o, &g] { run_export(*o, g); }};
}

Command add_import_command(CLI::App& app, const GlobalOptions& g) {
  auto file = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("import", "Install the verified entries of an archive file");
  sub->footer("Exits 1 if any entry of the archive was rejected.");
  sub->add_option("file", *file, "Archive to read")->required()->type_name("FILE");
  return {sub, [file, &g] { run_import(*file, g); }};
}

}  // namespace fmha_jit::cli
