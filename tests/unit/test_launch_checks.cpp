// The checks make_fwd_params / make_bwd_params apply to a call's tensors before anything is
// launched (dispatcher/launch.cpp), run on the host with placeholder pointers: output strides
// under which two elements would share an address are refused, inputs may alias or broadcast,
// and the gradients' own strides reach the kernel parameters.
#include <catch2/catch.hpp>

#include <ostream>
#include <string>

#include "common/fmha_params.h"
#include "dispatcher/launch.hpp"
#include "fmha_jit/error.hpp"
#include "support/field_error.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;

// FmhaStrides is a plain struct of the device headers; the comparison and printing are the
// tests' own.
static bool operator==(const FmhaStrides& a, const FmhaStrides& b) {
  return a.batch == b.batch && a.head == b.head && a.row == b.row;
}
static std::ostream& operator<<(std::ostream& out, const FmhaStrides& s) {
  return out << "{" << s.batch << ", " << s.head << ", " << s.row << "}";
}

namespace {

using test::field_error;

FmhaKernelConfig reference_config(Family family) {
  return canonicalize(test::small_config(family));  // hdim 64, 2-byte alignment
}

// 2 batches x 4 query heads (2 kv heads) x 16 query rows x 24 keys, hdim 64: every dimension of
// every tensor has extent > 1.
FmhaProblem small_problem() { return test::sized_problem(2, 4, 2, 16, 24, 64); }

FmhaFwdParams fwd_params(const FmhaProblem& p) {
  return dispatch::make_fwd_params(reference_config(Family::fwd), p,
                                   test::placeholder_fwd_tensors());
}

FmhaBwdParams bwd_params(const FmhaProblem& p) {
  return dispatch::make_bwd_params(reference_config(Family::bwd), p,
                                   test::placeholder_bwd_tensors(), test::placeholder_workspace());
}

void check_refused(const FieldError& e, const std::string& field, const std::string& strides) {
  CHECK(e.code() == ErrorCode::invalid_argument);
  CHECK(e.field() == field);
  CHECK_THAT(e.value(), Catch::Contains(strides));
  CHECK_THAT(e.accepted(), Catch::Contains("share an address"));
  CHECK_THAT(std::string(e.what()), Catch::StartsWith(field + " = "));
}

}  // namespace

TEST_CASE("launch checks: an output stride of 0 over a dimension of extent > 1 is refused",
          "[launch]") {
  FmhaProblem p = small_problem();
  p.o_strides = TensorStrides{4 * 16 * 64, 0, 64};  // every query head writes one block
  check_refused(field_error([&] { fwd_params(p); }), "o strides", "batch 4096, head 0, row 64");
  p.o_strides = TensorStrides{0, 16 * 64, 64};  // both batches write one block
  check_refused(field_error([&] { fwd_params(p); }), "o strides", "batch 0, head 1024, row 64");

  p = small_problem();
  p.dq_strides = TensorStrides{4 * 16 * 64, 16 * 64, 0};  // every query row writes one row
  check_refused(field_error([&] { bwd_params(p); }), "d_q strides", "batch 4096, head 1024, row 0");
  p = small_problem();
  p.dv_strides = TensorStrides{2 * 24 * 64, 0, 64};
  check_refused(field_error([&] { bwd_params(p); }), "d_v strides", "batch 3072, head 0, row 64");
}

TEST_CASE("launch checks: output strides whose heads or rows overlap are refused", "[launch]") {
  FmhaProblem p = small_problem();
  // Head stride of 8 rows where a head holds 16: heads h and h + 1 share 8 rows.
  p.o_strides = TensorStrides{4 * 16 * 64, 8 * 64, 64};
  check_refused(field_error([&] { fwd_params(p); }), "o strides", "batch 4096, head 512, row 64");
  // Row stride shorter than a row of hdim_v = 64.
  p.o_strides = TensorStrides{4 * 16 * 64, 16 * 64, 32};
  check_refused(field_error([&] { fwd_params(p); }), "o strides", "batch 4096, head 1024, row 32");
  // Batch stride of 3 heads where a batch holds 4.
  p.o_strides = TensorStrides{3 * 16 * 64, 16 * 64, 64};
  check_refused(field_error([&] { fwd_params(p); }), "o strides", "batch 3072, head 1024, row 64");

  p = small_problem();
  // dK in bshd order (row = 2 heads x 64) with a head stride that lands inside the next head.
  p.dk_strides = TensorStrides{24 * 2 * 64, 32, 2 * 64};
  check_refused(field_error([&] { bwd_params(p); }), "d_k strides", "batch 3072, head 32, row 128");
  p = small_problem();
  // Two dimensions with one stride: head h + 1 is row 1 of head h.
  p.dq_strides = TensorStrides{1 << 20, 64, 64};
  check_refused(field_error([&] { bwd_params(p); }), "d_q strides", "head 64, row 64");
}

