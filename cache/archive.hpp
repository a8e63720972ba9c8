// One-file archives of cache entries, so that a cache warmed on a GPU-less CI runner ships to GPU
// machines: `fmha-jit export FILE` / `fmha-jit import FILE`.
//
// The archive is CBOR (nlohmann::json's binary encoding): {"format": "fmha-jit-archive",
// "version": 1, "entries": [{"key": K, "files": {"manifest.json": bytes, "kernel.cubin": bytes,
// "source.cu": bytes}}]}. File names are checked against the entry file list, so an archive cannot
// write outside the cache.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"

namespace fmha_jit::cache {

struct ArchiveReport {
  int exported = 0;
  int imported = 0;
  int already_present = 0;
  std::vector<std::string> rejected;  // "<key>: <why>"
};

// Writes every verified entry (or those whose key starts with one of `key_prefixes`) atomically.
ArchiveReport export_archive(DiskCache& cache, const std::filesystem::path& file,
                             const std::vector<std::string>& key_prefixes = {});

// Verifies each entry (manifest, key, size, checksum) and installs the good ones atomically.
// Throws Error(io_error) when the file is not an archive at all.
ArchiveReport import_archive(DiskCache& cache, const std::filesystem::path& file);

}  // namespace fmha_jit::cache
