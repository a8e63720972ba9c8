#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>

#include "cache/file_io.hpp"
#include "cache/hashing.hpp"
#include "cache/key.hpp"
#include "fmha_jit/error.hpp"
#include "support/env.hpp"

namespace fmha_jit::cache {
namespace fs = std::filesystem;

namespace {

bool is_key(std::string_view s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Moves a folder out of the way with one rename (atomic for readers), then deletes it.
void remove_dir(const fs::path& dir) {
  std::error_code ec;
  const fs::path trash = dir.parent_path() / unique_name(".trash-");
  if (fs::rename(dir, trash, ec); ec) {
    fs::remove_all(dir, ec);
    return;
  }
  fs::remove_all(trash, ec);
}

std::uint64_t folder_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    const auto n = f.file_size(size_ec);
    if (!size_ec) total += n;
  }
  return total;
}

bool starts_with(const fs::path& p, std::string_view prefix) {
  return p.filename().native().starts_with(prefix);
}

}  // namespace

int DiskCache::remove_staging_leftovers(const std::string& key) {
  // Staging folders are named .staging-<key>-<unique>; only the holder of the key's lock stages
  // that key, so under the lock every such folder belongs to a process that died mid-install.
  const fs::path shard = entry_dir(key).parent_path();
  const std::string prefix = ".staging-" + key + "-";
  int removed = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(shard, ec)) {
    if (!starts_with(f.path(), prefix)) continue;
    std::error_code rm_ec;
    fs::remove_all(f.path(), rm_ec);
    removed += !rm_ec;
  }
  return removed;
}

DiskCache::DiskCache(fs::path root, std::optional<std::uint64_t> max_bytes)
    : root_(std::move(root)), max_bytes_(max_bytes) {
  std::error_code ec;
  fs::create_directories(entries_dir(), ec);
  if (!ec) fs::create_directories(version_dir() / "locks", ec);
  if (ec) {
    unwritable_reason_ = "cannot create " + (version_dir()).string() + ": " + ec.message();
    return;
  }
  // Creating a folder can succeed where writing files fails (a read-only bind mount of an existing
  // tree); probe with a real file.
  const fs::path probe = version_dir() / unique_name(".probe-");
  try {
    write_file_durably(probe, bytes_of("probe"));
    fs::remove(probe, ec);
    writable_ = true;
  } catch (const Error& e) {
    unwritable_reason_ = e.what();
  }
}

fs::path DiskCache::version_dir() const {
  return root_ / ("v" + std::to_string(kCacheFormatVersion));
}

fs::path DiskCache::entry_dir(const std::string& key) const {
  return entries_dir() / key.substr(0, 2) / key;
}

fs::path DiskCache::lock_path(const std::string& key) const {
  return version_dir() / "locks" / (key + ".lock");
}

std::chrono::milliseconds DiskCache::lock_timeout() {
  // A cold compile of the heaviest kernel takes seconds; ten minutes means the holder is stuck.
  // The cap keeps the deadline (steady_clock now + timeout, in nanoseconds) far from overflow.
  constexpr std::uint64_t kMaxMs = std::numeric_limits<std::int32_t>::max();  // about 24.8 days
  if (const auto ms = env::unsigned_value("FMHA_JIT_LOCK_TIMEOUT_MS", "milliseconds", kMaxMs)) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(*ms));
  }
  return std::chrono::minutes(10);
}

LoadResult DiskCache::load(const std::string& key, const Expectation& expect, bool touch) const {
  LoadResult result;
  const fs::path dir = entry_dir(key);
  const auto manifest_bytes = read_file(dir / "manifest.json");
  if (!manifest_bytes) {
    std::error_code ec;
    if (fs::exists(dir, ec)) result.rejected = "manifest.json missing or unreadable";
    return result;
  }
  Manifest m;
  try {
    m = manifest_from_json(nlohmann::json::parse(manifest_bytes->begin(), manifest_bytes->end()));
  } catch (const std::exception& e) {
    result.rejected = std::string("manifest.json unparsable: ") + e.what();
    return result;
  }
  auto reject = [&](std::string why) {
    result.rejected = std::move(why);
    return result;
  };
  if (m.format_version != kCacheFormatVersion) {
    return reject("format version " + std::to_string(m.format_version) + ", expected " +
                  std::to_string(kCacheFormatVersion));
  }
  if (m.key != key) return reject("manifest names key " + m.key);
  if (m.arch != expect.arch)
    return reject("built for arch " + m.arch + ", expected " + expect.arch);
  if (m.compiler_id != expect.compiler_id || m.compiler_version != expect.compiler_version) {
    return reject("built by " + m.compiler_id + " " + m.compiler_version + ", expected " +
                  expect.compiler_id + " " + expect.compiler_version);
  }
  auto binary = read_file(dir / m.binary_file);
  if (!binary) return reject(m.binary_file + " missing or unreadable");
  if (binary->size() != m.binary_size) {
    return reject(m.binary_file + " has " + std::to_string(binary->size()) +
                  " bytes, manifest says " + std::to_string(m.binary_size));
  }
  if (xxh3_128_hex(*binary) != m.binary_xxh3) return reject(m.binary_file + " checksum mismatch");
  // The LRU clock: mtime of the manifest. Failure (read-only cache) is harmless.
  if (touch) ::utimensat(AT_FDCWD, (dir / "manifest.json").c_str(), nullptr, 0);
  result.entry = EntryFiles{std::move(m), std::move(*binary), {}};
  return result;
}

