// What dispatcher.cpp, the layer that wires the pipeline to the runners, offers besides the public
// setup_fmha_dispatcher().
#pragma once

namespace fmha_jit::dispatch {

// Empties the in-process caches: compiled modules and the runner memo (tests and benchmarks of the
// disk path).
void clear_memory_cache();

}  // namespace fmha_jit::dispatch
