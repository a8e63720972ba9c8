#include "tools/fmha-jit/sweep_files.hpp"

#include <algorithm>
#include <fstream>
#include <set>

#include "fmha_jit/error.hpp"
#include "tools/fmha-jit/sweep.hpp"

namespace fmha_jit::cli {

nlohmann::json read_json_file(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    throw Error(ErrorCode::io_error, "cannot read " + file.string() + ": no such file");
  }
  // A directory opens as a stream on Linux and would surface as a confusing JSON parse error.
  if (std::filesystem::is_directory(file, ec)) {
    throw Error(ErrorCode::io_error, "cannot read " + file.string() + ": is a directory");
  }
  std::ifstream in(file);
  if (!in) throw Error(ErrorCode::io_error, "cannot read " + file.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::io_error, file.string() + ": invalid JSON: " + e.what());
  }
}

void add_to_plan(SweepPlan& plan, const nlohmann::json& document, const std::string& origin) {
  std::vector<cli::SweepItem> items;
  try {
    items = cli::plan_sweep(document);
  } catch (const Error& e) {
    // Keep the code (invalid_config) but say which file was malformed.
    throw Error(e.code(), origin + ": " + e.what());
  }
  // plan_sweep() drops duplicates within one document; files listed together can still overlap,
  // and a second obtain of the same config would only report a misleading memory hit.
  std::set<std::string> seen;
  for (const auto& c : plan.configs) seen.insert(to_json(c).dump());
  if (std::none_of(items.begin(), items.end(), [](const auto& item) { return item.valid; })) {
    plan.files_without_configs.push_back(origin);
  }
  for (auto& item : items) {
    if (!item.valid) {
      plan.skipped.push_back({origin, std::move(item.point), std::move(item.skip_reason)});
    } else if (seen.insert(to_json(item.config).dump()).second) {
      plan.configs.push_back(item.config);
      plan.impl_fallbacks.push_back(std::move(item.impl_fallback));
    }
  }
}

SweepPlan plan_files(const std::vector<std::string>& files) {
  SweepPlan plan;
  for (const auto& file : files) add_to_plan(plan, read_json_file(file), file);
  return plan;
}

std::string describe(const SkippedPoint& skip) {
  return skip.file + ": " + skip.point.dump() + ": " + skip.reason;
}

}  // namespace fmha_jit::cli
