// Probe kernels of the Hopper building blocks (templates/sm90), shared by the rtc test (they
// compile for sm_90a, not for sm_90) and the gpu test (the GEMM matches a CPU GEMM on an H100 /
// H200).
#pragma once

#include <string>

#include "codegen/rtc/compiler.hpp"

namespace fmha_jit::test {

// Kernels: fmha_sm90_probe_gemm(a_map, b_map, out), fmha_sm90_probe_gemm_nmajor(a_map, b_map,
// out, lbo, sbo), fmha_sm90_probe_instances(o_map, dq_map, out) and
// fmha_sm90_probe_handoff(out, rounds, by_barrier); see sm90_probe.cpp.
extern const char* const kSm90ProbeSource;
// Dynamic shared memory of fmha_sm90_probe_gemm: two 8 KB tiles, the barrier, 1 KB of alignment.
constexpr int kSm90ProbeGemmSmemBytes = 2 * 64 * 128 + 64 + 1024;
// ... and of fmha_sm90_probe_gemm_nmajor: A (8 KB), B (16 KB), the barrier, alignment.
constexpr int kSm90ProbeNMajorSmemBytes = 3 * 64 * 128 + 64 + 1024;

// Compiles the probes for `arch` with the options the pipeline would use; throws CompileError.
codegen::rtc::CompileOutput compile_sm90_probe(const std::string& arch);

}  // namespace fmha_jit::test
