// Configs and problems that the launch-plan tests (test_plan*.cpp) share.
#pragma once

#include "fmha_jit/dispatcher.hpp"

namespace fmha_jit::plan_test {

inline FmhaKernelConfig bwd_config(bool deterministic, const char* arch = "sm_80") {
  FmhaKernelConfig c;
  c.family = Family::bwd;
  c.dtype = DType::bf16;
  c.hdim_q = c.hdim_v = 128;
  c.arch = arch;
  c.deterministic = deterministic;
  return canonicalize(c);
}

// bf16 hdim 128 forward for sm_90, canonical: the Hopper kernel (wgmma_sm90a).
inline FmhaKernelConfig fwd_sm90_config() {
  FmhaKernelConfig c;
  c.family = Family::fwd;
  c.dtype = DType::bf16;
  c.hdim_q = c.hdim_v = 128;
  c.arch = "sm_90";
  return canonicalize(c);
}

inline FmhaProblem problem() {
  FmhaProblem p;
  p.batch = 3;
  p.nhead_q = 8;
  p.nhead_k = 2;
  p.seqlen_q = 1000;
  p.seqlen_k = 777;
  p.hdim_q = p.hdim_v = 128;
  return p;
}

// The grid's hdim 128 S 8192 row: 2 x 16 heads, 2048 tiles of 128 rows or keys (15.5 waves on 132
// SMs), which both split tails cut.
inline FmhaProblem s8192_problem() {
  FmhaProblem p;
  p.batch = 2;
  p.nhead_q = p.nhead_k = 16;
  p.seqlen_q = p.seqlen_k = 8192;
  p.hdim_q = p.hdim_v = 128;
  return p;
}

}  // namespace fmha_jit::plan_test
