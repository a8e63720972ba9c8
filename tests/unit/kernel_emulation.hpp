// A CPU emulation of the GPU kernels' arithmetic, for testing the accuracy rule without a GPU: it
// must pass the rule, and the faults a broken kernel would make must not.
//
// It shares no code with the per-slice references (reference/slice_*.cpp) and computes
// differently from their lowp in the ways the kernels do: the kernels' masks (common/mask.h), key
// tiles of 64 or 128 with an online softmax in base 2 (the scale folded into log2(e), the running
// max rescaling the sums), unnormalised P rounded to the dtype before P V, products summed in
// k-steps of 16 (as mma.sync m16n8k16 does) and tiles' partial sums added into the accumulators;
// the backward walks key tiles and, inside each, query tiles of 64 rows whose dK / dV partial sums
// are added when the tile ends, and adds each key tile's dQ contribution into an fp32 workspace
// as the atomic mode does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "common/mask.h"
#include "unit/reference_problems.hpp"

namespace fmha_jit::test::emulation {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr int kQueryTile = 64;
inline constexpr int kKStep = 16;

// sum_d a[d] * b[d] in fp32, in k-steps of 16: each step summed on its own, then added.
inline float kstep_dot(const float* a, const float* b, int n) {
  float total = 0;
  for (int d0 = 0; d0 < n; d0 += kKStep) {
    float step = 0;
    for (int d = d0; d < std::min(d0 + kKStep, n); ++d) step += a[d] * b[d];
    total += step;
  }
  return total;
}

inline bool sees(const reference::AttentionShape& s, int i, int j) {
  return fmha_key_visible(s.mask_kind, i, j, s.seqlen_q, s.seqlen_k, s.window_left,
                          s.window_right) != 0;
}

struct ForwardOutput {
  std::vector<float> o;    // Sq x Dv
  std::vector<float> lse;  // Sq
};

// The forward of (b, h) with key tiles of key_tile keys.
inline ForwardOutput forward_slice(const RoundedProblem& p, int b, int h, int key_tile) {
  const reference::AttentionShape& s = p.s;
  const int hk = h / s.group(), dq = s.hdim_q, dv = s.hdim_v;
  const float scale_log2 = static_cast<float>(s.scale) * kLog2e;
  const reference::TensorView q = p.qv(), k = p.kv(), v = p.vv();
  ForwardOutput out{std::vector<float>(static_cast<std::size_t>(s.seqlen_q) * dv),
                    std::vector<float>(static_cast<std::size_t>(s.seqlen_q))};
  std::vector<float> x(static_cast<std::size_t>(key_tile)), acc(static_cast<std::size_t>(dv));
  std::vector<float> tile_pv(static_cast<std::size_t>(dv));
  for (int i = 0; i < s.seqlen_q; ++i) {
    const float* qi = q.row(b, h, i);
    float m = -std::numeric_limits<float>::infinity(), l = 0;
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int j0 = 0; j0 < s.seqlen_k; j0 += key_tile) {
      const int n = std::min(key_tile, s.seqlen_k - j0);
      float tile_max = -std::numeric_limits<float>::infinity();
      for (int t = 0; t < n; ++t) {
        x[t] = sees(s, i, j0 + t) ? kstep_dot(qi, k.row(b, hk, j0 + t), dq) * scale_log2
                                  : -std::numeric_limits<float>::infinity();
        tile_max = std::max(tile_max, x[t]);
      }
      const float m_new = std::max(m, tile_max);
      if (m_new == -std::numeric_limits<float>::infinity()) continue;  // nothing seen yet
      const float rescale = std::exp2(m - m_new);
      float tile_sum = 0;
      std::fill(tile_pv.begin(), tile_pv.end(), 0.f);
      for (int t = 0; t < n; ++t) {
        const float pt = std::exp2(x[t] - m_new);
        tile_sum += pt;
        const float pr = reference::round_to_dtype(pt, p.bf16);
        const float* vj = v.row(b, hk, j0 + t);
        for (int d = 0; d < dv; ++d) tile_pv[d] += pr * vj[d];
      }
      l = l * rescale + tile_sum;
      for (int d = 0; d < dv; ++d) acc[d] = acc[d] * rescale + tile_pv[d];
      m = m_new;
    }
    float* oi = out.o.data() + static_cast<std::size_t>(i) * dv;
    if (l == 0) {
      std::fill(oi, oi + dv, 0.f);
      out.lse[static_cast<std::size_t>(i)] = -std::numeric_limits<float>::infinity();
      continue;
    }
    for (int d = 0; d < dv; ++d) oi[d] = reference::round_to_dtype(acc[d] / l, p.bf16);
    out.lse[static_cast<std::size_t>(i)] = (m + std::log2(l)) / kLog2e;
  }
  return out;
}

struct BackwardOutput {
  std::vector<float> dq;  // group x Sq x Dq
  std::vector<float> dk;  // Sk x Dq
  std::vector<float> dv;  // Sk x Dv
};

