// Shared helpers of the test suites.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fmha_jit/config.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::test {

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs a shell command, returning its exit status and capturing stdout.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_command(const std::string& command);

// A config of the reference kernel that compiles quickly, for pipeline tests.
FmhaKernelConfig small_config(Family family = Family::fwd, std::string arch = "sm_90");

// Every valid (hdim_q, hdim_v) pair.
std::vector<std::pair<int, int>> head_dim_pairs();

// A bhsd problem of these sizes, hdim_v = hdim_q.
FmhaProblem sized_problem(int batch, int nhead_q, int nhead_k, int seqlen_q, int seqlen_k, int hdim,
                          int window_left = -1, int window_right = -1);

// Tensors for building a launch's parameters with the runner's own functions on a machine
// without a GPU: distinct, 4 KB aligned addresses that nothing dereferences (the schedule tests
// read only the sizes in the parameters).
FwdTensors placeholder_fwd_tensors();
BwdTensors placeholder_bwd_tensors();
// A workspace base for dispatch::make_bwd_params, of the same kind.
void* placeholder_workspace();

}  // namespace fmha_jit::test
