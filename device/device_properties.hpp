// What the device layer reads of each GPU once (arch, name, SM count, shared-memory limit), and
// the table of it each vendor API keeps: a process may drive several GPUs, one per thread or in
// turn, and a call asks for the properties of the GPU it runs on.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace fmha_jit::device {

struct DeviceProperties {
  std::string arch, name;  // sm_90, gfx90a; the driver's name
  int multiprocessors = 0;
  int max_dynamic_smem = 0;
};

class DevicePropertiesTable {
 public:
  // The entry of `device`, filled by read(device, &entry) on first use; where that returns false,
  // failed(device) throws and nothing is kept. Entries are never erased, so the reference stays
  // valid for the table's life.
  template <class Read, class Failed>
  const DeviceProperties& get(int device, Read&& read, Failed&& failed) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(device);
    if (it == entries_.end()) {
      DeviceProperties p;
      if (!read(device, &p)) failed(device);
      it = entries_.emplace(device, std::move(p)).first;
    }
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<int, DeviceProperties> entries_;
};

}  // namespace fmha_jit::device