TEST_CASE("launch checks: padded, transposed and size-1 output layouts are accepted", "[launch]") {
  FmhaProblem p = small_problem();
  // Rows padded to 72 elements, heads to 17 rows, batches by 1000 more elements.
  p.o_strides = TensorStrides{4 * 17 * 72 + 1000, 17 * 72, 72};
  CHECK(fwd_params(p).o_strides.row == 72);
  // The bshd order given as explicit strides of a bhsd problem (a transposed view).
  p.o_strides = TensorStrides{16 * 4 * 64, 64, 4 * 64};
  CHECK(fwd_params(p).o_strides.head == 64);
  // The tightest packing: each stride exactly extent x stride of the next smaller one.
  p.o_strides = dense_strides(Layout::bhsd, 4, 16, 64);
  CHECK_NOTHROW(fwd_params(p));

  // A dimension of extent 1 may take any stride, 0 included.
  FmhaProblem one = test::sized_problem(1, 1, 1, 1, 24, 64);
  one.o_strides = TensorStrides{0, 0, 0};
  CHECK(fwd_params(one).o_strides == FmhaStrides{0, 0, 0});
  one.dq_strides = TensorStrides{0, 0, 0};
  one.dk_strides = TensorStrides{0, 0, 64};  // batch and kv head of extent 1; 24 keys
  CHECK_NOTHROW(bwd_params(one));

  p = small_problem();
  p.dq_strides = TensorStrides{4 * 16 * 80, 16 * 80, 80};
  p.dk_strides = TensorStrides{24 * 2 * 64, 64, 2 * 64};
  p.dv_strides = TensorStrides{2 * 24 * 64 + 64, 24 * 64, 64};
  CHECK_NOTHROW(bwd_params(p));
}

TEST_CASE("launch checks: inputs may alias or broadcast", "[launch]") {
  FmhaProblem p = small_problem();
  // One K / V head for every batch and head, one query row repeated over the sequence.
  p.q_strides = TensorStrides{4 * 64, 64, 0};
  p.k_strides = TensorStrides{0, 0, 64};
  p.v_strides = TensorStrides{0, 0, 64};
  CHECK_NOTHROW(fwd_params(p));
  FwdTensors same = test::placeholder_fwd_tensors();
  same.k = same.v = same.q;  // Q, K and V from one buffer
  CHECK_NOTHROW(dispatch::make_fwd_params(reference_config(Family::fwd), p, same));

  // The backward reads O and dO: broadcast ones are accepted there. The gradients of Q, K and V
  // are outputs and would follow the broadcast strides, so they get dense ones.
  p.o_strides = TensorStrides{0, 0, 64};
  p.do_strides = TensorStrides{0, 64, 0};
  p.dq_strides = dense_strides(Layout::bhsd, 4, 16, 64);
  p.dk_strides = p.dv_strides = dense_strides(Layout::bhsd, 2, 24, 64);
  CHECK_NOTHROW(bwd_params(p));
}

TEST_CASE("launch checks: dQ, dK, dV and dO strides of their own reach the kernel parameters",
          "[launch]") {
  FmhaProblem p = small_problem();
  p.dq_strides = TensorStrides{4 * 16 * 80, 16 * 80, 80};
  p.dk_strides = TensorStrides{24 * 2 * 64, 64, 2 * 64};
  p.dv_strides = TensorStrides{2 * 24 * 96, 24 * 96, 96};
  p.do_strides = TensorStrides{16 * 4 * 64, 64, 4 * 64};
  const FmhaBwdParams params = bwd_params(p);
  CHECK(params.dq_strides == FmhaStrides{4 * 16 * 80, 16 * 80, 80});
  CHECK(params.dk_strides == FmhaStrides{24 * 2 * 64, 64, 2 * 64});
  CHECK(params.dv_strides == FmhaStrides{2 * 24 * 96, 24 * 96, 96});
  CHECK(params.do_strides == FmhaStrides{16 * 4 * 64, 64, 4 * 64});
  // The forward tensors keep the layout's dense strides.
  const TensorStrides q = dense_strides(Layout::bhsd, 4, 16, 64);
  CHECK(params.fwd.q_strides == FmhaStrides{q.batch, q.head, q.row});

  // Unset, each gradient follows its tensor.
  p = small_problem();
  p.q_strides = TensorStrides{4 * 16 * 72, 16 * 72, 72};
  p.o_strides = TensorStrides{16 * 4 * 64, 64, 4 * 64};
  const FmhaBwdParams follows = bwd_params(p);
  CHECK(follows.dq_strides == FmhaStrides{4 * 16 * 72, 16 * 72, 72});
  CHECK(follows.do_strides == FmhaStrides{16 * 4 * 64, 64, 4 * 64});
}

TEST_CASE("launch checks: an LSE pointer for a kernel built without the LSE store is refused",
          "[launch]") {
  FmhaKernelConfig c = test::small_config(Family::fwd);
  c.lse = false;
  c = canonicalize(c);
  const FmhaProblem p = small_problem();
  FwdTensors t = test::placeholder_fwd_tensors();
  REQUIRE(t.lse != nullptr);
  const FieldError e = field_error([&] { dispatch::make_fwd_params(c, p, t); });
  CHECK(e.code() == ErrorCode::invalid_argument);
  CHECK(e.field() == "lse");
  CHECK_THAT(e.accepted(), Catch::Contains("null") && Catch::Contains("lse = false"));
  // Without a pointer the call is fine; with the LSE store a null pointer skips it.
  t.lse = nullptr;
  CHECK(dispatch::make_fwd_params(c, p, t).lse == nullptr);
  c.lse = true;
  CHECK(dispatch::make_fwd_params(c, p, t).lse == nullptr);
  t.lse = test::placeholder_fwd_tensors().lse;
  CHECK(dispatch::make_fwd_params(c, p, t).lse == t.lse);
}
