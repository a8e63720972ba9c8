// The work of an attention problem, for `bench`'s and `run`'s throughput and for `run`'s choice of
// reference: FLOPs under FlashAttention's convention, and multiply-adds.
#pragma once

#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::cli {

// FlashAttention's convention: a forward costs 2 * Hq * (Dq + Dv) per visible (query, key) pair of
// each sequence, a backward 2.5 times that. A dense batch is B sequences of Sq x Sk; a packed
// batch is counted sequence by sequence from its host cu_seqlens (each masked over its own
// lengths), so that the padding up to the longest sequence is not credited. See the .cpp for how
// visible pairs are counted per mask. Throws Error(invalid_argument) for a packed problem without
// host cu_seqlens.
double attention_flops(const FmhaProblem& problem, MaskKind mask, Family family);

// Hq * Sq * Sk * (Dq + Dv) summed over the sequences, whatever the mask: what the CPU reference
// spends, which decides whether `run --verify` can afford it.
double attention_macs(const FmhaProblem& problem);

}  // namespace fmha_jit::cli
