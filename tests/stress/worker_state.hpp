// The state a stress worker shares with the test that started it, through a file both map: what
// the worker is doing right now, so that the killer can aim SIGKILL at compiling processes and
// count where each kill landed. Plain ints accessed through std::atomic_ref.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace fmha_jit::test {

struct WorkerSlot {
  int compiling = 0;  // RTC compiles in flight
  int storing = 0;    // compiles finished whose setup call has not returned (store, evict)
  int calls = 0;      // setup calls returned
  int padding = 0;
};

// Maps `count` slots of `path` (created and zero-filled when `create`) and returns slot 0.
inline WorkerSlot* map_worker_slots(const std::filesystem::path& path, int count, bool create) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0644);
  if (fd < 0) throw std::runtime_error("open " + path.string() + ": " + std::strerror(errno));
  const std::size_t bytes = sizeof(WorkerSlot) * static_cast<std::size_t>(count);
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    throw std::runtime_error("ftruncate " + path.string() + ": " + std::strerror(errno));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    throw std::runtime_error("mmap " + path.string() + ": " + std::strerror(errno));
  return static_cast<WorkerSlot*>(p);
}

// The worker's side: its own slot of an existing file.
inline WorkerSlot* map_worker_slot(const std::filesystem::path& path, int slot) {
  return map_worker_slots(path, slot + 1, false) + slot;
}

}  // namespace fmha_jit::test