void DiskCache::warn_unwritable_once() const {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (warned.insert(root_.string()).second) {
    spdlog::warn("kernel cache {} is not writable ({}); compiling in memory only", root_.string(),
                 unwritable_reason_);
  }
}

void DiskCache::warn_no_locks_once(const std::string& why) const {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (warned.insert(root_.string()).second) {
    spdlog::warn(
        "kernel cache {} has no file locks ({}); entries are still stored atomically, "
        "but processes may compile the same kernel at the same time",
        root_.string(), why);
  }
}

DiskCache::Obtained DiskCache::get_or_build(const std::string& key, const Expectation& expect,
                                            const std::function<EntryFiles()>& produce) {
  LoadResult first = load(key, expect);
  if (first.entry) return {std::move(*first.entry), false, false};
  if (!writable_) {
    if (!first.rejected.empty()) {
      spdlog::warn("cache entry {} rejected ({}); cache is read-only, compiling in memory", key,
                   first.rejected);
    }
    warn_unwritable_once();
    return {produce(), true, false};
  }
  FileLock lock(lock_path(key), lock_timeout());
  if (!lock.locked() && lock.unsupported()) {
    // No locks on this filesystem (NFSv3 without lockd): still store, since the install is one
    // atomic rename that readers verify. What is lost is only the once-per-key guarantee:
    // processes that miss at the same time each compile the key.
    warn_no_locks_once(lock.error());
    return produce_and_store(key, produce);
  }
  if (!lock.locked()) {
    spdlog::warn("cache lock for {} not taken ({}); compiling without storing", key, lock.error());
    return {produce(), true, false};
  }
  if (const int n = remove_staging_leftovers(key)) {
    spdlog::warn("removed {} unfinished install(s) of cache entry {} left by killed processes", n,
                 key);
  }
  // Check again: another process may have finished this key while we waited for the lock.
  LoadResult second = load(key, expect);
  if (second.entry) return {std::move(*second.entry), false, false};
  if (!second.rejected.empty()) {
    spdlog::warn("cache entry {} rejected ({}); removing and rebuilding", key, second.rejected);
    remove_dir(entry_dir(key));
  }
  Obtained out = produce_and_store(key, produce);
  if (out.stored) evict(key);
  return out;
}

DiskCache::Obtained DiskCache::produce_and_store(const std::string& key,
                                                 const std::function<EntryFiles()>& produce) {
  Obtained out{produce(), true, false};
  try {
    store(out.entry);
    out.stored = true;
  } catch (const Error& e) {
    spdlog::warn("cache entry {} not stored ({}); using it from memory", key, e.what());
  }
  return out;
}

