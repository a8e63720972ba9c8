#include "codegen/rtc/ptxas_report.hpp"

#include <charconv>
#include <set>
#include <string>

namespace fmha_jit::codegen::rtc {
namespace {

// The integer immediately before `unit` in `line` (e.g. "14" in "Used 14 registers"), or -1.
int number_before(std::string_view line, std::string_view unit) {
  const auto at = line.find(unit);
  if (at == std::string_view::npos || at < 2) return -1;
  std::size_t end = at;
  while (end > 0 && line[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  int value = -1;
  if (begin == end) return -1;
  std::from_chars(line.data() + begin, line.data() + end, value);
  return value;
}

std::string_view quoted(std::string_view line, std::string_view after) {
  const auto at = line.find(after);
  if (at == std::string_view::npos) return {};
  const auto open = line.find('\'', at);
  const auto close = open == std::string_view::npos ? open : line.find('\'', open + 1);
  if (close == std::string_view::npos) return {};
  return line.substr(open + 1, close - open - 1);
}

}  // namespace

std::vector<KernelResources> parse_ptxas_report(std::string_view log) {
  std::vector<KernelResources> out;
  // ptxas names the function of a serialisation notice, which may come before its entry block.
  std::set<std::string, std::less<>> serialized;
  KernelResources* current = nullptr;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t end = log.find('\n', pos);
    if (end == std::string_view::npos) end = log.size();
    const std::string_view line = log.substr(pos, end - pos);
    pos = end + 1;
    if (line.find("wgmma.mma_async instructions are serialized") != std::string_view::npos) {
      if (auto name = quoted(line, "in the function"); !name.empty()) serialized.emplace(name);
      continue;
    }
    if (auto name = quoted(line, "Compiling entry function"); !name.empty()) {
      out.push_back(KernelResources{.symbol = std::string(name)});
      current = &out.back();
      continue;
    }
    if (!current) continue;
    if (line.find("stack frame") != std::string_view::npos) {
      current->stack_frame_bytes = number_before(line, "bytes stack frame");
      current->spill_store_bytes = number_before(line, "bytes spill stores");
      current->spill_load_bytes = number_before(line, "bytes spill loads");
    } else if (line.find("registers") != std::string_view::npos) {
      current->registers = number_before(line, "registers");
      const int smem = number_before(line, "bytes smem");
      current->static_smem_bytes = smem < 0 ? 0 : smem;
    }
  }
  for (auto& r : out) r.wgmma_serialized = serialized.count(r.symbol) > 0;
  return out;
}

}  // namespace fmha_jit::codegen::rtc
