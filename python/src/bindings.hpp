// The pieces of the extension module fmha_jit._C, each defined in its own file and added to the
// module by module.cpp.
#pragma once

#include <nanobind/nanobind.h>

namespace fmha_jit::python {

// errors.cpp: the exception types and the translation of fmha_jit::Error by its code.
void add_errors(nanobind::module_& m);
// log_bridge.cpp: the library's log lines (spdlog) and its compiles, sent to Python's logging.
void add_log_bridge(nanobind::module_& m);
// kernel_handle.cpp: Kernel, one set-up runner and its launches.
void add_kernel(nanobind::module_& m);
// cache_functions.cpp: prebuild, cache listing, arch and config helpers.
void add_cache_functions(nanobind::module_& m);

}  // namespace fmha_jit::python
