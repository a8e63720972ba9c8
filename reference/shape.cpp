#include "shape.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace fmha_jit::reference {
namespace {

[[noreturn]] void bad_field(const char* field, long long value, const std::string& accepted) {
  throw std::invalid_argument(std::string("attention reference: ") + field + " = " +
                              std::to_string(value) + "; accepted: " + accepted);
}

}  // namespace

Strides dense_strides(Layout layout, int nhead, int seqlen, int hdim) {
  const int64_t h = nhead, s = seqlen, d = hdim;
  if (layout == Layout::bhsd) return Strides{h * s * d, s * d, d};
  return Strides{s * h * d, d, h * d};
}

size_t dense_size(int batch, int nhead, int seqlen, int hdim) {
  return static_cast<size_t>(batch) * static_cast<size_t>(nhead) * static_cast<size_t>(seqlen) *
         static_cast<size_t>(hdim);
}

void validate(const AttentionShape& s) {
  const std::pair<const char*, int> sizes[] = {{"batch", s.batch},       {"nhead_q", s.nhead_q},
                                               {"nhead_k", s.nhead_k},   {"seqlen_q", s.seqlen_q},
                                               {"seqlen_k", s.seqlen_k}, {"hdim_q", s.hdim_q},
                                               {"hdim_v", s.hdim_v}};
  for (const auto& [field, value] : sizes) {
    if (value <= 0) bad_field(field, value, "a positive number");
  }
  if (s.nhead_q % s.nhead_k != 0) {
    bad_field("nhead_k", s.nhead_k, "a divisor of nhead_q = " + std::to_string(s.nhead_q));
  }
  if (s.mask_kind < kMaskNone || s.mask_kind > kMaskSlidingWindow) {
    bad_field("mask_kind", s.mask_kind,
              "0 (none), 1 (causal top-left), 2 (causal bottom-right), 3 (sliding window)");
  }
  if (s.window_left < -1) bad_field("window_left", s.window_left, "-1 (unbounded) or >= 0");
  if (s.window_right < -1) bad_field("window_right", s.window_right, "-1 (unbounded) or >= 0");
  if (!(std::isfinite(s.softcap) && s.softcap >= 0)) {
    throw std::invalid_argument("attention reference: softcap = " + std::to_string(s.softcap) +
                                "; accepted: a finite positive number, or 0 (no softcap)");
  }
}

}  // namespace fmha_jit::reference
