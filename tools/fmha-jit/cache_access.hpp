// How the inspecting commands (list, info, verify, clear, export) reach the disk cache: without
// creating a cache where none exists, and by unique key prefix.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"

namespace fmha_jit::cli {

// The cache at `root`, or nullopt when the folder does not exist. DiskCache's constructor creates
// its folders, which a command that only looks (or a typo in --cache-dir) should not do.
std::optional<cache::DiskCache> open_existing_cache(const std::filesystem::path& root);

// True when `text` could be a key prefix (1-32 lowercase hex digits).
bool looks_like_key_prefix(const std::string& text);

// The one entry whose key starts with `prefix`. Throws CommandFailed when none matches, or when
// several do (listing the candidates).
const cache::EntryInfo& resolve_key_prefix(const std::vector<cache::EntryInfo>& entries,
                                           const std::string& prefix);

// Entries sorted by last use, most recent first.
void sort_by_last_used(std::vector<cache::EntryInfo>& entries);

}  // namespace fmha_jit::cli
