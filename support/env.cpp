#include "support/env.hpp"

#include <charconv>
#include <cstdlib>

#include "fmha_jit/error.hpp"

namespace fmha_jit::env {
namespace {

// The raw value; nullopt when unset or empty.
std::optional<std::string> raw_value(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

}  // namespace

std::optional<std::uint64_t> parse_unsigned(std::string_view text, std::uint64_t max) {
  // from_chars alone would accept a prefix ("10x") and, for unsigned types, reads no sign; the
  // digit check makes the whole text the number.
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > max) return std::nullopt;
  return value;
}

std::optional<std::uint64_t> unsigned_value(const char* name, std::string_view unit,
                                            std::uint64_t max) {
  const auto text = raw_value(name);
  if (!text) return std::nullopt;
  const auto value = parse_unsigned(*text, max);
  if (!value) {
    throw FieldError(ErrorCode::invalid_argument, name, *text,
                     "a non-negative integer of " + std::string(unit) +
                         " in decimal digits, at most " + std::to_string(max) +
                         " (unset or empty: the default)");
  }
  return value;
}

std::optional<std::string> choice_value(const char* name,
                                        std::span<const std::string_view> accepted) {
  auto text = raw_value(name);
  if (!text) return std::nullopt;
  std::string list;
  for (const auto choice : accepted) {
    if (choice == *text) return text;
    list += (list.empty() ? "" : ", ") + std::string(choice);
  }
  throw FieldError(ErrorCode::invalid_argument, name, *text,
                   list + " (unset or empty: the default)");
}

}  // namespace fmha_jit::env
