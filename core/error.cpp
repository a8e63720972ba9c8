#include "fmha_jit/error.hpp"

#include <utility>

namespace fmha_jit {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_config: return "invalid_config";
    case ErrorCode::invalid_problem: return "invalid_problem";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::rtc_unavailable: return "rtc_unavailable";
    case ErrorCode::compile_failed: return "compile_failed";
    case ErrorCode::device_unavailable: return "device_unavailable";
    case ErrorCode::device_error: return "device_error";
    case ErrorCode::cache_error: return "cache_error";
    case ErrorCode::io_error: return "io_error";
  }
  return "unknown";
}

FieldError::FieldError(ErrorCode code, std::string field, std::string value, std::string accepted)
    : Error(code, field + " = " + value + " is not supported; accepted: " + accepted),
      field_(std::move(field)),
      value_(std::move(value)),
      accepted_(std::move(accepted)) {}

CompileError::CompileError(const std::string& message, std::string log,
                           std::vector<std::string> options, std::string source_path)
    : Error(ErrorCode::compile_failed, message),
      log_(std::move(log)),
      options_(std::move(options)),
      source_path_(std::move(source_path)) {}

}  // namespace fmha_jit
