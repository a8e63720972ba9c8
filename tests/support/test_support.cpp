#include "support/test_support.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdint>
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

FmhaProblem sized_problem(int batch, int nhead_q, int nhead_k, int seqlen_q, int seqlen_k, int hdim,
                          int window_left, int window_right) {
  FmhaProblem p;
  p.batch = batch;
  p.nhead_q = nhead_q;
  p.nhead_k = nhead_k;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.hdim_q = p.hdim_v = hdim;
  p.window_left = window_left;
  p.window_right = window_right;
  return p;
}

namespace {

void* placeholder(std::uintptr_t n) { return reinterpret_cast<void*>(n << 12); }

}  // namespace

FwdTensors placeholder_fwd_tensors() {
  return {placeholder(1), placeholder(2), placeholder(3), placeholder(4),
          static_cast<float*>(placeholder(5))};
}

BwdTensors placeholder_bwd_tensors() {
  BwdTensors t;
  t.q = placeholder(1);
  t.k = placeholder(2);
  t.v = placeholder(3);
  t.o = placeholder(4);
  t.lse = static_cast<const float*>(placeholder(5));
  t.d_o = placeholder(6);
  t.d_q = placeholder(7);
  t.d_k = placeholder(8);
  t.d_v = placeholder(9);
  return t;
}

void* placeholder_workspace() { return placeholder(10); }

}  // namespace fmha_jit::test
