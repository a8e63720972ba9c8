// The library logs with spdlog; inside Python its lines go to the logging module (logger
// "fmha_jit") through a handler the package installs, so they follow the application's logging
// configuration instead of printing to stdout. Each RTC compile adds one info line naming the
// kernel and the time it took: a first call that compiles is never a silent stall.
#include <Python.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "dispatcher/pipeline.hpp"
#include "python/src/bindings.hpp"

namespace nb = nanobind;

namespace fmha_jit::python {
namespace {

// The Python callable (level: int, message: str) or null. A raw reference, released by the
// package's atexit hook: static destructors run after the interpreter is gone, when no Python
// object may be touched.
std::mutex handler_mutex;
PyObject* handler = nullptr;

int python_level(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug: return 10;  // logging.DEBUG
    case spdlog::level::info: return 20;
    case spdlog::level::warn: return 30;
    case spdlog::level::err: return 40;
    default: return 50;
  }
}

// Lines logged while no handler is installed (before import finished, after exit began) go to
// stderr, as do those a failing handler did not take: the library never sees an error.
void forward(int level, const std::string& text) {
  if (Py_IsInitialized()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject* fn = nullptr;
    {
      std::lock_guard lock(handler_mutex);
      fn = handler;
      Py_XINCREF(fn);
    }
    bool taken = false;
    if (fn) {
      PyObject* result = PyObject_CallFunction(fn, "is", level, text.c_str());
      taken = result != nullptr;
      if (!taken) PyErr_Clear();
      Py_XDECREF(result);
      Py_DECREF(fn);
    }
    PyGILState_Release(gil);
    if (taken) return;
  }
  std::fprintf(stderr, "fmha_jit: %s\n", text.c_str());
}

// No lock of its own (null_mutex): the GIL orders the lines, and a sink mutex held while waiting
// for the GIL could deadlock against a thread that logs while holding it.
class PythonSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    forward(python_level(msg.level), std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}
};

void set_handler(nb::object fn) {
  PyObject* next = fn.is_none() ? nullptr : fn.ptr();
  Py_XINCREF(next);
  PyObject* previous = nullptr;
  {
    std::lock_guard lock(handler_mutex);
    previous = handler;
    handler = next;
  }
  Py_XDECREF(previous);
}

}  // namespace

void add_log_bridge(nb::module_& m) {
  auto logger = std::make_shared<spdlog::logger>("fmha_jit", std::make_shared<PythonSink>());
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
  dispatch::set_compile_observer([](const dispatch::CompileEvent& e) {
    if (!e.finished) return;
    if (e.failed) {
      spdlog::warn("compile of {} failed after {:.2f} s (key {})", e.kernel, e.seconds, e.key);
    } else {
      spdlog::info("compiled {} in {:.2f} s (key {})", e.kernel, e.seconds, e.key);
    }
  });
  m.def("_set_log_handler", &set_handler, nb::arg("handler").none(),
        "Where the library's log lines go: a callable (level, message), or None for stderr.");
}

}  // namespace fmha_jit::python
