// HIP module API through dlopen("libamdhip64.so.5"). hip_runtime_api.h is used for types only.
#include <hip/hip_runtime_api.h>

#include <string>

#include "dispatcher/device/device_api.hpp"
#include "dispatcher/device/dynamic_library.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::device {
namespace {

#define FMHA_HIP_FUNCTIONS(X)                         \
  X(hipInit, "hipInit")                               \
  X(hipGetErrorString, "hipGetErrorString")           \
  X(hipGetDeviceCount, "hipGetDeviceCount")           \
  X(hipSetDevice, "hipSetDevice")                     \
  X(hipGetDeviceProperties, "hipGetDeviceProperties") \
  X(hipModuleLoadData, "hipModuleLoadData")           \
  X(hipModuleUnload, "hipModuleUnload")               \
  X(hipModuleGetFunction, "hipModuleGetFunction")     \
  X(hipModuleLaunchKernel, "hipModuleLaunchKernel")   \
  X(hipFree, "hipFree")                               \
  X(hipMemcpyHtoD, "hipMemcpyHtoD")                   \
  X(hipMemcpyDtoH, "hipMemcpyDtoH")                   \
  X(hipMemsetD8Async, "hipMemsetD8Async")             \
  X(hipStreamSynchronize, "hipStreamSynchronize")     \
  X(hipEventCreate, "hipEventCreate")                 \
  X(hipEventDestroy, "hipEventDestroy")               \
  X(hipEventRecord, "hipEventRecord")                 \
  X(hipEventSynchronize, "hipEventSynchronize")       \
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
    hipDeviceProp_t props{};
    if (hipGetDeviceProperties(&props, 0) != hipSuccess) {
      reason_ = "hipGetDeviceProperties failed";
      return;
    }
    // gcnArchName reads like "gfx90a:sramecc+:xnack-"; the config arch is the part before ':'.
    arch_ = props.gcnArchName;
    arch_ = arch_.substr(0, arch_.find(':'));
    name_ = props.name;
    sm_count_ = props.multiProcessorCount;
    max_smem_ = static_cast<int>(props.sharedMemPerBlock);
    available_ = true;
  }

  Vendor vendor() const override { return Vendor::amd; }
  bool available() const override { return available_; }
  bool present() const override { return present_; }
  const std::string& unavailable_reason() const override { return reason_; }
  std::string arch() const override { return arch_; }
  std::string name() const override { return name_; }
  int multiprocessor_count() const override { return sm_count_; }
  int max_dynamic_smem_per_block() const override { return max_smem_; }

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
    if (bytes > max_smem_) {
      throw Error(ErrorCode::device_error, "kernel needs " + std::to_string(bytes) +
                                               " bytes of LDS; the GPU allows " +
                                               std::to_string(max_smem_));
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

  DynamicLibrary lib_;
#define FMHA_MEMBER(member, name) decltype(&::member) member = nullptr;
  FMHA_HIP_FUNCTIONS(FMHA_MEMBER)
#undef FMHA_MEMBER
  // hip_runtime_api.h overloads hipMalloc with a template, so its pointer type is spelled out.
  hipError_t (*hipMalloc)(void**, std::size_t) = nullptr;
  bool available_ = false;
  bool present_ = false;
  std::string reason_;
  std::string arch_, name_;
  int sm_count_ = 0;
  int max_smem_ = 0;
};

}  // namespace

DeviceApi& hip_runtime() {
  static HipRuntime runtime;
  return runtime;
}

}  // namespace fmha_jit::device
