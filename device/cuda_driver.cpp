// CUDA driver API through dlopen("libcuda.so.1"). cuda.h is used for types only; entry points are
// resolved by name (the _v2 names that cuda.h maps the plain ones to).
#include <cuda.h>

#include <cstring>
#include <mutex>
#include <string>

#include "device/device_api.hpp"
#include "device/device_properties.hpp"
#include "fmha_jit/error.hpp"
#include "support/dynamic_library.hpp"

namespace fmha_jit::device {
namespace {

#define FMHA_CU_FUNCTIONS(X)                              \
  X(cuInit, "cuInit")                                     \
  X(cuGetErrorString, "cuGetErrorString")                 \
  X(cuDeviceGetCount, "cuDeviceGetCount")                 \
  X(cuDeviceGet, "cuDeviceGet")                           \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute")         \
  X(cuDeviceGetName, "cuDeviceGetName")                   \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") \
  X(cuCtxGetCurrent, "cuCtxGetCurrent")                   \
  X(cuCtxSetCurrent, "cuCtxSetCurrent")                   \
  X(cuCtxGetDevice, "cuCtxGetDevice")                     \
  X(cuModuleLoadData, "cuModuleLoadData")                 \
  X(cuModuleUnload, "cuModuleUnload")                     \
  X(cuModuleGetFunction, "cuModuleGetFunction")           \
  X(cuFuncSetAttribute, "cuFuncSetAttribute")             \
  X(cuLaunchKernel, "cuLaunchKernel")                     \
  X(cuMemAlloc, "cuMemAlloc_v2")                          \
  X(cuMemFree, "cuMemFree_v2")                            \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2")                      \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2")                      \
  X(cuMemsetD8Async, "cuMemsetD8Async")                   \
  X(cuStreamSynchronize, "cuStreamSynchronize")           \
  X(cuStreamIsCapturing, "cuStreamIsCapturing")           \
  X(cuStreamCreate, "cuStreamCreate")                     \
  X(cuStreamDestroy, "cuStreamDestroy_v2")                \
  X(cuEventCreate, "cuEventCreate")                       \
  X(cuEventDestroy, "cuEventDestroy_v2")                  \
  X(cuEventRecord, "cuEventRecord")                       \
  X(cuEventSynchronize, "cuEventSynchronize")             \
  X(cuEventElapsedTime, "cuEventElapsedTime_v2")

class CudaDriver final : public DeviceApi {
 public:
  CudaDriver() : lib_({"libcuda.so.1", "libcuda.so"}) {
    if (!lib_.loaded()) {
      reason_ = "no NVIDIA driver (libcuda.so.1 not found)";
      return;
    }
#define FMHA_BIND(member, name)                                                \
  if (!lib_.bind(member, name)) {                                              \
    reason_ = std::string("libcuda.so.1 lacks ") + name + " (driver too old)"; \
    return;                                                                    \
  }
    FMHA_CU_FUNCTIONS(FMHA_BIND)
#undef FMHA_BIND
    // Optional: only the sm_90a kernels need it, and drivers before CUDA 12.0 lack it.
    lib_.bind(cuTensorMapEncodeTiled_, "cuTensorMapEncodeTiled");
    // The driver counts devices only after cuInit; of its failures, "no device" and the
    // toolkit's stub library mean a machine without an NVIDIA GPU, any other a GPU it could
    // not bring up.
    if (CUresult rc = cuInit(0); rc != CUDA_SUCCESS) {
      present_ = rc != CUDA_ERROR_NO_DEVICE && rc != CUDA_ERROR_STUB_LIBRARY;
      reason_ = "cuInit failed: " + describe(rc);
      return;
    }
    int count = 0;
    if (CUresult rc = cuDeviceGetCount(&count); rc != CUDA_SUCCESS) {
      present_ = true;  // initialised, yet cannot count its devices
      reason_ = "cuDeviceGetCount failed: " + describe(rc);
      return;
    }
    if (count < 1) {
      reason_ = "the NVIDIA driver reports no GPU";
      return;
    }
    present_ = true;
    if (cuDeviceGet(&device_, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&context_, device_) != CUDA_SUCCESS) {
      reason_ = "cannot retain the primary context of GPU 0";
      return;
    }
    if (!read_properties(device_, &device0_)) {
      reason_ = "cannot read the properties of GPU 0";
      return;
    }
    available_ = true;
  }

