// `fmha-jit list | verify | clear`: look after the disk cache as a whole.
#include <spdlog/fmt/fmt.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include "cache/disk_cache.hpp"
#include "tools/fmha-jit/cache_access.hpp"
#include "tools/fmha-jit/cli.hpp"
#include "tools/fmha-jit/format.hpp"

namespace fmha_jit::cli {
namespace {

// Long enough to tell entries apart in a listing, short enough for the table; `info` and
// `export --key` accept it as a prefix.
constexpr std::size_t kShortKey = 12;

nlohmann::json entry_json(const cache::EntryInfo& e) {
  nlohmann::json j = {{"key", e.key}, {"bytes", e.bytes}, {"last_used", local_time(e.last_used)}};
  if (!e.manifest) {
    j["manifest"] = nullptr;  // unreadable: `verify` says why
    return j;
  }
  const auto& m = *e.manifest;
  j["name"] = entry_label(m);
  j["arch"] = m.arch;
  j["compiler"] = m.compiler_id + " " + m.compiler_version;
  j["compile_seconds"] = m.compile_seconds;
  j["kernel_symbols"] = m.kernel_symbols;
  nlohmann::json resources = nlohmann::json::array();
  for (const auto& r : m.resources) resources.push_back(support::to_json(r));
  j["resources"] = std::move(resources);
  return j;
}

void run_list(bool json, const GlobalOptions& g) {
  auto disk = open_existing_cache(g.cache_root());
  std::vector<cache::EntryInfo> entries = disk ? disk->list() : std::vector<cache::EntryInfo>{};
  sort_by_last_used(entries);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : entries) out.push_back(entry_json(e));
    fmt::print("{}\n", out.dump(2));
    return;
  }
  Table table({"KEY", "KERNEL", "ARCH", "SIZE", "COMPILE", "LAST USED", "RESOURCES"});
  std::uint64_t total = 0;
  for (const auto& e : entries) {
    total += e.bytes;
    const auto& m = e.manifest;
    table.add({e.key.substr(0, kShortKey), m ? entry_label(*m) : "(unreadable manifest)",
               m ? m->arch : "?", human_bytes(e.bytes),
               m ? fmt::format("{:.2f} s", m->compile_seconds) : "?", local_time(e.last_used),
               m ? resources_summary(*m) : "?"});
  }
  if (!table.empty()) table.print();
  if (!g.quiet) {
    fmt::print("{} entries, {} in {}\n", entries.size(), human_bytes(total),
               g.cache_root().string());
  }
}

void run_verify(bool fix, const GlobalOptions& g) {
  auto disk = open_existing_cache(g.cache_root());
  if (!disk) {
    if (!g.quiet) fmt::print("no cache at {}\n", g.cache_root().string());
    return;
  }
  const auto report = disk->verify(fix);
  for (const auto& p : report.problems) fmt::print("bad: {}\n", p);
  if (!g.quiet) {
    fmt::print("{} ok, {} bad, {} removed\n", report.ok, report.bad, report.removed);
    // Not an error: what a killed install leaves is never read, only takes space.
    if (report.leftovers > 0) {
      fmt::print("{} folders of interrupted installs, {} removed{}\n", report.leftovers,
                 report.leftovers_removed, fix ? "" : " (`--fix` removes them)");
    }
  }
  if (report.bad > 0 && !fix) {
    throw CommandFailed(
        fmt::format("{} bad cache entries; `fmha-jit verify --fix` removes them", report.bad));
  }
}

void run_clear(const GlobalOptions& g) {
  auto disk = open_existing_cache(g.cache_root());
  const int removed = disk ? disk->clear() : 0;
  if (!g.quiet) fmt::print("removed {} entries from {}\n", removed, g.cache_root().string());
}

}  // namespace

Command add_list_command(CLI::App& app, const GlobalOptions& g) {
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("list", "List cache entries, most recently used first");
  sub->add_flag("--json", *json, "Print a JSON array of entries");
  return {sub, [json, &g] { run_list(*json, g); }};
}

Command add_verify_command(CLI::App& app, const GlobalOptions& g) {
  auto fix = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("verify", "Check every cache entry's manifest and checksum");
  sub->footer("Exits 1 when an entry is bad, unless --fix removed it.");
  sub->add_flag("--fix", *fix, "Remove bad entries (they are rebuilt on next use)");
  return {sub, [fix, &g] { run_verify(*fix, g); }};
}

Command add_clear_command(CLI::App& app, const GlobalOptions& g) {
  auto* sub = app.add_subcommand("clear", "Remove every cache entry");
  return {sub, [&g] { run_clear(g); }};
}

}  // namespace fmha_jit::cli
