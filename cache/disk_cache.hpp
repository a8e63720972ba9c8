// The on-disk kernel cache: one folder per key holding the binary, the rendered source and
// manifest.json. Reads take no lock and verify the checksum; a miss is compiled under a per-key
// flock (check again after locking) and installed by an atomic rename.
//
//   <root>/v1/entries/<key[0:2]>/<key>/{manifest.json, kernel.cubin|kernel.hsaco, source.cu}
//   <root>/v1/locks/<key>.lock
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cache/manifest.hpp"

namespace fmha_jit::cache {

struct EntryFiles {
  Manifest manifest;
  std::vector<std::uint8_t> binary;
  std::string source;  // empty when loaded (not read on the hot path)
};

// What a loaded entry must match besides its own checksum.
struct Expectation {
  std::string arch;
  std::string compiler_id;
  std::string compiler_version;
};

struct LoadResult {
  std::optional<EntryFiles> entry;
  std::string rejected;  // non-empty when an entry existed but failed verification: why
};

struct EntryInfo {
  std::string key;
  std::uint64_t bytes = 0;  // all files of the entry
  std::filesystem::file_time_type last_used;
  std::optional<Manifest> manifest;  // nullopt when unreadable
};

class DiskCache {
 public:
  explicit DiskCache(std::filesystem::path root,
                     std::optional<std::uint64_t> max_bytes = std::nullopt);

  const std::filesystem::path& root() const { return root_; }
  // <root>/v<format version>: entries of other format versions are never read.
  std::filesystem::path version_dir() const;
  std::filesystem::path entry_dir(const std::string& key) const;
  // False when the folder cannot be created or written (read-only, a file in the way, ...).
  bool writable() const { return writable_; }
  const std::string& unwritable_reason() const { return unwritable_reason_; }

  // Lock-free read. Verifies format, key, expectation, size and checksum; with `touch`, marks the
  // entry used (the manifest's mtime is the LRU clock): inspection (verify, export) does not.
  // A rejected entry is left in place: get_or_build() removes it under the key's lock.
  LoadResult load(const std::string& key, const Expectation& expect, bool touch = true) const;

  struct Obtained {
    EntryFiles entry;
    bool compiled = false;  // false: loaded from disk
    bool stored = false;    // the compiled entry was written to disk
  };
  // load(); on a miss take the key's lock, load again, else produce(), store and evict. On an
  // unwritable cache, or when the lock cannot be had in time, compiles without storing (one warning
  // per process and root). On a filesystem without flock (ENOLCK), compiles and stores unlocked.
  Obtained get_or_build(const std::string& key, const Expectation& expect,
                        const std::function<EntryFiles()>& produce);

  // Atomically installs an entry (staging folder + rename). An existing valid entry wins.
  void store(const EntryFiles& entry);
  // store() under the key's lock, unless a valid entry is already there (import). Returns false
  // when the entry was already present.
  bool install(const EntryFiles& entry);
  void remove(const std::string& key);

  std::vector<EntryInfo> list() const;
  struct VerifyReport {
    int ok = 0;
    int bad = 0;
    int removed = 0;
    std::vector<std::string> problems;  // "<key>: <why>"
    // Folders of installs or removals cut short by a killed process (.staging-*, .trash-*); with
    // fix, those no live process is using are deleted.
    int leftovers = 0;
    int leftovers_removed = 0;
  };
  VerifyReport verify(bool fix);
  // Removes every entry and lock; returns the number of entries removed.
  int clear();
  // Evicts least-recently-used entries until the total is under the cap (if any); skips `keep`.
  void evict(const std::string& keep);

  // How long a process waits for another's compile of the same key before compiling itself:
  // FMHA_JIT_LOCK_TIMEOUT_MS, else 10 minutes. Throws FieldError naming the variable for a value
  // that is not a millisecond count.
  static std::chrono::milliseconds lock_timeout();

 private:
  std::filesystem::path entries_dir() const { return version_dir() / "entries"; }
  std::filesystem::path lock_path(const std::string& key) const;
  void warn_unwritable_once() const;
  void warn_no_locks_once(const std::string& why) const;
  // produce(), then store() it; a failed store (disk full, ...) warns and keeps it in memory.
  Obtained produce_and_store(const std::string& key, const std::function<EntryFiles()>& produce);
  // Deletes the staging folders of `key` (the caller holds its lock); returns how many.
  int remove_staging_leftovers(const std::string& key);

  std::filesystem::path root_;
  std::optional<std::uint64_t> max_bytes_;
  bool writable_ = false;
  std::string unwritable_reason_;
};

}  // namespace fmha_jit::cache
