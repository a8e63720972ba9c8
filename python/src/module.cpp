#include "python/src/bindings.hpp"

NB_MODULE(_C, m) {
  m.doc() = "fmha-jit's C++ dispatcher; the public API is the fmha_jit package";
  fmha_jit::python::add_errors(m);
  fmha_jit::python::add_log_bridge(m);
  fmha_jit::python::add_kernel(m);
  fmha_jit::python::add_cache_functions(m);
}
