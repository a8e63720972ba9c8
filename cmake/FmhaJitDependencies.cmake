# Every third-party dependency comes from Debian packages (see README.md for the list).
find_package(Threads REQUIRED)
# The public headers use nlohmann_json: the installed package asks for the same version
# (fmha_jitConfig.cmake.in).
set(FMHA_JIT_NLOHMANN_JSON_VERSION 3.10)
find_package(nlohmann_json ${FMHA_JIT_NLOHMANN_JSON_VERSION} REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
if(FMHA_JIT_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()

# fmha_jit::xxhash: an imported target, so the installed package can define it again
# (FindFmhaJitXxhash.cmake is installed with fmha_jitConfig.cmake).
find_package(FmhaJitXxhash REQUIRED)

# Only headers of the CUDA toolkit are used at build time (cuda.h for driver API types, nvrtc.h for
# NVRTC's); the libraries themselves are dlopen'd at run time.
find_package(CUDAToolkit REQUIRED)
set(FMHA_JIT_CUDA_INCLUDE ${CUDAToolkit_INCLUDE_DIRS})

# hipRTC and the HIP module API come from libamdhip64-dev (ROCm 5.2); headers only, dlopen'd.
find_path(FMHA_JIT_HIP_HIPRTC_H hip/hiprtc.h REQUIRED)
set(FMHA_JIT_HIP_INCLUDE ${FMHA_JIT_HIP_HIPRTC_H})
