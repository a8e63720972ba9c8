// Python exceptions for the library's errors. Every fmha_jit::Error becomes fmha_jit.Error or a
// subclass chosen by its code, its message unchanged (it names the field, the value and what is
// accepted). Input errors also derive from ValueError, so code that catches ValueError for bad
// arguments keeps working.
#include <Python.h>

#include <exception>

#include "fmha_jit/error.hpp"
#include "python/src/bindings.hpp"

namespace nb = nanobind;

namespace fmha_jit::python {
namespace {

struct ErrorTypes {
  PyObject* error = nullptr;          // fmha_jit.Error(RuntimeError)
  PyObject* invalid_input = nullptr;  // InvalidInputError(Error, ValueError)
  PyObject* compile = nullptr;        // CompileError(Error)
  PyObject* device = nullptr;         // DeviceError(Error)
  PyObject* cache = nullptr;          // CacheError(Error)
};
ErrorTypes types;

PyObject* type_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_config:
    case ErrorCode::invalid_problem:
    case ErrorCode::invalid_argument: return types.invalid_input;
    case ErrorCode::rtc_unavailable:
    case ErrorCode::compile_failed: return types.compile;
    case ErrorCode::device_unavailable:
    case ErrorCode::device_error: return types.device;
    case ErrorCode::cache_error:
    case ErrorCode::io_error: return types.cache;
  }
  return types.error;
}

PyObject* new_type(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("fmha_jit.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

}  // namespace

void add_errors(nb::module_& m) {
  types.error = new_type(m, "Error", PyExc_RuntimeError, "Base class of fmha-jit's errors.");
  nb::object invalid_bases = nb::make_tuple(nb::handle(types.error), nb::handle(PyExc_ValueError));
  types.invalid_input = new_type(
      m, "InvalidInputError", invalid_bases.ptr(),
      "A config, problem or argument that is not accepted; the message names the field, its "
      "value and what is accepted.");
  types.compile = new_type(m, "CompileError", types.error,
                           "NVRTC / hipRTC is missing or rejected a kernel; the message gives the "
                           "path of the saved source and log.");
  types.device = new_type(m, "DeviceError", types.error, "No usable GPU, or a driver call failed.");
  types.cache = new_type(m, "CacheError", types.error, "The kernel cache could not be used.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(type_for(e.code()), e.what());
    }
  });
}

}  // namespace fmha_jit::python
