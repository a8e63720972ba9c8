# Finds xxHash and defines the imported target fmha_jit::xxhash. The build uses it
# (FmhaJitDependencies.cmake), and it is installed next to fmha_jitConfig.cmake: libfmha_jit.a
# calls xxHash, so a project linking the installed archive must find the same library.
#
# xxHash ships no CMake package in Debian; libxxhash-dev provides pkg-config metadata and a static
# archive. The static archive is preferred so binaries carried to GPU machines need no
# libxxhash.so. pkg-config only adds hints: without it the default search paths are used.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_FMHA_JIT_XXHASH QUIET libxxhash)
endif()
find_path(FMHA_JIT_XXHASH_INCLUDE_DIR xxhash.h HINTS ${PC_FMHA_JIT_XXHASH_INCLUDE_DIRS})
find_library(FMHA_JIT_XXHASH_LIBRARY NAMES libxxhash.a xxhash
             HINTS ${PC_FMHA_JIT_XXHASH_LIBRARY_DIRS})
mark_as_advanced(FMHA_JIT_XXHASH_INCLUDE_DIR FMHA_JIT_XXHASH_LIBRARY)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(FmhaJitXxhash
  REQUIRED_VARS FMHA_JIT_XXHASH_LIBRARY FMHA_JIT_XXHASH_INCLUDE_DIR
  VERSION_VAR PC_FMHA_JIT_XXHASH_VERSION)

if(FmhaJitXxhash_FOUND AND NOT TARGET fmha_jit::xxhash)
  add_library(fmha_jit::xxhash UNKNOWN IMPORTED)
  set_target_properties(fmha_jit::xxhash PROPERTIES
    IMPORTED_LOCATION "${FMHA_JIT_XXHASH_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${FMHA_JIT_XXHASH_INCLUDE_DIR}")
endif()
