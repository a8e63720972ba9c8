// The one check of every environment variable the library and the CLI read (README.md,
// Environment), each parsed where it is used, by support/env.hpp.
#pragma once

namespace fmha_jit::dispatch {

// Reads every environment variable the library and the CLI take and throws the FieldError of the
// first that holds a value not accepted. setup_fmha_dispatcher and the CLI call it before any
// work, so a bad value fails them whichever path would have read it (a cache hit never reads the
// lock timeout, an sm_90 config never reads the arch), and never passes as a default.
void check_environment();

}  // namespace fmha_jit::dispatch
