#include "tools/fmha-jit/format.hpp"

#include <spdlog/fmt/chrono.h>
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "codegen/kernel_name.hpp"

namespace fmha_jit::cli {

std::string human_bytes(std::uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string human_seconds(double seconds) {
  if (seconds < 1) return fmt::format("{:.0f} ms", seconds * 1e3);
  if (seconds < 60) return fmt::format("{:.2f} s", seconds);
  const auto whole = static_cast<long>(seconds);
  return fmt::format("{}m{:02}s", whole / 60, whole % 60);
}

std::string local_time(std::filesystem::file_time_type t) {
  const auto sys = std::chrono::file_clock::to_sys(t);
  const std::time_t tt = std::chrono::system_clock::to_time_t(
      std::chrono::time_point_cast<std::chrono::system_clock::duration>(sys));
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(tt));
}

std::string entry_label(const cache::Manifest& m) {
  try {
    return codegen::kernel_base_name(config_from_json(m.config));
  } catch (const std::exception&) {
    // A manifest from another library version may hold fields this one rejects; its symbols
    // still identify the kernels.
  }
  return m.kernel_symbols.empty() ? "?" : m.kernel_symbols.front();
}

std::string resources_summary(const cache::Manifest& m) {
  int regs = -1, spill_store = 0, spill_load = 0;
  bool serialized = false;
  for (const auto& r : m.resources) {
    serialized = serialized || r.wgmma_serialized;
    regs = std::max(regs, r.registers);
    spill_store = std::max(spill_store, r.spill_store_bytes);
    spill_load = std::max(spill_load, r.spill_load_bytes);
  }
  if (regs < 0) return "-";  // hipRTC reports no resources
  std::string s = fmt::format("{} regs", regs);
  if (spill_store > 0 || spill_load > 0)
    s += fmt::format(", spills {}/{} B", spill_store, spill_load);
  if (serialized) s += ", wgmma serialized";
  return s;
}

void Table::print(std::FILE* out) const {
  std::vector<std::size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      // The last column is not padded: no trailing blanks.
      line += i + 1 == row.size() ? row[i] : fmt::format("{:<{}}  ", row[i], width[i]);
    }
    fmt::print(out, "{}\n", line);
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
}

Stats summarize(std::vector<double> samples) {
  Stats s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

}  // namespace fmha_jit::cli
