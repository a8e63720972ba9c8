// HIP module API through dlopen("libamdhip64.so.5"). hip_runtime_api.h is used for types only.
#include <hip/hip_runtime_api.h>

#include <cstdint>
#include <string>

#include "device/device_api.hpp"
#include "device/device_properties.hpp"
#include "fmha_jit/error.hpp"
#include "support/dynamic_library.hpp"

namespace fmha_jit::device {
namespace {

#define FMHA_HIP_FUNCTIONS(X)                             \
  X(hipInit, "hipInit")                                   \
  X(hipGetErrorString, "hipGetErrorString")               \
  X(hipGetDeviceCount, "hipGetDeviceCount")               \
  X(hipSetDevice, "hipSetDevice")                         \
  X(hipGetDevice, "hipGetDevice")                         \
  X(hipGetDeviceProperties, "hipGetDeviceProperties")     \
  X(hipModuleLoadData, "hipModuleLoadData")               \
  X(hipModuleUnload, "hipModuleUnload")                   \
  X(hipModuleGetFunction, "hipModuleGetFunction")         \
  X(hipModuleLaunchKernel, "hipModuleLaunchKernel")       \
  X(hipFree, "hipFree")                                   \
  X(hipMemcpyHtoD, "hipMemcpyHtoD")                       \
  X(hipMemcpyDtoH, "hipMemcpyDtoH")                       \
  X(hipMemsetD8Async, "hipMemsetD8Async")                 \
  X(hipStreamSynchronize, "hipStreamSynchronize")         \
  X(hipStreamIsCapturing, "hipStreamIsCapturing")         \
  X(hipStreamCreateWithFlags, "hipStreamCreateWithFlags") \
  X(hipStreamDestroy, "hipStreamDestroy")                 \
  X(hipEventCreate, "hipEventCreate")                     \
  X(hipEventDestroy, "hipEventDestroy")                   \
  X(hipEventRecord, "hipEventRecord")                     \
  X(hipEventSynchronize, "hipEventSynchronize")           \
  X(hipEventElapsedTime, "hipEventElapsedTime")

class HipRuntime final : public DeviceApi {
 public:
  HipRuntime() : lib_({"libamdhip64.so.5", "libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"}) {
    if (!lib_.loaded()) {
      reason_ = "no HIP runtime (libamdhip64.so not found)";
      return;
    }
#define FMHA_BIND(member, name)               \
  if (!lib_.bind(member, name)) {             \
    reason_ = lib_.path() + " lacks " + name; \
    return;                                   \
  }
    FMHA_HIP_FUNCTIONS(FMHA_BIND)
    FMHA_BIND(hipMalloc, "hipMalloc")
#undef FMHA_BIND
    // hipGetDeviceCount answers without hipInit (which fails on a machine with no AMD GPU), so
    // the count tells a GPU-less machine from a GPU the runtime cannot initialise.
    int count = 0;
    if (hipGetDeviceCount(&count) != hipSuccess || count < 1) {
      reason_ = "the HIP runtime reports no GPU";
      return;
    }
    present_ = true;
    if (const hipError_t rc = hipInit(0); rc != hipSuccess) {
      reason_ = std::string("hipInit failed: ") + hipGetErrorString(rc);
      return;
    }
    if (!read_properties(0, &device0_)) {
      reason_ = "hipGetDeviceProperties failed";
      return;
    }
    available_ = true;
  }

  Vendor vendor() const override { return Vendor::amd; }
  bool available() const override { return available_; }
  bool present() const override { return present_; }
  const std::string& unavailable_reason() const override { return reason_; }
  std::string arch() const override { return current_properties().arch; }
  std::string name() const override { return current_properties().name; }
  int multiprocessor_count() const override { return current_properties().multiprocessors; }
  int max_dynamic_smem_per_block() const override { return current_properties().max_dynamic_smem; }
  // HIP launches go to the calling thread's current device; its ordinal (+ 1, so that it is never
  // null) names the context.
  void* current_context() override {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(current_device()) + 1);
  }

  void* load_module(std::span<const std::uint8_t> binary) override {
    require();
    hipModule_t module = nullptr;
    check(hipModuleLoadData(&module, binary.data()), "hipModuleLoadData");
    return module;
  }
  void unload_module(void* module) override {
    check(hipModuleUnload(static_cast<hipModule_t>(module)), "hipModuleUnload");
  }
  void* get_function(void* module, const std::string& symbol) override {
    hipFunction_t fn = nullptr;
    check(hipModuleGetFunction(&fn, static_cast<hipModule_t>(module), symbol.c_str()),
          ("hipModuleGetFunction(" + symbol + ")").c_str());
    return fn;
  }
  void set_max_dynamic_smem(void*, int bytes) override {
    // LDS needs no opt-in on AMD; a request beyond the per-block limit cannot be granted.
    const int limit = max_dynamic_smem_per_block();
    if (bytes > limit) {
      throw Error(ErrorCode::device_error, "kernel needs " + std::to_string(bytes) +
                                               " bytes of LDS; the GPU allows " +
                                               std::to_string(limit));
    }
  }
  void launch(void* function, Dim3 g, Dim3 b, unsigned smem, void* stream, void** args) override {
    check(hipModuleLaunchKernel(static_cast<hipFunction_t>(function), g.x, g.y, g.z, b.x, b.y, b.z,
                                smem, static_cast<hipStream_t>(stream), args, nullptr),
          "hipModuleLaunchKernel");
  }

