#include "cache/file_io.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "fmha_jit/error.hpp"

namespace fmha_jit::cache {
namespace fs = std::filesystem;

std::optional<std::vector<std::uint8_t>> read_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::vector<std::uint8_t> data;
  std::uint8_t buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    data.insert(data.end(), buffer, buffer + n);
  }
  ::close(fd);
  return data;
}

void write_file_durably(const fs::path& path, std::span<const std::uint8_t> data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(ErrorCode::io_error,
                "cannot create " + path.string() + ": " + std::strerror(errno));
  }
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    std::error_code ec;
    fs::remove(path, ec);
    throw Error(ErrorCode::io_error,
                std::string(what) + " " + path.string() + " failed: " + std::strerror(err));
  };
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write of");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync of");
  if (::close(fd) != 0) {
    std::error_code ec;
    fs::remove(path, ec);
    throw Error(ErrorCode::io_error, "close of " + path.string() + " failed");
  }
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems refuse to open directories
  ::fsync(fd);
  ::close(fd);
}

std::string unique_name(std::string_view prefix) {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::string(prefix) + std::to_string(::getpid()) + "-" +
         std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000) + "-" +
         std::to_string(counter++) + "-" + std::to_string(rng() % 1000000);
}

void write_file_atomically(const fs::path& path, std::span<const std::uint8_t> data) {
  const fs::path temp = path.parent_path() / unique_name("." + path.filename().string() + ".tmp-");
  write_file_durably(temp, data);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::error_code ec;
    fs::remove(temp, ec);
    throw Error(ErrorCode::io_error,
                "rename to " + path.string() + " failed: " + std::strerror(err));
  }
  sync_directory(path.parent_path());
}

FileLock::FileLock(const fs::path& path, std::chrono::milliseconds timeout) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    error_ = "cannot open lock " + path.string() + ": " + std::strerror(errno);
    return;
  }
  // Poll with LOCK_NB instead of blocking so that a holder that hangs (stopped, or a lock stuck on
  // a network filesystem) costs a bounded wait, after which the caller compiles without the lock.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      fd_ = fd;
      return;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      unsupported_ = errno == ENOLCK || errno == ENOSYS || errno == EOPNOTSUPP;
      error_ = "flock " + path.string() + ": " + std::strerror(errno);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      error_ = "timed out waiting for " + path.string();
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  ::close(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace fmha_jit::cache