void DiskCache::store(const EntryFiles& entry) {
  const std::string& key = entry.manifest.key;
  if (!is_key(key)) throw Error(ErrorCode::cache_error, "refusing to store malformed key " + key);
  const fs::path final_dir = entry_dir(key);
  const fs::path shard = final_dir.parent_path();
  std::error_code ec;
  fs::create_directories(shard, ec);
  if (ec) throw Error(ErrorCode::io_error, "cannot create " + shard.string() + ": " + ec.message());
  // Stage the whole entry in a sibling folder, then publish it with one rename: readers see the
  // complete entry or none.
  const fs::path staging = shard / unique_name(".staging-" + key + "-");
  fs::create_directory(staging, ec);
  if (ec)
    throw Error(ErrorCode::io_error, "cannot create " + staging.string() + ": " + ec.message());
  try {
    write_file_durably(staging / entry.manifest.binary_file, entry.binary);
    write_file_durably(staging / entry.manifest.source_file, bytes_of(entry.source));
    write_file_durably(staging / "manifest.json", bytes_of(to_json(entry.manifest).dump(2)));
    sync_directory(staging);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  if (fs::exists(final_dir, ec)) remove_dir(final_dir);  // rejected leftovers (we hold the lock)
  fs::rename(staging, final_dir, ec);
  if (ec) {
    fs::remove_all(staging, ec);
    if (!fs::exists(final_dir / "manifest.json")) {
      throw Error(ErrorCode::io_error, "cannot install cache entry " + key);
    }
  }
  sync_directory(shard);
}

bool DiskCache::install(const EntryFiles& entry) {
  const Manifest& m = entry.manifest;
  if (!is_key(m.key)) throw Error(ErrorCode::cache_error, "malformed key " + m.key);
  FileLock lock(lock_path(m.key), lock_timeout());
  if (!lock.locked()) throw Error(ErrorCode::cache_error, lock.error());
  remove_staging_leftovers(m.key);
  if (load(m.key, {m.arch, m.compiler_id, m.compiler_version}).entry) return false;
  store(entry);
  return true;
}

void DiskCache::remove(const std::string& key) {
  if (is_key(key)) remove_dir(entry_dir(key));
}

std::vector<EntryInfo> DiskCache::list() const {
  std::vector<EntryInfo> out;
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(entries_dir(), ec)) {
    std::error_code shard_ec;
    for (const auto& dir : fs::directory_iterator(shard.path(), shard_ec)) {
      const std::string key = dir.path().filename().string();
      if (!is_key(key)) continue;  // staging or trash folders
      EntryInfo info;
      info.key = key;
      info.bytes = folder_bytes(dir.path());
      std::error_code time_ec;
      info.last_used = fs::last_write_time(dir.path() / "manifest.json", time_ec);
      if (time_ec) info.last_used = fs::last_write_time(dir.path(), time_ec);
      if (auto bytes = read_file(dir.path() / "manifest.json")) {
        try {
          info.manifest = manifest_from_json(nlohmann::json::parse(bytes->begin(), bytes->end()));
        } catch (const std::exception&) {
        }
      }
      out.push_back(std::move(info));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return out;
}

DiskCache::VerifyReport DiskCache::verify(bool fix) {
  VerifyReport report;
  for (const auto& info : list()) {
    std::string problem;
    if (!info.manifest) {
      problem = "manifest.json missing or malformed";
    } else {
      const Manifest& m = *info.manifest;
      const LoadResult r = load(info.key, {m.arch, m.compiler_id, m.compiler_version}, false);
      problem = r.entry ? "" : r.rejected;
    }
    if (problem.empty()) {
      ++report.ok;
      continue;
    }
    ++report.bad;
    report.problems.push_back(info.key + ": " + problem);
    if (fix) {
      // Under the key's lock, so an entry being rebuilt right now is not pulled away; a lock that
      // cannot be had quickly means someone is rebuilding it already.
      FileLock lock(lock_path(info.key), std::chrono::seconds(5));
      if (!lock.locked()) {
        report.problems.back() += " (not removed: " + lock.error() + ")";
        continue;
      }
      remove_dir(entry_dir(info.key));
      ++report.removed;
    }
  }
  // Folders of installs and removals that were cut short (SIGKILL, power loss): invisible to
  // load() and list(), but they take space that eviction does not see.
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(entries_dir(), ec)) {
    std::error_code shard_ec;
    std::vector<fs::path> trash;
    std::vector<std::string> staged_keys;
    for (const auto& f : fs::directory_iterator(shard.path(), shard_ec)) {
      const std::string name = f.path().filename().string();
      if (starts_with(f.path(), ".trash-")) trash.push_back(f.path());
      if (starts_with(f.path(), ".staging-") && is_key(name.substr(9, 32))) {
        staged_keys.push_back(name.substr(9, 32));
      }
    }
    report.leftovers += static_cast<int>(trash.size() + staged_keys.size());
    if (!fix) continue;
    // A trash folder is already unlinked from its key: nobody reads it, and removing it while
    // its owner does the same is harmless.
    for (const auto& t : trash) {
      std::error_code rm_ec;
      fs::remove_all(t, rm_ec);
      report.leftovers_removed += !rm_ec;
    }
    std::sort(staged_keys.begin(), staged_keys.end());
    staged_keys.erase(std::unique(staged_keys.begin(), staged_keys.end()), staged_keys.end());
    for (const auto& key : staged_keys) {
      // A staging folder whose key's lock is held may be a live install: leave it.
      FileLock lock(lock_path(key), std::chrono::milliseconds(0));
      if (lock.locked()) report.leftovers_removed += remove_staging_leftovers(key);
    }
  }
  return report;
}

int DiskCache::clear() {
  int removed = 0;
  for (const auto& info : list()) {
    remove_dir(entry_dir(info.key));
    ++removed;
  }
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(version_dir() / "locks", ec)) {
    // Only unlocked lock files are deleted; one held by a compiling process stays.
    FileLock probe(f.path(), std::chrono::milliseconds(0));
    if (probe.locked()) fs::remove(f.path(), ec);
  }
  return removed;
}

void DiskCache::evict(const std::string& keep) {
  if (!max_bytes_) return;
  auto entries = list();
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  if (total <= *max_bytes_) return;
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
  for (const auto& e : entries) {
    if (total <= *max_bytes_) break;
    if (e.key == keep) continue;
    // Skip entries another process is compiling or rebuilding right now.
    FileLock lock(lock_path(e.key), std::chrono::milliseconds(0));
    if (!lock.locked()) continue;
    remove_dir(entry_dir(e.key));
    total -= e.bytes;
    spdlog::info("evicted cache entry {} ({} bytes) to stay under {} bytes", e.key, e.bytes,
                 *max_bytes_);
  }
}

}  // namespace fmha_jit::cache
