// Small device helpers for callers without their own GPU runtime (examples, tools, tests): device
// memory and event timing on GPU 0 of whichever vendor is present. Frameworks such as PyTorch pass
// their own pointers and streams to the runner instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fmha_jit {

// Throws Error(device_unavailable) "<what> needs a GPU, and none is usable: <why>" when no GPU is
// usable; returns otherwise.
void require_gpu(const char* what);

// Name of GPU 0 ("NVIDIA H200"); throws Error(device_unavailable) with no GPU.
std::string gpu_name();
// Multiprocessors (SMs / CUs) of GPU 0.
int gpu_multiprocessor_count();

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);  // throws Error(device_unavailable | device_error)
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  void fill(std::uint8_t byte);  // every byte; 0xFF gives NaN in fp16, bf16 and fp32

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  void* owner_ = nullptr;  // the device layer that allocated ptr_, which frees it
};

void device_synchronize(void* stream = nullptr);

// A stream of the calling thread's current GPU that does not synchronise with the default stream
// (CU_STREAM_NON_BLOCKING), destroyed with the object.
class DeviceStream {
 public:
  DeviceStream();  // throws Error(device_unavailable | device_error)
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  void* handle() const { return stream_; }
  void synchronize() const { device_synchronize(stream_); }

 private:
  void* stream_ = nullptr;
};

// Times work on a stream with device events.
class GpuTimer {
 public:
  GpuTimer();
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  void start(void* stream = nullptr);
  void stop(void* stream = nullptr);
  float elapsed_ms();  // waits for stop

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace fmha_jit
