// Shared helpers of the test suites.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fmha_jit/config.hpp"

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

}  // namespace fmha_jit::test
