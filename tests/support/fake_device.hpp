// A test double of the device layer: GPUs that exist only on the host. It stands in for the
// vendor API (device::override_active_device) so that tests on machines without a GPU can follow
// what the runner does with modules, contexts, scratch memory and launches: every load and launch
// is recorded, memory is host memory, and the calling thread's current GPU is chosen by the test.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "device/device_api.hpp"
#include "dispatcher/runner.hpp"

namespace fmha_jit::test {

class FakeDevice final : public device::DeviceApi {
 public:
  struct Gpu {
    std::string arch = "sm_90";
    std::string name = "fake GPU";
    int multiprocessors = 132;
  };
  struct Launch {
    int gpu = 0;
    void* module = nullptr;
    void* function = nullptr;
    device::Dim3 grid, block;
    void* stream = nullptr;
    std::vector<std::uint8_t> params;  // the first kernel argument's first param_bytes bytes
  };
  struct Load {
    int gpu = 0;
    void* module = nullptr;
  };

  explicit FakeDevice(std::vector<Gpu> gpus);
  ~FakeDevice() override;

  // The calling thread's current GPU (0 until set), as a CUDA context would be.
  void make_current(int gpu);
  // How many bytes of a launch's first argument (the kernel's parameter struct) to record.
  void record_param_bytes(std::size_t bytes) { param_bytes_ = bytes; }
  std::vector<Launch> launches() const;
  std::vector<Load> loads() const;
  // The GPU a module was loaded on, or -1.
  int gpu_of_module(void* module) const;
  // Device allocations made so far, and how many are live.
  std::size_t allocations() const;
  std::size_t live_allocations() const;

  Vendor vendor() const override { return Vendor::nvidia; }
  bool available() const override { return true; }
  bool present() const override { return true; }
  const std::string& unavailable_reason() const override { return no_reason_; }
  std::string arch() const override { return current().arch; }
  std::string name() const override { return current().name; }
  int multiprocessor_count() const override { return current().multiprocessors; }
  int max_dynamic_smem_per_block() const override { return 227 * 1024; }
  void* current_context() override;

  void* load_module(std::span<const std::uint8_t> binary) override;
  void unload_module(void*) override {}
  void* get_function(void* module, const std::string& symbol) override;
  void set_max_dynamic_smem(void*, int) override {}
  void launch(void* function, device::Dim3 grid, device::Dim3 block, unsigned smem_bytes,
              void* stream, void** args) override;

  void* allocate(std::size_t bytes) override;
  void release(void* ptr) noexcept override;
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override;
  void fill_bytes(void* dst, std::uint8_t value, std::size_t bytes, void* stream) override;
  void synchronize(void*) override {}
  bool capturing(void*) override { return capturing_; }
  // Every stream reports a graph capture in progress while set.
  void set_capturing(bool capturing) { capturing_ = capturing; }
  void* create_stream() override;
  void destroy_stream(void*) noexcept override {}

  void* create_event() override { return this; }
  void destroy_event(void*) noexcept override {}
  void record_event(void*, void*) override {}
  float elapsed_ms(void*, void*) override { return 0; }

  // A fixed function of the spec (checked as the driver would), so equal requests give equal maps.
  device::TensorMap encode_tensor_map(const device::TensorMapSpec& spec) override;

 private:
  const Gpu& current() const;

  std::vector<Gpu> gpus_;
  std::string no_reason_;
  std::size_t param_bytes_ = 0;
  mutable std::mutex mutex_;
  std::vector<Launch> launches_;
  std::vector<Load> loads_;
  // Handles are addresses inside these vectors' elements, unique for the double's life.
  std::vector<std::unique_ptr<char>> handles_;
  std::vector<std::pair<void*, int>> module_gpu_;
  std::vector<std::pair<void*, void*>> function_module_;
  std::size_t allocations_ = 0, live_ = 0;
  std::atomic<bool> capturing_{false};
};

// Routes the process's device layer to `fake` for the scope's life. Runners made meanwhile hold
// the double's memory and modules, so the scope's end drops the process's runner memo too.
class ScopedDeviceOverride {
 public:
  explicit ScopedDeviceOverride(device::DeviceApi& fake) { device::override_active_device(&fake); }
  ~ScopedDeviceOverride() {
    dispatch::clear_runner_memo();
    device::override_active_device(nullptr);
  }
  ScopedDeviceOverride(const ScopedDeviceOverride&) = delete;
  ScopedDeviceOverride& operator=(const ScopedDeviceOverride&) = delete;
};

}  // namespace fmha_jit::test
