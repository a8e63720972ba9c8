// File primitives of the disk cache: whole-file reads, durable writes, per-key advisory locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace fmha_jit::cache {

// nullopt when the file cannot be opened or read completely.
std::optional<std::vector<std::uint8_t>> read_file(const std::filesystem::path& path);

// Writes `data` to `path` and fsyncs it. Throws Error(io_error) with errno's text on failure (a
// full disk, RLIMIT_FSIZE, a read-only folder), leaving no partial file behind.
void write_file_durably(const std::filesystem::path& path, std::span<const std::uint8_t> data);

// Writes to a uniquely named temporary file in the same folder, fsyncs it, renames it over `path`
// and fsyncs the folder: readers see the old file or the new one, never a torn one.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> data);

// fsync of a directory, so that a rename inside it survives a crash.
void sync_directory(const std::filesystem::path& dir);

// A name no other process or thread will pick: <prefix><pid>-<thread>-<counter>-<random>.
std::string unique_name(std::string_view prefix);

// An exclusive flock(2) on a lock file. The kernel drops the lock when its holder dies, so a
// killed compiler never leaves a lock that blocks the next process.
class FileLock {
 public:
  // Waits up to `timeout`; `locked()` is false if the lock could not be taken in time (a hung
  // holder) or the lock file could not be created (read-only cache).
  FileLock(const std::filesystem::path& path, std::chrono::milliseconds timeout);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool locked() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  // The filesystem refuses flock itself (ENOLCK: NFSv3 without a lock daemon; ENOSYS, EOPNOTSUPP:
  // some FUSE and network filesystems), as opposed to a lock that is held or a file that cannot be
  // created: waiting would not help.
  bool unsupported() const { return unsupported_; }

 private:
  int fd_ = -1;
  bool unsupported_ = false;
  std::string error_;
};

}  // namespace fmha_jit::cache
