// Which keys a query row sees, written from the definitions of the mask kinds and independent of
// the kernels' own mask code (templates/common/mask.h), so that a wrong mask in the kernels cannot
// be mirrored here. tests/unit/test_cpu_reference.cpp checks that the two agree on many shapes.
//
// Query row i in [0, Sq), key j in [0, Sk). The bottom-right alignment puts row i's diagonal at
// key i + (Sk - Sq), so the last query row lines up with the last key (FlashAttention's
// convention):
//   none                   every key
//   causal_top_left        j <= i
//   causal_bottom_right    j <= i + Sk - Sq
//   sliding_window         i + Sk - Sq - window_left <= j <= i + Sk - Sq + window_right, a side
//                          whose window is -1 unbounded
// A row may see no key at all (e.g. bottom-right with Sq > Sk): its O is 0 and its LSE -inf.
#pragma once

#include "shape.hpp"

namespace fmha_jit::reference {

// The element-wise definition: does query row i see key j?
bool key_visible(const AttentionShape& s, int i, int j);

// Indices [lo, hi); empty when lo >= hi.
struct IndexSpan {
  int lo = 0;
  int hi = 0;
  bool empty() const { return lo >= hi; }
};

// The smallest span holding every key that row i sees, found by evaluating key_visible from both
// ends. Keys inside it are not assumed visible: callers still ask key_visible for each one, so the
// span only bounds the work.
IndexSpan visible_key_span(const AttentionShape& s, int i);
// The smallest span holding every query row that sees key j, in the same way.
IndexSpan visible_query_span(const AttentionShape& s, int j);

}  // namespace fmha_jit::reference
