// Typed errors of fmha-jit. Every failure the library reports is an fmha_jit::Error carrying a
// machine-readable code; compile failures additionally carry the compiler log, the options and the
// path of the rendered source so a user can reproduce the compile by hand.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace fmha_jit {

enum class ErrorCode {
  invalid_config,      // a config field has a value that is not accepted
  invalid_problem,     // a problem does not match the kernel or is malformed
  invalid_argument,    // null or misaligned pointers, workspace too small, bad CLI value
  rtc_unavailable,     // NVRTC or hipRTC could not be loaded
  compile_failed,      // the RTC compiler rejected the rendered source
  device_unavailable,  // no GPU or no driver where one is needed
  device_error,        // a driver call failed
  cache_error,         // the on-disk cache could not be used as asked
  io_error,            // a file could not be read or written
};

const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// A config or problem field holding a value that is not accepted. The message names the field, the
// value and what is accepted, e.g. "hdim_q = 80 is not supported; accepted: 32, 64, 96, ...".
class FieldError : public Error {
 public:
  FieldError(ErrorCode code, std::string field, std::string value, std::string accepted);
  const std::string& field() const noexcept { return field_; }
  const std::string& value() const noexcept { return value_; }
  const std::string& accepted() const noexcept { return accepted_; }

 private:
  std::string field_, value_, accepted_;
};

class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::string log, std::vector<std::string> options,
               std::string source_path);
  const std::string& log() const noexcept { return log_; }
  const std::vector<std::string>& options() const noexcept { return options_; }
  const std::string& source_path() const noexcept { return source_path_; }

 private:
  std::string log_;
  std::vector<std::string> options_;
  std::string source_path_;
};

}  // namespace fmha_jit
