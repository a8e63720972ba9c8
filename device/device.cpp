#include <atomic>
#include <optional>
#include <string>
#include <utility>

#include "device/device_api.hpp"
#include "device/device_env.hpp"
#include "fmha_jit/device.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit {
namespace device {

DeviceApi& device_for(Vendor vendor) {
  return vendor == Vendor::nvidia ? cuda_driver() : hip_runtime();
}

namespace {

std::atomic<DeviceApi*> device_override{nullptr};

struct DeviceSelection {
  DeviceApi* api = nullptr;  // null: no usable GPU, or hidden
  bool hidden = false;       // FMHA_JIT_DEVICE=none
};

// The GPU this process uses, chosen once. FMHA_JIT_DEVICE=none hides every GPU (tests of the
// GPU-less paths on a GPU machine); =cuda / =hip restricts the search to one vendor. A value not
// accepted throws its FieldError here, and nothing is cached: every caller that needs or seeks a
// GPU reports it, and gpu_available(), which must not throw, says false.
const DeviceSelection& selection() {
  static const DeviceSelection chosen = [] {
    const auto choice = device_from_env();
    DeviceSelection s;
    s.hidden = choice == "none";
    if (s.hidden) return s;
    if (choice != "hip" && cuda_driver().available()) {
      s.api = &cuda_driver();
    } else if (choice != "cuda" && hip_runtime().available()) {
      s.api = &hip_runtime();
    }
    return s;
  }();
  return chosen;
}

}  // namespace

void override_active_device(DeviceApi* api) { device_override.store(api); }

DeviceApi* active_device() {
  if (DeviceApi* api = device_override.load()) return api;
  try {
    return selection().api;
  } catch (const Error&) {  // FMHA_JIT_DEVICE holds a value not accepted
    return nullptr;
  }
}

void throw_no_device(const char* what) {
  const DeviceSelection& s = selection();  // throws for a FMHA_JIT_DEVICE not accepted
  const std::string reason = s.hidden ? "FMHA_JIT_DEVICE=none" : cuda_driver().unavailable_reason();
  throw Error(ErrorCode::device_unavailable, std::string(what) +
                                                 " needs a GPU, and none is usable: " +
                                                 (reason.empty() ? "no GPU found" : reason));
}

DeviceApi& require_device(const char* what) {
  if (DeviceApi* api = device_override.load()) return *api;
  DeviceApi* api = selection().api;
  if (!api) throw_no_device(what);
  return *api;
}

}  // namespace device

std::string detect_gpu_arch() {
  // A value of either variable that is not accepted throws (and nothing is cached); FMHA_JIT_ARCH
  // is checked even where a GPU answers, so that it never passes unnoticed.
  static const std::string arch = [] {
    const auto from_env = device::arch_from_env();
    if (auto* api = device::selection().api) return api->arch();
    return from_env.value_or("sm_90");
  }();
  return arch;
}

bool gpu_available() { return device::active_device() != nullptr; }

void require_gpu(const char* what) { device::require_device(what); }

std::string gpu_name() { return device::require_device("gpu_name()").name(); }
int gpu_multiprocessor_count() {
  return device::require_device("gpu_multiprocessor_count()").multiprocessor_count();
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  // Drivers reject zero-byte allocations; an empty buffer holds no pointer.
  if (bytes > 0) {
    device::DeviceApi& api = device::require_device("DeviceBuffer");
    ptr_ = api.allocate(bytes);
    owner_ = &api;
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) static_cast<device::DeviceApi*>(owner_)->release(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      owner_(std::exchange(other.owner_, nullptr)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) static_cast<device::DeviceApi*>(owner_)->release(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    owner_ = std::exchange(other.owner_, nullptr);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_) throw Error(ErrorCode::invalid_argument, "upload larger than the buffer");
  device::require_device("DeviceBuffer::upload").copy_to_device(ptr_, host, bytes);
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) throw Error(ErrorCode::invalid_argument, "download larger than the buffer");
  device::require_device("DeviceBuffer::download").copy_to_host(host, ptr_, bytes);
}

void DeviceBuffer::fill(std::uint8_t byte) {
  auto& api = device::require_device("DeviceBuffer::fill");
  api.fill_bytes(ptr_, byte, bytes_, nullptr);
  api.synchronize(nullptr);
}

void device_synchronize(void* stream) {
  device::require_device("device_synchronize").synchronize(stream);
}

DeviceStream::DeviceStream() : stream_(device::require_device("DeviceStream").create_stream()) {}

DeviceStream::~DeviceStream() {
  if (auto* api = device::active_device()) api->destroy_stream(stream_);
}

GpuTimer::GpuTimer() {
  auto& api = device::require_device("GpuTimer");
  start_ = api.create_event();
  stop_ = api.create_event();
}

GpuTimer::~GpuTimer() {
  if (auto* api = device::active_device()) {
    api->destroy_event(start_);
    api->destroy_event(stop_);
  }
}

void GpuTimer::start(void* stream) { device::active_device()->record_event(start_, stream); }
void GpuTimer::stop(void* stream) { device::active_device()->record_event(stop_, stream); }
float GpuTimer::elapsed_ms() { return device::active_device()->elapsed_ms(start_, stop_); }

}  // namespace fmha_jit