  void* allocate(std::size_t bytes) override {
    require();
    void* ptr = nullptr;
    check(hipMalloc(&ptr, bytes), ("hipMalloc(" + std::to_string(bytes) + " bytes)").c_str());
    return ptr;
  }
  void release(void* ptr) noexcept override {
    if (ptr && available_) (void)hipFree(ptr);
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    check(hipMemcpyHtoD(dst, const_cast<void*>(src), bytes), "hipMemcpyHtoD");
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    check(hipMemcpyDtoH(dst, const_cast<void*>(src), bytes), "hipMemcpyDtoH");
  }
  void fill_bytes(void* dst, std::uint8_t value, std::size_t bytes, void* stream) override {
    check(hipMemsetD8Async(dst, value, bytes, static_cast<hipStream_t>(stream)),
          "hipMemsetD8Async");
  }
  void synchronize(void* stream) override {
    check(hipStreamSynchronize(static_cast<hipStream_t>(stream)), "hipStreamSynchronize");
  }
  bool capturing(void* stream) override {
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    check(hipStreamIsCapturing(static_cast<hipStream_t>(stream), &status), "hipStreamIsCapturing");
    return status != hipStreamCaptureStatusNone;
  }

  void* create_stream() override {
    require();
    hipStream_t stream = nullptr;
    check(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking), "hipStreamCreateWithFlags");
    return stream;
  }
  void destroy_stream(void* stream) noexcept override {
    if (stream) (void)hipStreamDestroy(static_cast<hipStream_t>(stream));
  }

  void* create_event() override {
    hipEvent_t event = nullptr;
    check(hipEventCreate(&event), "hipEventCreate");
    return event;
  }
  void destroy_event(void* event) noexcept override {
    if (event) (void)hipEventDestroy(static_cast<hipEvent_t>(event));
  }
  void record_event(void* event, void* stream) override {
    check(hipEventRecord(static_cast<hipEvent_t>(event), static_cast<hipStream_t>(stream)),
          "hipEventRecord");
  }
  float elapsed_ms(void* start, void* stop) override {
    check(hipEventSynchronize(static_cast<hipEvent_t>(stop)), "hipEventSynchronize");
    float ms = 0;
    check(hipEventElapsedTime(&ms, static_cast<hipEvent_t>(start), static_cast<hipEvent_t>(stop)),
          "hipEventElapsedTime");
    return ms;
  }

  TensorMap encode_tensor_map(const TensorMapSpec&) override {
    throw Error(ErrorCode::invalid_argument,
                "tensor maps (bulk tensor copies) exist on NVIDIA sm_90 and newer, not on HIP");
  }

 private:
  bool read_properties(int device, DeviceProperties* out) const {
    hipDeviceProp_t props{};
    if (hipGetDeviceProperties(&props, device) != hipSuccess) return false;
    // gcnArchName reads like "gfx90a:sramecc+:xnack-"; the config arch is the part before ':'.
    out->arch = props.gcnArchName;
    out->arch = out->arch.substr(0, out->arch.find(':'));
    out->name = props.name;
    out->multiprocessors = props.multiProcessorCount;
    out->max_dynamic_smem = static_cast<int>(props.sharedMemPerBlock);
    return true;
  }
  int current_device() const {
    require();
    int device = 0;
    check(hipGetDevice(&device), "hipGetDevice");
    return device;
  }
  // The properties of the calling thread's current device, read once per device.
  const DeviceProperties& current_properties() const {
    if (!available_) return device0_;
    return properties_.get(
        current_device(), [&](int d, DeviceProperties* p) { return read_properties(d, p); },
        [](int d) {
          throw Error(ErrorCode::device_error,
                      "hipGetDeviceProperties(" + std::to_string(d) + ") failed");
        });
  }

  void require() const {
    if (!available_) throw_no_device("a HIP call");
  }
  void check(hipError_t rc, const char* what) const {
    if (rc != hipSuccess) {
      const char* text = hipGetErrorString ? hipGetErrorString(rc) : nullptr;
      throw Error(ErrorCode::device_error, std::string(what) +
                                               " failed: " + (text ? text : "unknown error") +
                                               " (hipError " + std::to_string(rc) + ")");
    }
  }

  support::DynamicLibrary lib_;
#define FMHA_MEMBER(member, name) decltype(&::member) member = nullptr;
  FMHA_HIP_FUNCTIONS(FMHA_MEMBER)
#undef FMHA_MEMBER
  // hip_runtime_api.h overloads hipMalloc with a template, so its pointer type is spelled out.
  hipError_t (*hipMalloc)(void**, std::size_t) = nullptr;
  bool available_ = false;
  bool present_ = false;
  std::string reason_;
  DeviceProperties device0_;
  mutable DevicePropertiesTable properties_;
};

}  // namespace

DeviceApi& hip_runtime() {
  static HipRuntime runtime;
  return runtime;
}

}  // namespace fmha_jit::device
