// Runs batches of sequences through the public API on the GPU - packed variable-length batches
// (varlen configs) or dense ones - with the score modifiers (sinks, softcap), and judges every
// sequence as the attention problem of its own lengths with the accuracy rule against the CPU
// references (reference/slice_reference.hpp), as attention_harness.hpp does for dense cases.
// Outputs are poisoned (NaN) before every run; every row of every sequence must be written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fmha_jit/config.hpp"
#include "gpu/attention_harness.hpp"

namespace fmha_jit::test {

struct SequenceCase {
  DType dtype = DType::bf16;
  int hdim = 64;  // hdim_q = hdim_v
  MaskKind mask = MaskKind::none;
  int nhead_q = 4, nhead_k = 2;
  // One entry per sequence; 0 is allowed in a packed batch.
  std::vector<int> seqlens_q, seqlens_k;
  // A packed batch (varlen config, cu_seqlens); false: a dense bshd batch, every sequence of the
  // same lengths.
  bool packed = true;
  int window_left = -1, window_right = -1;
  bool sinks = false;
  float softcap = 0;  // > 0: the softcap config
};
std::string describe(const SequenceCase& c);

// Runs the forward on random inputs (sink logits drawn too) and judges O and the LSE of every
// (sequence, query head).
CheckResult verify_sequences_forward(const SequenceCase& c, std::uint32_t seed);
void check_sequences_forward(const SequenceCase& c, std::uint32_t seed);

// Runs the backward `runs` times (O and LSE from the CPU's exact forward, dO random) and judges
// dQ, dK, dV and the sinks' gradient of every run; with `deterministic`, the runs must also be
// bit-identical.
BackwardRepro verify_sequences_backward(const SequenceCase& c, bool deterministic,
                                        std::uint32_t seed, int runs = 2);
void check_sequences_backward(const SequenceCase& c, bool deterministic, std::uint32_t seed,
                              int runs = 2);

}  // namespace fmha_jit::test
