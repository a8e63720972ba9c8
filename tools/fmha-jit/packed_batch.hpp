// Packed variable-length batches on the command line: the --seqlens-q / --seqlens-k lists, the
// cumulative offsets (cu_seqlens) built from them, and the sequences of a packed problem, which
// `run` checks one by one and `bench` counts the FLOPs of.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fmha_jit/problem.hpp"

namespace fmha_jit::cli {

// What a lengths list accepts, for messages and --help.
inline constexpr const char* kSeqlensAccepted =
    "comma-separated sequence lengths, one per sequence, each an integer 0 .. 2147483647, "
    "e.g. 100,2000,17";

// Parses "100,2000,17". Throws Error(invalid_argument) "<key> = <text> is not supported: <why>;
// accepted: ..." for an empty list, an entry that is not a length, or lengths whose sum (the
// token count) does not fit the kernels' int32 offsets.
std::vector<std::int32_t> parse_seqlens(std::string_view key, const std::string& text);

struct PackedBatch {
  // batch + 1 entries each: 0, then the running sums of the lengths.
  std::vector<std::int32_t> cu_seqlens_q, cu_seqlens_k;

  std::int64_t batch() const { return static_cast<std::int64_t>(cu_seqlens_q.size()) - 1; }
  std::int64_t total_q() const { return cu_seqlens_q.back(); }
  std::int64_t total_k() const { return cu_seqlens_k.back(); }
};

// From the two lists, which must have as many entries (one per sequence). Throws
// Error(invalid_argument) naming both options and their counts when they do not.
PackedBatch pack_seqlens(const std::vector<std::int32_t>& seqlens_q,
                         const std::vector<std::int32_t>& seqlens_k);

// Sets the varlen fields of `p` from `packed`: batch, total_q / total_k, seqlen_q / seqlen_k the
// longest lengths (at least 1, the smallest launch), and the host cu_seqlens, which `packed` must
// outlive. The device pointers are set to the host arrays too: the checks that run before a GPU
// is asked for only test them for null. A launch needs with_device_seqlens first.
void set_packed(FmhaProblem& p, const PackedBatch& packed);

// `p` with the device copies of its cu_seqlens.
FmhaProblem with_device_seqlens(FmhaProblem p, const void* cu_seqlens_q, const void* cu_seqlens_k);

// One sequence of a packed problem: its lengths and its first rows in the packed tensors.
struct Sequence {
  std::int64_t seqlen_q = 0, seqlen_k = 0;
  std::int64_t q_row0 = 0, k_row0 = 0;
};

// The sequences of a varlen problem, read from its host cu_seqlens. Throws Error(invalid_argument)
// for a varlen problem without them.
std::vector<Sequence> sequences(const FmhaProblem& p);

// The lengths of the sequences of a cu_seqlens array (batch + 1 entries), for messages and JSON.
std::vector<std::int64_t> seqlens_of(const std::int32_t* cu_seqlens, std::int64_t batch);

}  // namespace fmha_jit::cli
