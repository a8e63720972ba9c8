// Strict reading of the environment variables fmha-jit takes (README.md, Environment). Unset or
// empty means "not set" (the shell's `VAR= command` idiom clears a variable that way); any other
// value must be one the variable accepts, else FieldError(invalid_argument) names the variable,
// the value and what is accepted. Nothing falls back to a default on a value it cannot read.
//
// Depends on nothing but the public error type, so cache/, codegen/ and dispatcher/ all use it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace fmha_jit::env {

// `text` as a decimal integer in [0, max]: digits only (no sign, blank, base prefix, exponent or
// trailing text); nullopt for anything else, including values past `max` or past 64 bits.
std::optional<std::uint64_t> parse_unsigned(std::string_view text, std::uint64_t max);

// The variable as an integer in [0, max] counted in `unit` (named in the error); nullopt when it
// is unset or empty.
std::optional<std::uint64_t> unsigned_value(const char* name, std::string_view unit,
                                            std::uint64_t max);

// The variable as one of `accepted`, spelled exactly; nullopt when it is unset or empty.
std::optional<std::string> choice_value(const char* name,
                                        std::span<const std::string_view> accepted);

}  // namespace fmha_jit::env
