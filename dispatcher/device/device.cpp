#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "dispatcher/device/device_api.hpp"
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
}  // namespace

void override_active_device(DeviceApi* api) { device_override.store(api); }

DeviceApi* active_device() {
  if (DeviceApi* api = device_override.load()) return api;
  // FMHA_JIT_DEVICE=none hides every GPU (tests of the GPU-less paths on a GPU machine);
  // =cuda / =hip restricts the search to one vendor.
  static DeviceApi* const active = []() -> DeviceApi* {
    const char* pick = std::getenv("FMHA_JIT_DEVICE");
    const std::string choice = pick ? pick : "";
    if (choice == "none") return nullptr;
    if (choice != "hip" && cuda_driver().available()) return &cuda_driver();
    if (choice != "cuda" && hip_runtime().available()) return &hip_runtime();
    return nullptr;
  }();
  return active;
}

void throw_no_device(const char* what) {
  std::string reason = cuda_driver().unavailable_reason();
  if (std::getenv("FMHA_JIT_DEVICE") && std::string(std::getenv("FMHA_JIT_DEVICE")) == "none") {
    reason = "FMHA_JIT_DEVICE=none";
  }
  throw Error(ErrorCode::device_unavailable, std::string(what) +
                                                 " needs a GPU, and none is usable: " +
                                                 (reason.empty() ? "no GPU found" : reason));
}

DeviceApi& require_device(const char* what) {
  DeviceApi* api = active_device();
  if (!api) throw_no_device(what);
  return *api;
}

}  // namespace device

std::string detect_gpu_arch() {
  static const std::string arch = [] {
    if (auto* api = device::active_device()) return api->arch();
    if (const char* env = std::getenv("FMHA_JIT_ARCH"); env && *env) return std::string(env);
    return std::string("sm_90");
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
  if (bytes > 0) ptr_ = device::require_device("DeviceBuffer").allocate(bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) device::active_device()->release(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) device::active_device()->release(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
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
