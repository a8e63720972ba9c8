// The reference's one way of using threads.
#pragma once

#include <functional>

namespace fmha_jit::reference {

// Runs fn(task) for every task in [0, tasks), on up to hardware_concurrency() threads (fewer when
// `work`, a flop count, is too small to pay for them). Each task must write outputs of its own and
// compute them in a fixed order, so results do not depend on the number of threads. The first
// exception thrown by a task is rethrown here.
void parallel_for(int tasks, double work, const std::function<void(int)>& fn);

// Caps the threads parallel_for uses (0: hardware_concurrency(), the default). For tests that
// check that results do not depend on the thread count; affects every later call in the process.
void set_thread_limit(int threads);

}  // namespace fmha_jit::reference
