#include "support/fake_device.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace fmha_jit::test {
namespace {

// The calling thread's current GPU of whichever double is active.
thread_local int current_gpu = 0;

}  // namespace

FakeDevice::FakeDevice(std::vector<Gpu> gpus) : gpus_(std::move(gpus)) {}

FakeDevice::~FakeDevice() = default;

void FakeDevice::make_current(int gpu) { current_gpu = gpu; }

const FakeDevice::Gpu& FakeDevice::current() const {
  return gpus_.at(static_cast<std::size_t>(current_gpu));
}

void* FakeDevice::current_context() {
  // One context per GPU: the address of its description.
  return const_cast<Gpu*>(&current());
}

std::vector<FakeDevice::Launch> FakeDevice::launches() const {
  std::lock_guard lock(mutex_);
  return launches_;
}

std::vector<FakeDevice::Load> FakeDevice::loads() const {
  std::lock_guard lock(mutex_);
  return loads_;
}

int FakeDevice::gpu_of_module(void* module) const {
  std::lock_guard lock(mutex_);
  for (const auto& [m, gpu] : module_gpu_) {
    if (m == module) return gpu;
  }
  return -1;
}

std::size_t FakeDevice::allocations() const {
  std::lock_guard lock(mutex_);
  return allocations_;
}

std::size_t FakeDevice::live_allocations() const {
  std::lock_guard lock(mutex_);
  return live_;
}

void* FakeDevice::load_module(std::span<const std::uint8_t>) {
  std::lock_guard lock(mutex_);
  void* module = handles_.emplace_back(std::make_unique<char>()).get();
  module_gpu_.emplace_back(module, current_gpu);
  loads_.push_back({current_gpu, module});
  return module;
}

void* FakeDevice::get_function(void* module, const std::string&) {
  std::lock_guard lock(mutex_);
  void* function = handles_.emplace_back(std::make_unique<char>()).get();
  function_module_.emplace_back(function, module);
  return function;
}

void FakeDevice::launch(void* function, device::Dim3 grid, device::Dim3 block, unsigned,
                        void* stream, void** args) {
  Launch l;
  l.gpu = current_gpu;
  l.function = function;
  l.grid = grid;
  l.block = block;
  l.stream = stream;
  if (param_bytes_ > 0 && args && args[0]) {
    const auto* bytes = static_cast<const std::uint8_t*>(args[0]);
    l.params.assign(bytes, bytes + param_bytes_);
  }
  std::lock_guard lock(mutex_);
  for (const auto& [f, m] : function_module_) {
    if (f == function) l.module = m;
  }
  launches_.push_back(std::move(l));
}

void* FakeDevice::create_stream() {
  std::lock_guard lock(mutex_);
  return handles_.emplace_back(std::make_unique<char>()).get();
}

void* FakeDevice::allocate(std::size_t bytes) {
  // 256-byte aligned, as cuMemAlloc's are.
  void* p = ::operator new (bytes, std::align_val_t{256});
  std::lock_guard lock(mutex_);
  ++allocations_;
  ++live_;
  return p;
}

void FakeDevice::release(void* ptr) noexcept {
  if (!ptr) return;
  ::operator delete (ptr, std::align_val_t{256});
  std::lock_guard lock(mutex_);
  --live_;
}

void FakeDevice::copy_to_device(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void FakeDevice::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void FakeDevice::fill_bytes(void* dst, std::uint8_t value, std::size_t bytes, void*) {
  std::memset(dst, value, bytes);
}

device::TensorMap FakeDevice::encode_tensor_map(const device::TensorMapSpec& spec) {
  device::check_tensor_map_spec(spec);
  device::TensorMap map;
  map.words[0] = reinterpret_cast<std::uintptr_t>(spec.base);
  map.words[1] = static_cast<std::uint64_t>(spec.rank) |
                 static_cast<std::uint64_t>(spec.element) << 8 |
                 static_cast<std::uint64_t>(spec.swizzle) << 16;
  for (std::size_t i = 0; i < 5; ++i) {
    map.words[2 + i] = spec.dims[i];
    map.words[7 + i] = spec.strides[i];
    map.words[12 + i / 2] |= static_cast<std::uint64_t>(spec.box[i]) << (32 * (i % 2));
  }
  return map;
}

}  // namespace fmha_jit::test
