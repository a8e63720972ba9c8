// Human-readable text for the CLI's tables and summaries: sizes, durations, times, column layout
// and the one-line description of a cache entry.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/manifest.hpp"

namespace fmha_jit::cli {

std::string human_bytes(std::uint64_t bytes);  // "12.3 KiB"
std::string human_seconds(double seconds);     // "850 ms", "1.23 s", "2m05s"
// Local time "2026-12-02 11:46:03" of a file timestamp (the cache's LRU clock).
std::string local_time(std::filesystem::file_time_type t);

// Kernel base name of the entry's config, else its first symbol, else "?" (unreadable manifest,
// or a config written by another version of the library).
std::string entry_label(const cache::Manifest& m);
// "168 regs" / "255 regs, spills 40/40 B" / "-": the worst of the module's kernels.
std::string resources_summary(const cache::Manifest& m);

// Left-aligned columns sized to their widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  void print(std::FILE* out = stdout) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Median, minimum and maximum of a sample; all zero for an empty one.
struct Stats {
  double median = 0;
  double min = 0;
  double max = 0;
  std::size_t count = 0;
};
Stats summarize(std::vector<double> samples);

}  // namespace fmha_jit::cli
