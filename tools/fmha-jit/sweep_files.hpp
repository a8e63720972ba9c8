// Reading config / sweep files for prebuild, info and bench-jit: JSON parsing and sweep planning
// with errors that name the file, and de-duplication across files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fmha_jit/config.hpp"

namespace fmha_jit::cli {

// Throws Error(io_error) naming the file when it cannot be read or is not valid JSON.
nlohmann::json read_json_file(const std::filesystem::path& file);

struct SkippedPoint {
  std::string file;
  nlohmann::json point;
  std::string reason;
};

struct SweepPlan {
  std::vector<FmhaKernelConfig> configs;  // canonical, unique across all files, in file order
  std::vector<std::string>
      impl_fallbacks;  // per config: kernels::ResolvedConfig::fallback_reason, or empty
  std::vector<SkippedPoint> skipped;
  // Files none of whose points is valid (every point skipped, or no point at all): they give
  // nothing to build, which prebuild reports as an error.
  std::vector<std::string> files_without_configs;
};

// Adds the points of one parsed document (`origin` names it in skip reasons).
void add_to_plan(SweepPlan& plan, const nlohmann::json& document, const std::string& origin);

// Reads and plans each file; a malformed document throws an error naming its file.
SweepPlan plan_files(const std::vector<std::string>& files);

// "file: {point}: reason", the one-line form of a skipped point.
std::string describe(const SkippedPoint& skip);

}  // namespace fmha_jit::cli