  Vendor vendor() const override { return Vendor::nvidia; }
  bool available() const override { return available_; }
  bool present() const override { return present_; }
  const std::string& unavailable_reason() const override { return reason_; }
  std::string arch() const override { return current_properties().arch; }
  std::string name() const override { return current_properties().name; }
  int multiprocessor_count() const override { return current_properties().multiprocessors; }
  int max_dynamic_smem_per_block() const override { return current_properties().max_dynamic_smem; }
  void* current_context() override {
    bind_context();
    CUcontext current = nullptr;
    check(cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    return current;
  }

  void* load_module(std::span<const std::uint8_t> binary) override {
    bind_context();
    CUmodule module = nullptr;
    check(cuModuleLoadData(&module, binary.data()), "cuModuleLoadData");
    return module;
  }
  void unload_module(void* module) override {
    bind_context();
    check(cuModuleUnload(static_cast<CUmodule>(module)), "cuModuleUnload");
  }
  void* get_function(void* module, const std::string& symbol) override {
    CUfunction fn = nullptr;
    check(cuModuleGetFunction(&fn, static_cast<CUmodule>(module), symbol.c_str()),
          ("cuModuleGetFunction(" + symbol + ")").c_str());
    return fn;
  }
  void set_max_dynamic_smem(void* function, int bytes) override {
    check(cuFuncSetAttribute(static_cast<CUfunction>(function),
                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  }
  void launch(void* function, Dim3 g, Dim3 b, unsigned smem, void* stream, void** args) override {
    bind_context();
    check(cuLaunchKernel(static_cast<CUfunction>(function), g.x, g.y, g.z, b.x, b.y, b.z, smem,
                         static_cast<CUstream>(stream), args, nullptr),
          "cuLaunchKernel");
  }

  void* allocate(std::size_t bytes) override {
    bind_context();
    CUdeviceptr ptr = 0;
    check(cuMemAlloc(&ptr, bytes), ("cuMemAlloc(" + std::to_string(bytes) + " bytes)").c_str());
    return reinterpret_cast<void*>(ptr);
  }
  void release(void* ptr) noexcept override {
    if (ptr && available_) cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    bind_context();
    check(cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    bind_context();
    check(cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
  }
  void fill_bytes(void* dst, std::uint8_t value, std::size_t bytes, void* stream) override {
    bind_context();
    check(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), value, bytes,
                          static_cast<CUstream>(stream)),
          "cuMemsetD8Async");
  }
  void synchronize(void* stream) override {
    bind_context();
    check(cuStreamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
  }
  bool capturing(void* stream) override {
    bind_context();
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    check(cuStreamIsCapturing(static_cast<CUstream>(stream), &status), "cuStreamIsCapturing");
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
  }

  void* create_stream() override {
    bind_context();
    CUstream stream = nullptr;
    check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return stream;
  }
  void destroy_stream(void* stream) noexcept override {
    if (stream) cuStreamDestroy(static_cast<CUstream>(stream));
  }

  void* create_event() override {
    bind_context();
    CUevent event = nullptr;
    check(cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate");
    return event;
  }
  void destroy_event(void* event) noexcept override {
    if (event) cuEventDestroy(static_cast<CUevent>(event));
  }
  void record_event(void* event, void* stream) override {
    check(cuEventRecord(static_cast<CUevent>(event), static_cast<CUstream>(stream)),
          "cuEventRecord");
  }
  float elapsed_ms(void* start, void* stop) override {
    check(cuEventSynchronize(static_cast<CUevent>(stop)), "cuEventSynchronize");
    float ms = 0;
    check(cuEventElapsedTime(&ms, static_cast<CUevent>(start), static_cast<CUevent>(stop)),
          "cuEventElapsedTime");
    return ms;
  }

  TensorMap encode_tensor_map(const TensorMapSpec& spec) override {
    static_assert(
        sizeof(TensorMap) == sizeof(CUtensorMap) && alignof(TensorMap) == alignof(CUtensorMap),
        "TensorMap mirrors CUtensorMap");
    check_tensor_map_spec(spec);
    if (cuTensorMapEncodeTiled_ == nullptr) {
      throw Error(ErrorCode::device_unavailable,
                  lib_.loaded() ? "libcuda.so.1 lacks cuTensorMapEncodeTiled (a driver for CUDA "
                                  "12.0 or newer is needed)"
                                : reason_);
    }
    cuuint64_t dims[5] = {}, strides[4] = {};
    cuuint32_t box[5] = {}, element_strides[5] = {};
    for (int i = 0; i < spec.rank; ++i) {
      dims[i] = spec.dims[i];
      box[i] = spec.box[i];
      element_strides[i] = 1;
      if (i > 0) strides[i - 1] = spec.strides[i];
    }
    const CUtensorMapDataType type =
        spec.element == TensorMapElement::fp16   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
        : spec.element == TensorMapElement::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    const CUtensorMapSwizzle swizzle =
        spec.swizzle == TensorMapSwizzle::bytes128  ? CU_TENSOR_MAP_SWIZZLE_128B
        : spec.swizzle == TensorMapSwizzle::bytes64 ? CU_TENSOR_MAP_SWIZZLE_64B
        : spec.swizzle == TensorMapSwizzle::bytes32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                    : CU_TENSOR_MAP_SWIZZLE_NONE;
    // Out-of-range elements of a box read as zeros (OOB fill NONE), which is how partial tiles
    // are padded.
    CUtensorMap map;
    check(cuTensorMapEncodeTiled_(
              &map, type, static_cast<cuuint32_t>(spec.rank), const_cast<void*>(spec.base), dims,
              strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
          "cuTensorMapEncodeTiled");
    TensorMap out;
    std::memcpy(out.words.data(), map.opaque, sizeof map.opaque);
    return out;
  }

 private:
  std::string describe(CUresult rc) const {
    const char* text = nullptr;
    if (cuGetErrorString) cuGetErrorString(rc, &text);
    return std::string(text ? text : "unknown error") + " (CUresult " + std::to_string(rc) + ")";
  }
  void check(CUresult rc, const char* what) const {
    if (rc != CUDA_SUCCESS) {
      throw Error(ErrorCode::device_error, std::string(what) + " failed: " + describe(rc));
    }
  }
  bool read_properties(CUdevice device, DeviceProperties* out) const {
    int major = 0, minor = 0;
    char name[256] = {};
    if (cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) !=
            CUDA_SUCCESS ||
        cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) !=
            CUDA_SUCCESS ||
        cuDeviceGetAttribute(&out->multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                             device) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&out->max_dynamic_smem,
                             CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                             device) != CUDA_SUCCESS ||
        cuDeviceGetName(name, sizeof name, device) != CUDA_SUCCESS) {
      return false;
    }
    out->arch = "sm_" + std::to_string(major) + std::to_string(minor);
    out->name = name;
    return true;
  }
  // The properties of the device of the calling thread's current context (GPU 0 where none is
  // current), read once per device: a process may drive several GPUs, one per thread or in turn.
  const DeviceProperties& current_properties() const {
    if (!available_) return device0_;
    bind_context();
    CUdevice device = device_;
    check(cuCtxGetDevice(&device), "cuCtxGetDevice");
    return properties_.get(
        device, [&](CUdevice d, DeviceProperties* p) { return read_properties(d, p); },
        [](CUdevice d) {
          throw Error(ErrorCode::device_error,
                      "cannot read the properties of CUDA device " + std::to_string(d));
        });
  }
  // Driver calls act on the calling thread's current context; make it the primary context of
  // GPU 0 unless the caller (e.g. PyTorch) already made one current.
  void bind_context() const {
    if (!available_) throw_no_device("a CUDA driver call");
    CUcontext current = nullptr;
    if (cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == nullptr) {
      check(cuCtxSetCurrent(context_), "cuCtxSetCurrent");
    }
  }

  support::DynamicLibrary lib_;
#define FMHA_MEMBER(member, name) decltype(&::member) member = nullptr;
  FMHA_CU_FUNCTIONS(FMHA_MEMBER)
#undef FMHA_MEMBER
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled_ = nullptr;
  bool available_ = false;
  bool present_ = false;
  std::string reason_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  DeviceProperties device0_;
  mutable DevicePropertiesTable properties_;
};

}  // namespace

DeviceApi& cuda_driver() {
  static CudaDriver driver;
  return driver;
}

}  // namespace fmha_jit::device
