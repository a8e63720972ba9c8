#include "cache/archive.hpp"

#include <nlohmann/json.hpp>

#include "cache/file_io.hpp"
#include "cache/hashing.hpp"
#include "cache/key.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::cache {
namespace {

constexpr const char* kArchiveFormat = "fmha-jit-archive";
constexpr int kArchiveVersion = 1;

nlohmann::json::binary_t as_binary(std::vector<std::uint8_t> bytes) {
  return nlohmann::json::binary_t(std::move(bytes));
}

}  // namespace

ArchiveReport export_archive(DiskCache& cache, const std::filesystem::path& file,
                             const std::vector<std::string>& key_prefixes) {
  ArchiveReport report;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& info : cache.list()) {
    if (!key_prefixes.empty()) {
      bool wanted = false;
      for (const auto& p : key_prefixes) wanted |= info.key.starts_with(p);
      if (!wanted) continue;
    }
    if (!info.manifest) {
      report.rejected.push_back(info.key + ": manifest.json missing or malformed");
      continue;
    }
    const Manifest& m = *info.manifest;
    const LoadResult loaded =
        cache.load(info.key, {m.arch, m.compiler_id, m.compiler_version}, false);
    if (!loaded.entry) {
      report.rejected.push_back(info.key + ": " + loaded.rejected);
      continue;
    }
    const auto dir = cache.entry_dir(info.key);
    nlohmann::json files = nlohmann::json::object();
    for (const std::string& name : {std::string("manifest.json"), m.binary_file, m.source_file}) {
      auto bytes = read_file(dir / name);
      if (!bytes) continue;
      files[name] = as_binary(std::move(*bytes));
    }
    entries.push_back({{"key", info.key}, {"files", std::move(files)}});
    ++report.exported;
  }
  const nlohmann::json archive = {
      {"format", kArchiveFormat}, {"version", kArchiveVersion}, {"entries", std::move(entries)}};
  write_file_atomically(file, nlohmann::json::to_cbor(archive));
  return report;
}

ArchiveReport import_archive(DiskCache& cache, const std::filesystem::path& file) {
  const auto bytes = read_file(file);
  if (!bytes) throw Error(ErrorCode::io_error, "cannot read " + file.string());
  nlohmann::json archive;
  try {
    archive = nlohmann::json::from_cbor(*bytes);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::io_error, file.string() + " is not an fmha-jit archive: " + e.what());
  }
  if (!archive.is_object() || archive.value("format", "") != kArchiveFormat ||
      !archive.contains("entries") || !archive["entries"].is_array()) {
    throw Error(ErrorCode::io_error, file.string() + " is not an fmha-jit archive");
  }
  if (archive.value("version", 0) != kArchiveVersion) {
    throw Error(ErrorCode::io_error, file.string() + ": archive version " +
                                         archive["version"].dump() + ", expected " +
                                         std::to_string(kArchiveVersion));
  }
  if (!cache.writable()) {
    throw Error(ErrorCode::cache_error,
                "cannot import into " + cache.root().string() + ": " + cache.unwritable_reason());
  }
  ArchiveReport report;
  for (const auto& e : archive["entries"]) {
    const std::string key = e.is_object() ? e.value("key", "") : "";
    auto reject = [&](const std::string& why) {
      report.rejected.push_back((key.empty() ? "?" : key) + ": " + why);
    };
    try {
      const auto& files = e.at("files");
      for (const auto& [name, _] : files.items()) {
        if (!is_entry_file_name(name)) throw Error(ErrorCode::cache_error, "bad file name " + name);
      }
      auto file_bytes = [&](const std::string& name) -> std::vector<std::uint8_t> {
        if (!files.contains(name) || !files[name].is_binary()) {
          throw Error(ErrorCode::cache_error, "missing " + name);
        }
        return files[name].get_binary();
      };
      const auto manifest_bytes = file_bytes("manifest.json");
      EntryFiles entry;
      entry.manifest = manifest_from_json(nlohmann::json::parse(manifest_bytes));
      if (entry.manifest.key != key)
        throw Error(ErrorCode::cache_error, "manifest names another key");
      if (entry.manifest.format_version != kCacheFormatVersion) {
        throw Error(ErrorCode::cache_error, "unsupported entry format");
      }
      entry.binary = file_bytes(entry.manifest.binary_file);
      if (entry.binary.size() != entry.manifest.binary_size ||
          xxh3_128_hex(entry.binary) != entry.manifest.binary_xxh3) {
        throw Error(ErrorCode::cache_error, "binary checksum mismatch");
      }
      const auto source = file_bytes(entry.manifest.source_file);
      entry.source.assign(source.begin(), source.end());
      if (cache.install(entry)) {
        ++report.imported;
      } else {
        ++report.already_present;
      }
    } catch (const std::exception& ex) {
      reject(ex.what());
    }
  }
  return report;
}

}  // namespace fmha_jit::cache
