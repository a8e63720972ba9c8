// The FieldError a call throws, for tests of bad input to check its field, value and accepted
// values; fails the test when the call throws none.
#pragma once

#include <catch2/catch.hpp>

#include "fmha_jit/error.hpp"

namespace fmha_jit::test {

template <class F>
FieldError field_error(F&& f) {
  try {
    f();
  } catch (const FieldError& e) {
    return e;
  }
  FAIL("no FieldError thrown");
  throw;  // unreachable: FAIL throws
}

}  // namespace fmha_jit::test