// The backward of kv head (b, hk) with key tiles of key_tile keys, from p.o and p.lse.
inline BackwardOutput backward_slice(const RoundedProblem& p, int b, int hk, int key_tile) {
  const reference::AttentionShape& s = p.s;
  const int group = s.group(), dq = s.hdim_q, dv = s.hdim_v, sq = s.seqlen_q;
  const float scale = static_cast<float>(s.scale), scale_log2 = scale * kLog2e;
  const reference::BackwardInputsView in = p.backward_inputs();
  BackwardOutput out{std::vector<float>(static_cast<std::size_t>(group) * sq * dq),
                     std::vector<float>(static_cast<std::size_t>(s.seqlen_k) * dq),
                     std::vector<float>(static_cast<std::size_t>(s.seqlen_k) * dv)};
  // D = rowsum(dO * O) per query row of the group, in k-steps.
  std::vector<float> delta(static_cast<std::size_t>(group) * sq);
  for (int g = 0; g < group; ++g) {
    for (int i = 0; i < sq; ++i) {
      const int h = hk * group + g;
      delta[static_cast<std::size_t>(g) * sq + i] =
          kstep_dot(in.d_o.row(b, h, i), in.o.row(b, h, i), dv);
    }
  }
  std::vector<float> dq_workspace(out.dq.size(), 0.f);  // unscaled fp32 sums
  // dK and dV of the key tile, and one query tile's partial sums of them (added when it ends).
  std::vector<float> dk_acc(static_cast<std::size_t>(key_tile) * dq), dk_part(dk_acc.size());
  std::vector<float> dv_acc(static_cast<std::size_t>(key_tile) * dv), dv_part(dv_acc.size());
  std::vector<float> p_tile(static_cast<std::size_t>(key_tile)), ds_tile(p_tile.size());
  std::vector<float> dq_part(static_cast<std::size_t>(dq));
  for (int j0 = 0; j0 < s.seqlen_k; j0 += key_tile) {
    const int n = std::min(key_tile, s.seqlen_k - j0);
    std::fill(dk_acc.begin(), dk_acc.end(), 0.f);
    std::fill(dv_acc.begin(), dv_acc.end(), 0.f);
    for (int g = 0; g < group; ++g) {
      const int h = hk * group + g;
      for (int i0 = 0; i0 < sq; i0 += kQueryTile) {
        std::fill(dk_part.begin(), dk_part.end(), 0.f);
        std::fill(dv_part.begin(), dv_part.end(), 0.f);
        for (int i = i0; i < std::min(i0 + kQueryTile, sq); ++i) {
          const float* qi = in.q.row(b, h, i);
          const float* doi = in.d_o.row(b, h, i);
          const float lse2 = in.lse[p.lse_index(b, h, i)] * kLog2e;
          const float di = delta[static_cast<std::size_t>(g) * sq + i];
          bool any = false;
          for (int t = 0; t < n; ++t) {
            const int j = j0 + t;
            p_tile[t] = ds_tile[t] = 0;
            if (!sees(s, i, j)) continue;
            any = true;
            const float pt = std::exp2(kstep_dot(qi, in.k.row(b, hk, j), dq) * scale_log2 - lse2);
            const float dpt = kstep_dot(doi, in.v.row(b, hk, j), dv);
            p_tile[t] = pt;
            ds_tile[t] = reference::round_to_dtype(pt * (dpt - di), p.bf16);
          }
          if (!any) continue;
          std::fill(dq_part.begin(), dq_part.end(), 0.f);
          for (int t = 0; t < n; ++t) {
            const float pr = reference::round_to_dtype(p_tile[t], p.bf16);
            const float* kj = in.k.row(b, hk, j0 + t);
            float* dkj = dk_part.data() + static_cast<std::size_t>(t) * dq;
            float* dvj = dv_part.data() + static_cast<std::size_t>(t) * dv;
            for (int d = 0; d < dv; ++d) dvj[d] += pr * doi[d];
            for (int d = 0; d < dq; ++d) {
              dkj[d] += ds_tile[t] * qi[d];
              dq_part[d] += ds_tile[t] * kj[d];
            }
          }
          float* ws = dq_workspace.data() + (static_cast<std::size_t>(g) * sq + i) * dq;
          for (int d = 0; d < dq; ++d) ws[d] += dq_part[d];
        }
        for (std::size_t e = 0; e < dk_acc.size(); ++e) dk_acc[e] += dk_part[e];
        for (std::size_t e = 0; e < dv_acc.size(); ++e) dv_acc[e] += dv_part[e];
      }
    }
    for (int t = 0; t < n; ++t) {
      for (int d = 0; d < dq; ++d) {
        out.dk[static_cast<std::size_t>(j0 + t) * dq + d] =
            reference::round_to_dtype(dk_acc[static_cast<std::size_t>(t) * dq + d] * scale, p.bf16);
      }
      for (int d = 0; d < dv; ++d) {
        out.dv[static_cast<std::size_t>(j0 + t) * dv + d] =
            reference::round_to_dtype(dv_acc[static_cast<std::size_t>(t) * dv + d], p.bf16);
      }
    }
  }
  for (std::size_t e = 0; e < out.dq.size(); ++e) {
    out.dq[e] = reference::round_to_dtype(dq_workspace[e] * scale, p.bf16);
  }
  return out;
}

}  // namespace fmha_jit::test::emulation
