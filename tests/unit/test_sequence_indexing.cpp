// The sequence a CTA works on (templates/common/sequence.h), run on the host through
// support/device_shim.hpp. In a packed batch every (sequence, query head, row) has its own entry
// of the per-row arrays (LSE, D, sink terms, dQ sums) and its own tensor row, and together they
// cover [0, Hq x total_q) once; a dense batch keeps its [batch, Hq, Sq] layout; cu_seqlens entries
// out of order, past the tensors or longer than the longest given make their sequence empty (no
// CTA then reads or writes for it) and leave the others as they are.
#include <catch2/catch.hpp>

#include <vector>

// Last before the device code: it defines __CUDACC__.
#include "support/device_shim.hpp"
// After the shim: device code.
#include "common/sequence.h"

namespace {

struct Packed {
  std::vector<int> cu_q, cu_k;
  FmhaFwdParams p{};

  Packed(std::vector<int> q, std::vector<int> k, int nhead_q, int max_q, int max_k)
      : cu_q(std::move(q)), cu_k(std::move(k)) {
    p.batch = static_cast<int>(cu_q.size()) - 1;
    p.nhead_q = nhead_q;
    p.seqlen_q = max_q;
    p.seqlen_k = max_k;
    p.cu_seqlens_q = cu_q.data();
    p.cu_seqlens_k = cu_k.data();
    p.total_q = cu_q.back();
    p.total_k = cu_k.back();
  }
};

}  // namespace

TEST_CASE("sequence indexing: packed rows and per-row entries are each used once", "[sequence]") {
  // Lengths 5, 0, 9, 1 (queries) and 7, 3, 9, 0 (keys), 3 query heads.
  const Packed b({0, 5, 5, 14, 15}, {0, 7, 10, 19, 19}, 3, 9, 9);
  std::vector<int> stat_hits(static_cast<std::size_t>(b.p.nhead_q * b.p.total_q), 0);
  std::vector<int> row_hits(static_cast<std::size_t>(b.p.total_q), 0);
  const std::vector<int> lengths_q = {5, 0, 9, 1}, lengths_k = {7, 3, 9, 0};
  for (int s = 0; s < b.p.batch; ++s) {
    const FmhaSequence seq = fmha_sequence<true>(b.p, s);
    CHECK(seq.seqlen_q == lengths_q[s]);
    CHECK(seq.seqlen_k == lengths_k[s]);
    CHECK(seq.q_row0 == b.cu_q[s]);
    CHECK(seq.k_row0 == b.cu_k[s]);
    for (int i = 0; i < seq.seqlen_q; ++i) ++row_hits[static_cast<std::size_t>(seq.q_row0 + i)];
    for (int h = 0; h < b.p.nhead_q; ++h) {
      const fmha_index_t stat0 = fmha_row_stat0<true>(b.p, seq.q_row0, s, h);
      for (int i = 0; i < seq.seqlen_q; ++i) {
        const fmha_index_t at = stat0 + i;
        REQUIRE(at >= 0);
        REQUIRE(at < static_cast<fmha_index_t>(stat_hits.size()));
        ++stat_hits[static_cast<std::size_t>(at)];
      }
    }
  }
  for (int hits : stat_hits) CHECK(hits == 1);
  for (int hits : row_hits) CHECK(hits == 1);
}

TEST_CASE("sequence indexing: a dense batch keeps its layout", "[sequence]") {
  FmhaFwdParams p{};
  p.batch = 2;
  p.nhead_q = 3;
  p.seqlen_q = 7;
  p.seqlen_k = 4;
  const FmhaSequence seq = fmha_sequence<false>(p, 1);
  CHECK(seq.seqlen_q == 7);
  CHECK(seq.seqlen_k == 4);
  CHECK(seq.q_row0 == 0);
  CHECK(seq.k_row0 == 0);
  CHECK(fmha_row_stat0<false>(p, seq.q_row0, 1, 2) == (1 * 3 + 2) * 7);
  FmhaMaskGeometry storage{};
  // The dense masks read the parameters themselves.
  CHECK(&fmha_lengths<false>(p, seq, storage) == &p);
}

TEST_CASE("sequence indexing: malformed cu_seqlens make only their sequence empty", "[sequence]") {
  struct Bad {
    std::vector<int> cu_q, cu_k;
    int max_q, max_k;  // the longest lengths given
    int bad;           // the sequence that must come out empty
  };
  // Each breaks one condition only: the others hold for every sequence.
  const std::vector<Bad> cases = {
      {{0, 5, 3, 12}, {0, 7, 10, 19}, 9, 9, 1},   // decreasing
      {{0, 5, 5, 14}, {0, 7, 10, 20}, 9, 10, 2},  // past total_k (19)
      {{-4, 5, 5, 14}, {0, 7, 10, 19}, 9, 9, 0},  // negative
      {{0, 5, 5, 15}, {0, 7, 10, 19}, 10, 9, 2},  // past total_q (14)
      {{0, 5, 5, 14}, {0, 1, 10, 18}, 9, 8, 1},   // 9 keys, longer than the longest given (8)
      {{0, 5, 5, 14}, {0, 7, 10, 19}, 8, 9, 2},   // 9 queries, longer than the longest (8)
  };
  for (std::size_t n = 0; n < cases.size(); ++n) {
    INFO("case " << n);
    const Bad& c = cases[n];
    Packed b(c.cu_q, c.cu_k, 2, c.max_q, c.max_k);
    b.p.total_q = 14;
    b.p.total_k = 19;
    for (int s = 0; s < b.p.batch; ++s) {
      const FmhaSequence seq = fmha_sequence<true>(b.p, s);
      if (s == c.bad) {
        CHECK(seq.seqlen_q == 0);
        CHECK(seq.seqlen_k == 0);
        continue;
      }
      CHECK(seq.seqlen_q == b.cu_q[s + 1] - b.cu_q[s]);
      CHECK(seq.seqlen_k == b.cu_k[s + 1] - b.cu_k[s]);
      CHECK(seq.q_row0 == b.cu_q[s]);
      CHECK(seq.k_row0 == b.cu_k[s]);
    }
  }
}
