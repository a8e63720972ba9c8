# `cmake --install`: fmha_jit as a CMake package, used by another project with
#   find_package(fmha_jit REQUIRED)
#   target_link_libraries(app PRIVATE fmha_jit::fmha_jit)
# and the fmha-jit CLI. Layout (GNUInstallDirs): the archive in lib/, the public headers in
# include/fmha_jit/, the package files in lib/cmake/fmha_jit/, the device templates in
# share/fmha_jit/templates/ (the library embeds them; installed so users can read what its kernels
# are compiled from) and the CLI in bin/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FMHA_JIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/fmha_jit)
set(FMHA_JIT_INSTALL_TEMPLATEDIR ${CMAKE_INSTALL_DATADIR}/fmha_jit/templates)

# An instrumented archive calls the sanitizer runtimes, so a program linking the installed one must
# link them too; the build's own programs get the flag from add_link_options (FmhaJitWarnings).
if(FMHA_JIT_SANITIZE)
  target_link_options(fmha_jit INTERFACE $<INSTALL_INTERFACE:${FMHA_JIT_SANITIZE_LINK_OPTIONS}>)
endif()

install(TARGETS fmha_jit EXPORT fmha_jitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fmha_jit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/templates/ DESTINATION ${FMHA_JIT_INSTALL_TEMPLATEDIR})

install(EXPORT fmha_jitTargets NAMESPACE fmha_jit:: DESTINATION ${FMHA_JIT_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/fmha_jitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/fmha_jitConfig.cmake
  INSTALL_DESTINATION ${FMHA_JIT_INSTALL_CMAKEDIR}
  PATH_VARS FMHA_JIT_INSTALL_TEMPLATEDIR)
# Before 1.0 a minor release may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/fmha_jitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
# FindFmhaJitXxhash.cmake defines fmha_jit::xxhash again on the user's side (fmha_jitConfig.cmake).
install(FILES ${PROJECT_BINARY_DIR}/package/fmha_jitConfig.cmake
              ${PROJECT_BINARY_DIR}/package/fmha_jitConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindFmhaJitXxhash.cmake
        DESTINATION ${FMHA_JIT_INSTALL_CMAKEDIR})

if(FMHA_JIT_BUILD_TOOLS)
  install(TARGETS fmha-jit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
