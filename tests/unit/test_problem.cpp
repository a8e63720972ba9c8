// FmhaProblem on the host: the dense strides of both layouts and the strides the gradients take.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "fmha_jit/problem.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;

namespace {

// Offset of element (b, h, s, d) of a dense tensor, computed from the layout's dimension order
// (not from dense_strides): the outermost dimension first, hdim innermost.
std::int64_t dense_offset(Layout layout, std::int64_t heads, std::int64_t seq, std::int64_t dim,
                          std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  if (layout == Layout::bhsd) return ((b * heads + h) * seq + s) * dim + d;
  return ((b * seq + s) * heads + h) * dim + d;
}

}  // namespace

TEST_CASE("problem: dense strides address every element of both layouts exactly once",
          "[problem]") {
  // Extents distinct from each other, so that a swapped dimension shows.
  constexpr std::int64_t kBatch = 2, kHeads = 3, kSeq = 5, kDim = 4;
  constexpr std::int64_t kElements = kBatch * kHeads * kSeq * kDim;
  for (const Layout layout : {Layout::bhsd, Layout::bshd}) {
    INFO("layout " << to_string(layout));
    const TensorStrides st = dense_strides(layout, kHeads, kSeq, kDim);
    std::vector<int> hits(kElements, 0);
    for (std::int64_t b = 0; b < kBatch; ++b) {
      for (std::int64_t h = 0; h < kHeads; ++h) {
        for (std::int64_t s = 0; s < kSeq; ++s) {
          for (std::int64_t d = 0; d < kDim; ++d) {
            const std::int64_t offset = b * st.batch + h * st.head + s * st.row + d;
            INFO("element (" << b << ", " << h << ", " << s << ", " << d << ")");
            REQUIRE(offset == dense_offset(layout, kHeads, kSeq, kDim, b, h, s, d));
            REQUIRE(offset >= 0);
            REQUIRE(offset < kElements);
            ++hits[offset];
          }
        }
      }
    }
    // kElements offsets in [0, kElements), none twice: a bijection.
    for (std::int64_t i = 0; i < kElements; ++i) CHECK(hits[i] == 1);
  }
}

TEST_CASE("problem: dense strides of the two layouts differ where heads and rows trade places",
          "[problem]") {
  CHECK(dense_strides(Layout::bhsd, 3, 5, 4) == TensorStrides{60, 20, 4});
  CHECK(dense_strides(Layout::bshd, 3, 5, 4) == TensorStrides{60, 4, 12});
}

TEST_CASE("problem: gradient strides follow O, Q, K and V unless given", "[problem]") {
  FmhaProblem p = test::sized_problem(2, 4, 2, 100, 70, 64);
  p.hdim_v = 32;
  p.layout = Layout::bshd;
  CHECK(p.do_stride() == p.o_stride());
  CHECK(p.dq_stride() == p.q_stride());
  CHECK(p.dk_stride() == p.k_stride());
  CHECK(p.dv_stride() == p.v_stride());
  // Explicit input strides carry over to the gradients that follow them.
  p.q_strides = TensorStrides{100000, 80, 640};
  p.o_strides = TensorStrides{50000, 40, 320};
  CHECK(p.dq_stride() == *p.q_strides);
  CHECK(p.do_stride() == *p.o_strides);
  // A gradient's own strides win over those of the tensor it follows.
  p.dq_strides = TensorStrides{1 << 20, 64 * 100, 64};
  p.do_strides = TensorStrides{1 << 19, 32, 128};
  p.dk_strides = TensorStrides{1 << 18, 64, 128};
  p.dv_strides = TensorStrides{1 << 17, 32, 64};
  CHECK(p.dq_stride() == *p.dq_strides);
  CHECK(p.do_stride() == *p.do_strides);
  CHECK(p.dk_stride() == *p.dk_strides);
  CHECK(p.dv_stride() == *p.dv_strides);
  CHECK(p.q_stride() == *p.q_strides);  // the inputs keep theirs
  CHECK(p.o_stride() == *p.o_strides);
}
