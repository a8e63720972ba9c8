// The device layer: one interface over the CUDA driver API and the HIP module API, both reached
// through dlopen so that nothing links against libcuda or libamdhip64. Every call's status is
// checked and turned into an fmha_jit::Error naming the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "device/tensor_map.hpp"
#include "fmha_jit/config.hpp"

namespace fmha_jit::device {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;
  virtual Vendor vendor() const = 0;
  // Driver loaded and at least one device present. Never throws.
  virtual bool available() const = 0;
  // A GPU of this vendor is there, usable or not: the driver reports a device, or failed to start
  // with an error other than "no device". present() && !available() is a GPU whose driver failed
  // to initialise it (unavailable_reason() says how): a fault to report, not a GPU-less machine.
  virtual bool present() const = 0;
  virtual const std::string& unavailable_reason() const = 0;

  // Properties of the device of the calling thread's current context (CUDA: the current
  // CUcontext, GPU 0's primary context where none is current; HIP: the current device), read
  // once per device.
  virtual std::string arch() const = 0;  // sm_90, gfx90a
  virtual std::string name() const = 0;
  virtual int multiprocessor_count() const = 0;
  virtual int max_dynamic_smem_per_block() const = 0;
  // The context the calling thread's loads, allocations and launches go to, as an opaque
  // non-null handle. A module, or device memory a kernel reads, belongs to one context: a process
  // that drives several GPUs keeps them per context.
  virtual void* current_context() = 0;

  // Modules and launches. Handles are the vendor's (CUmodule, CUfunction, ...).
  virtual void* load_module(std::span<const std::uint8_t> binary) = 0;
  virtual void unload_module(void* module) = 0;
  virtual void* get_function(void* module, const std::string& symbol) = 0;
  // Raises the function's dynamic shared memory limit (needed above 48 KB on NVIDIA).
  virtual void set_max_dynamic_smem(void* function, int bytes) = 0;
  virtual void launch(void* function, Dim3 grid, Dim3 block, unsigned smem_bytes, void* stream,
                      void** args) = 0;

  // Memory, for tests, tools and workspaces.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* ptr) noexcept = 0;
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill_bytes(void* dst, std::uint8_t value, std::size_t bytes, void* stream) = 0;
  virtual void synchronize(void* stream) = 0;
  // True while `stream` is being captured into a graph (CUDA graphs, hipGraph): a call then must
  // not allocate, copy synchronously or synchronise, which would end the capture with an error.
  virtual bool capturing(void* stream) = 0;
  // A stream of the current context that does not synchronise with the default stream.
  virtual void* create_stream() = 0;
  virtual void destroy_stream(void* stream) noexcept = 0;

  // Events for timing kernels.
  virtual void* create_event() = 0;
  virtual void destroy_event(void* event) noexcept = 0;
  virtual void record_event(void* event, void* stream) = 0;
  virtual float elapsed_ms(void* start, void* stop) = 0;  // synchronises on stop

  // The driver's encoding of a tensor map for the sm_90 bulk tensor copies, after
  // check_tensor_map_spec(). NVIDIA only: the HIP API throws Error(invalid_argument).
  virtual TensorMap encode_tensor_map(const TensorMapSpec& spec) = 0;
};

DeviceApi& cuda_driver();
DeviceApi& hip_runtime();

// The vendor API whose GPU this process can use (CUDA preferred), or nullptr with no GPU (also
// when FMHA_JIT_DEVICE is none or a value not accepted: require_device() then says which).
DeviceApi* active_device();
// Routes every later active_device() call of the process to `api` (a test double standing in for
// a GPU on machines without one); nullptr restores the vendor API. Tests only.
void override_active_device(DeviceApi* api);
// The API for an arch's vendor (available() may be false).
DeviceApi& device_for(Vendor vendor);

// Throws Error(device_unavailable) naming why no GPU is usable, or the FieldError of a
// FMHA_JIT_DEVICE value not accepted.
[[noreturn]] void throw_no_device(const char* what);
// The active device, or the error of throw_no_device() naming `what` needed it.
DeviceApi& require_device(const char* what);

}  // namespace fmha_jit::device
