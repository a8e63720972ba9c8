# Every third-party dependency comes from Debian packages (see README.md for the list).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
if(FMHA_JIT_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()

# xxHash ships no CMake package in Debian; libxxhash-dev provides pkg-config metadata and a static
# archive. The static archive is preferred so binaries carried to GPU machines need no libxxhash.so.
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED libxxhash)
find_library(FMHA_JIT_XXHASH_STATIC NAMES libxxhash.a HINTS ${XXHASH_LIBRARY_DIRS})
add_library(fmha_jit_xxhash INTERFACE)
target_include_directories(fmha_jit_xxhash INTERFACE ${XXHASH_INCLUDE_DIRS})
if(FMHA_JIT_XXHASH_STATIC)
  target_link_libraries(fmha_jit_xxhash INTERFACE ${FMHA_JIT_XXHASH_STATIC})
else()
  target_link_libraries(fmha_jit_xxhash INTERFACE ${XXHASH_LINK_LIBRARIES})
endif()
add_library(fmha_jit::xxhash ALIAS fmha_jit_xxhash)

# Only headers of the CUDA toolkit are used at build time (cuda.h for driver API types, nvrtc.h for
# NVRTC's); the libraries themselves are dlopen'd at run time.
find_package(CUDAToolkit REQUIRED)
set(FMHA_JIT_CUDA_INCLUDE ${CUDAToolkit_INCLUDE_DIRS})

# hipRTC and the HIP module API come from libamdhip64-dev (ROCm 5.2); headers only, dlopen'd.
find_path(FMHA_JIT_HIP_HIPRTC_H hip/hiprtc.h REQUIRED)
set(FMHA_JIT_HIP_INCLUDE ${FMHA_JIT_HIP_HIPRTC_H})
