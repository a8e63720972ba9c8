// The strict parser of environment variables (support/env.hpp): whole-text decimal integers with a
// bound, exact choices, unset or empty as "not set", and errors that name variable and value.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "fmha_jit/error.hpp"
#include "support/env.hpp"
#include "support/field_error.hpp"

using namespace fmha_jit;

namespace {

// A variable of the tests' own, so that nothing the library reads changes under other tests.
constexpr const char* kVariable = "FMHA_JIT_TEST_ENV_VALUE";

// Sets kVariable for one scope (nullptr: unset) and unsets it after.
class ScopedVariable {
 public:
  explicit ScopedVariable(const char* value) {
    if (value) {
      ::setenv(kVariable, value, 1);
    } else {
      ::unsetenv(kVariable);
    }
  }
  ~ScopedVariable() { ::unsetenv(kVariable); }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;
};

using test::field_error;

constexpr std::uint64_t kMax64 = std::numeric_limits<std::uint64_t>::max();

}  // namespace

TEST_CASE("env: integers are whole decimal texts within the bound", "[env]") {
  CHECK(env::parse_unsigned("0", kMax64) == 0u);
  CHECK(env::parse_unsigned("120000", kMax64) == 120000u);
  CHECK(env::parse_unsigned("007", kMax64) == 7u);
  CHECK(env::parse_unsigned("18446744073709551615", kMax64) == kMax64);
  CHECK(env::parse_unsigned("10", 10) == 10u);
  for (const std::string_view bad :
       {"", "abc", "-1", "+1", " 1", "1 ", "1\n", "10ms", "1e3", "0x10", "1.5", "1,000",
        "18446744073709551616", "99999999999999999999999"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(env::parse_unsigned(bad, kMax64).has_value());
  }
  CHECK_FALSE(env::parse_unsigned("11", 10).has_value());
}

TEST_CASE("env: an integer variable: unset or empty is not set, a bad value names itself",
          "[env]") {
  {
    ScopedVariable unset(nullptr);
    CHECK_FALSE(env::unsigned_value(kVariable, "bytes", kMax64).has_value());
  }
  {
    ScopedVariable empty("");
    CHECK_FALSE(env::unsigned_value(kVariable, "bytes", kMax64).has_value());
  }
  {
    ScopedVariable set("4096");
    CHECK(env::unsigned_value(kVariable, "bytes", kMax64) == 4096u);
  }
  ScopedVariable bad("4k");
  const FieldError e = field_error([] { env::unsigned_value(kVariable, "milliseconds", 1000); });
  CHECK(e.code() == ErrorCode::invalid_argument);
  CHECK(e.field() == kVariable);
  CHECK(e.value() == "4k");
  CHECK_THAT(e.accepted(), Catch::Contains("non-negative integer of milliseconds") &&
                               Catch::Contains("at most 1000"));
  CHECK_THAT(std::string(e.what()), Catch::StartsWith(std::string(kVariable) + " = 4k"));
}

TEST_CASE("env: a choice variable takes its spellings exactly", "[env]") {
  static constexpr std::string_view kAccepted[] = {"none", "cuda", "hip"};
  {
    ScopedVariable unset(nullptr);
    CHECK_FALSE(env::choice_value(kVariable, kAccepted).has_value());
  }
  {
    ScopedVariable empty("");
    CHECK_FALSE(env::choice_value(kVariable, kAccepted).has_value());
  }
  for (const char* good : {"none", "cuda", "hip"}) {
    ScopedVariable set(good);
    CHECK(env::choice_value(kVariable, kAccepted) == std::string(good));
  }
  for (const char* bad : {"CUDA", "cuda ", "gpu", "no"}) {
    INFO("'" << bad << "'");
    ScopedVariable set(bad);
    const FieldError e = field_error([] { env::choice_value(kVariable, kAccepted); });
    CHECK(e.field() == kVariable);
    CHECK(e.value() == bad);
    CHECK_THAT(e.accepted(), Catch::StartsWith("none, cuda, hip"));
  }
}
