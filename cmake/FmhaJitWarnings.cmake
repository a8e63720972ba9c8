# Warnings are errors everywhere (CI builds with the default ON); sanitizers are one option so the
# asan preset and CI share one switch.
function(fmha_jit_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  # GCC 12 reports -Wrestrict inside std::string's operator+ at -O3 (GCC bug 105329, a false
  # positive fixed in GCC 13); silence that one diagnostic rather than contort string code.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(FMHA_JIT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(FMHA_JIT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FMHA_JIT_FUZZ needs clang (libFuzzer): configure with the fuzz preset")
  endif()
  # Coverage instrumentation for every object the fuzzers link; the fuzzer main is linked into
  # the fuzz executables alone (tests/fuzz/CMakeLists.txt).
  add_compile_options(-fsanitize=fuzzer-no-link)
  set(FMHA_JIT_SANITIZE ON)
endif()

# The link flag is also what the installed package asks of its users' links (FmhaJitInstall.cmake):
# the instrumented archive calls the sanitizer runtimes.
set(FMHA_JIT_SANITIZE_LINK_OPTIONS -fsanitize=address,undefined)
if(FMHA_JIT_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(${FMHA_JIT_SANITIZE_LINK_OPTIONS})
endif()
