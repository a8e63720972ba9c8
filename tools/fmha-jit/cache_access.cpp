#include "tools/fmha-jit/cache_access.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "tools/fmha-jit/cli.hpp"
#include "tools/fmha-jit/format.hpp"

namespace fmha_jit::cli {
namespace {

// Candidates named in an ambiguity error; the error is one line, so the list is capped.
constexpr std::size_t kMaxCandidates = 8;

}  // namespace

std::optional<cache::DiskCache> open_existing_cache(const std::filesystem::path& root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return std::nullopt;
  return cache::DiskCache(root);
}

bool looks_like_key_prefix(const std::string& text) {
  return !text.empty() && text.size() <= 32 && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

const cache::EntryInfo& resolve_key_prefix(const std::vector<cache::EntryInfo>& entries,
                                           const std::string& prefix) {
  std::vector<const cache::EntryInfo*> matches;
  for (const auto& e : entries) {
    if (e.key.starts_with(prefix)) matches.push_back(&e);
  }
  if (matches.empty()) throw CommandFailed("no cache entry has a key starting with " + prefix);
  if (matches.size() == 1) return *matches.front();
  std::vector<std::string> names;
  for (std::size_t i = 0; i < matches.size() && i < kMaxCandidates; ++i) {
    const auto* m = matches[i];
    names.push_back(m->key + " (" + (m->manifest ? entry_label(*m->manifest) : "?") + ")");
  }
  if (matches.size() > kMaxCandidates) {
    names.push_back(fmt::format("and {} more", matches.size() - kMaxCandidates));
  }
  throw CommandFailed(fmt::format("key prefix {} is ambiguous, {} entries match: {}", prefix,
                                  matches.size(), fmt::join(names, ", ")));
}

void sort_by_last_used(std::vector<cache::EntryInfo>& entries) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.last_used > b.last_used; });
}

}  // namespace fmha_jit::cli
