#include "support/test_support.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <random>

namespace fmha_jit::test {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() /
          ("fmha-jit-test-" + std::to_string(rd()) + "-" + std::to_string(rd()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  // Tests make folders read-only; give permissions back so removal succeeds.
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  }
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(path_, ec);
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) {
    result.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

FmhaKernelConfig small_config(Family family, std::string arch) {
  FmhaKernelConfig c;
  c.family = family;
  c.dtype = DType::bf16;
  c.hdim_q = c.hdim_v = 64;
  c.arch = std::move(arch);
  c.impl = KernelImpl::reference;
  return c;
}

std::vector<std::pair<int, int>> head_dim_pairs() {
  return {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}, {192, 128}};
}

}  // namespace fmha_jit::test
