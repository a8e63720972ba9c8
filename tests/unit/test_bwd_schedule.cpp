// The Hopper backward's stage-2 schedule (templates/bwd/fmha_bwd_sm90a_schedule.h), run on the
// host. The device functions that give each CTA its key tile and its list of (query head, query
// tile) visits, and that count the deterministic mode's turns, are compiled here through
// support/device_shim.hpp and called for every CTA of a launch, with the parameters the runner
// would pass (dispatch::make_bwd_params, set_bwd_device_choices for an SM count). Checked:
//   - every key tile runs once (or as parts that cover its visits once), and visits exactly the
//     (query head, query tile) pairs a brute force over the mask's rows says it must;
//   - in the deterministic mode the turns at each query tile are 0 .. n - 1 over the key tiles
//     visiting it, in decreasing key tiles (increasing on an ascending chain), and the launch
//     finishes: a simulation that runs the CTAs in launch order on a number of SMs, each adding
//     in its turn only, never stalls.
// A GPU run of the same code cannot show a deadlock it does not hit, nor a wasted visit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "dispatcher/launch.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "kernels/registry.hpp"
#include "support/test_support.hpp"
// Last before the device code: it defines __CUDACC__.
#include "support/device_shim.hpp"
// After the shim: device code.
#include "bwd/fmha_bwd_sm90a_schedule.h"
#include "kernels/common/key_tiles.hpp"
#include "kernels/wgmma_sm90a/bwd_schedule.hpp"

using namespace fmha_jit;

namespace {

// What fmha_bwd_sm90a_work reads of the kernels' shapes (FmhaBwdSm90aShape,
// FmhaBwdSm90aHd256Shape): the tile and whether the atomic mode may split.
template <int kM, int kN, int kSplit>
struct ScheduleShape {
  enum { kBlockM = kM, kBlockN = kN, kSplitTail = kSplit };
};

struct Problem {
  int hdim, sq, sk, hq, hk, batch;
  MaskKind mask;
  int window_left = -1, window_right = -1;
};

std::string describe(const Problem& p, bool det, int sms) {
  std::ostringstream s;
  s << "hdim " << p.hdim << " Sq " << p.sq << " Sk " << p.sk << " heads " << p.hq << ":" << p.hk
    << " batch " << p.batch << " mask " << to_string(p.mask) << " (" << p.window_left << ", "
    << p.window_right << ")" << (det ? " deterministic" : " atomic") << " on " << sms << " SMs";
  return s.str();
}

// Query tile m sees key tile n: some valid row of m sees some key of n (the mask's own rule).
std::set<std::pair<int, int>> visible_tiles(const Problem& p, int block_m, int block_n) {
  std::set<std::pair<int, int>> seen;
  for (int i = 0; i < p.sq; ++i) {
    const FmhaKeyRange r =
        fmha_visible_keys(static_cast<int>(p.mask), i, p.sq, p.sk, p.window_left, p.window_right);
    if (r.hi <= r.lo) continue;
    for (int n = r.lo / block_n; n <= (r.hi - 1) / block_n; ++n) seen.insert({i / block_m, n});
  }
  return seen;
}

struct Cta {
  int linear;
  FmhaBwdSm90aWork w;
  FmhaBwdSm90aWalk walk;
  std::vector<std::tuple<int, int, int>> visits;  // (query head, query tile, turn)
};

// The up-down walk of the deterministic causal chains (FmhaBwdSm90aWork), built from its
// definition over a brute-force owner of each query tile (the highest key tile that sees it):
// W(n) = [the first u of n's own cells] W(n + 1) [n's other own cells], own cells query tile by
// query tile with the heads innermost, u clamped as the kernel clamps it.
std::vector<std::pair<int, int>> expected_walk(const std::vector<int>& owner, int n, int top,
                                               int hk, int group, int up) {
  if (n > top) return {};
  std::vector<std::pair<int, int>> own;
  for (std::size_t m = 0; m < owner.size(); ++m) {
    if (owner[m] != n) continue;
    for (int g = 0; g < group; ++g) own.push_back({hk * group + g, static_cast<int>(m)});
  }
  const std::size_t first = std::min(own.size(), static_cast<std::size_t>(up));
  std::vector<std::pair<int, int>> walk(own.begin(), own.begin() + static_cast<long>(first));
  const auto rest = expected_walk(owner, n + 1, top, hk, group, up);
  walk.insert(walk.end(), rest.begin(), rest.end());
  walk.insert(walk.end(), own.begin() + static_cast<long>(first), own.end());
  return walk;
}

// section_pairs > 0 replaces the runner's causal sections (its model's choice, which the small
// problems here leave at 1): the atomic mode's causal_section_pairs, or the deterministic mode's
// det_group_heads with the last group's pairs ascending (det_asc_pairs); up_cells >= 0 replaces
// det_up_cells.
// tail_pairs > 0 (deterministic) replaces the planned tail: one pair per group but the last
// tail_pairs pairs, ascending (det_tail_pairs, det_asc_pairs). alternate: every odd pair ascends
// too (det_alternate), and those from asc_walk_from on walk with asc_walk_up cells first when it
// is > 0 (det_asc_walk_up, det_asc_walk_from).
template <class Shape, int kMask, bool kDet>
void check_launch(const Problem& prob, int sms, int section_pairs = 0, int up_cells = -1,
                  int tail_pairs = 0, bool alternate = false, int asc_walk_up = 0,
                  int asc_walk_from = 0) {
  INFO(describe(prob, kDet, sms) << ", sections of " << section_pairs << " pairs, " << up_cells
                                 << " cells up, a tail of " << tail_pairs
                                 << (alternate ? ", alternating" : "") << ", ascending walks of "
                                 << asc_walk_up << " from pair " << asc_walk_from);
  FmhaKernelConfig c;
  c.family = Family::bwd;
  c.arch = "sm_90";
  c.hdim_q = c.hdim_v = prob.hdim;
  c.mask = prob.mask;
  c.deterministic = kDet;
  c = canonicalize(c);
  REQUIRE(c.impl == KernelImpl::wgmma_sm90a);
  REQUIRE(c.block_m == Shape::kBlockM);
  REQUIRE(c.block_n == Shape::kBlockN);
  const FmhaProblem fp = test::sized_problem(prob.batch, prob.hq, prob.hk, prob.sq, prob.sk,
                                             prob.hdim, prob.window_left, prob.window_right);
  // The parameters as the runner builds them (dispatcher/runner.cpp), then the launcher's choices
  // (kernels/wgmma_sm90a/launcher.cpp).
  FmhaBwdParams params = dispatch::make_bwd_params(c, fp, test::placeholder_bwd_tensors(),
                                                   test::placeholder_workspace());
  const FmhaFwdParams& f = params.fwd;
  kernels::wgmma_sm90a::set_bwd_choices(params, c, fp, sms);
  if (section_pairs > 0 && !kDet) params.causal_section_pairs = section_pairs;
  if (section_pairs > 0 && kDet) {
    const int pairs = prob.hk * prob.batch;
    params.det_group_heads = section_pairs;
    params.det_asc_pairs = pairs - (pairs - 1) / section_pairs * section_pairs;
  }
  if (up_cells >= 0) params.det_up_cells = up_cells;
  if (tail_pairs > 0 && kDet) {
    params.det_group_heads = 1;
    params.det_tail_pairs = tail_pairs;
    params.det_asc_pairs = tail_pairs;
  }
  if (alternate && kDet) {
    params.det_alternate = 1;
    params.det_asc_walk_up = asc_walk_up;
    params.det_asc_walk_from = asc_walk_from;
  }

  // The grid as the plan launches it.
  const auto stages = kernels::plan_stages(c, fp, sms);
  const kernels::StageLaunch& launch = stages[1];
  const int num_n = static_cast<int>(kernels::key_tiles(c, fp));
  const int num_m = (prob.sq + Shape::kBlockM - 1) / Shape::kBlockM;
  std::vector<Cta> ctas;
  for (unsigned z = 0; z < launch.grid.z; ++z) {
    for (unsigned y = 0; y < launch.grid.y; ++y) {
      for (unsigned x = 0; x < launch.grid.x; ++x) {
        blockIdx = {x, y, z};
        Cta cta{static_cast<int>(x + launch.grid.x * (y + launch.grid.y * z)),
                fmha_bwd_sm90a_work<Shape, kMask, kDet>(params),
                {},
                {}};
        // As the kernels do: thread 0 plans the walk (deterministic kernels only), and every
        // role visits through fmha_bwd_sm90a_visit.
        cta.walk = fmha_bwd_sm90a_plan_walk<kMask, Shape::kBlockM, Shape::kBlockN>(
            cta.w, f, kDet ? fmha_bwd_sm90a_walk_up(params, cta.w) : 0);
        const bool walks = cta.walk[FmhaBwdSm90aWalk::kUp] > 0;
        for (int it = 0; it < cta.w.num_iters; ++it) {
          const FmhaBwdSm90aVisit v =
              fmha_bwd_sm90a_visit<Shape::kBlockN / Shape::kBlockM>(cta.w, cta.walk, walks, it);
          const int turn = kDet ? fmha_bwd_sm90a_dq_turn<kMask, Shape::kBlockM, Shape::kBlockN>(
                                      f, cta.w, v.m_block)
                                : 0;
          cta.visits.emplace_back(v.head, v.m_block, turn);
        }
        ctas.push_back(std::move(cta));
      }
    }
  }

  // Coverage: per (batch, kv head, key tile), the visits of its CTA(s), against the mask.
  const auto visible = visible_tiles(prob, Shape::kBlockM, Shape::kBlockN);
  std::map<std::tuple<int, int, int>, std::multiset<std::pair<int, int>>> visits;
  std::map<std::tuple<int, int, int>, int> whole, parts;
  for (const Cta& cta : ctas) {
    REQUIRE(cta.w.n_block >= 0);
    REQUIRE(cta.w.n_block < num_n);
    const auto tile = std::make_tuple(cta.w.b, cta.w.hk, cta.w.n_block);
    ++(cta.w.part < 0 ? whole : parts)[tile];
    for (const auto& [h, m, turn] : cta.visits) visits[tile].insert({h, m});
  }
  const int group = prob.hq / prob.hk;
  for (int b = 0; b < prob.batch; ++b) {
    for (int hk = 0; hk < prob.hk; ++hk) {
      for (int n = 0; n < num_n; ++n) {
        const auto tile = std::make_tuple(b, hk, n);
        std::multiset<std::pair<int, int>> expected;
        for (int m = 0; m < num_m; ++m) {
          if (!visible.count({m, n})) continue;
          for (int g = 0; g < group; ++g) expected.insert({hk * group + g, m});
        }
        INFO("key tile " << n << " of kv head " << hk << ", batch " << b);
        CHECK(visits[tile] == expected);
        // One CTA, or the split's parts: even a tile no query sees writes its zero dK and dV.
        CHECK(((whole[tile] == 1 && parts[tile] == 0) ||
               (whole[tile] == 0 && parts[tile] == params.split_parts && params.split_parts > 0)));
      }
    }
  }
  const bool sectioned =
      !kDet && (kMask == FMHA_MASK_CAUSAL_TOP_LEFT || kMask == FMHA_MASK_CAUSAL_BOTTOM_RIGHT);
  if (sectioned) {
    // Sections: consecutive runs of linear indices holding all key tiles of
    // causal_section_pairs pairs (fewer in the last), in increasing key tiles, and the pairs in
    // order from one section to the next.
    REQUIRE(launch.grid.y == 1);
    const int pairs = prob.hk * prob.batch;
    const int per = params.causal_section_pairs;
    for (int first = 0; first < pairs; first += per) {
      const int in_section = std::min(per, pairs - first);
      std::map<int, int> seen;  // pair -> key tiles
      int previous_n = 0;
      for (int l = first * num_n; l < (first + in_section) * num_n; ++l) {
        const FmhaBwdSm90aWork& w = ctas[static_cast<std::size_t>(l)].w;
        const int pair = w.b * prob.hk + w.hk;
        INFO("linear index " << l);
        CHECK(pair >= first);
        CHECK(pair < first + in_section);
        CHECK(w.n_block >= previous_n);
        previous_n = w.n_block;
        ++seen[pair];
      }
      CHECK(static_cast<int>(seen.size()) == in_section);
      for (const auto& [pair, n] : seen) CHECK(n == num_n);
    }
  }
  if (!kDet) return;

  // The up-down walk: where det_up_cells asks for it, every decreasing causal chain takes it
  // (the kernel's own check of the tile structure never falls back on these shapes), in exactly
  // the order of its definition; every other CTA keeps its order.
  constexpr bool kCausal =
      kMask == FMHA_MASK_CAUSAL_TOP_LEFT || kMask == FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
  std::vector<int> owner(static_cast<std::size_t>(num_m), -1);
  for (const auto& [m, n] : visible) {
    owner[static_cast<std::size_t>(m)] = std::max(owner[static_cast<std::size_t>(m)], n);
  }
  const int top = *std::max_element(owner.begin(), owner.end());
  const int walk_up = std::min(params.det_up_cells, group * (Shape::kBlockN / Shape::kBlockM));
  std::map<std::tuple<int, int, int>, const Cta*> by_tile;
  int walks = 0;
  for (const Cta& cta : ctas) {
    by_tile[std::make_tuple(cta.w.b, cta.w.hk, cta.w.n_block)] = &cta;
    // An ascending chain's CTA walks only where the host asks for it (det_asc_walk_up), with its
    // own count of cells first.
    const int up_here = cta.w.ascending ? std::min(params.det_asc_walk_up,
                                                   group * (Shape::kBlockN / Shape::kBlockM))
                                        : walk_up;
    const bool walks_here = kCausal && walk_up > 0 && up_here > 0 && cta.w.m_count > 0 &&
                            (!cta.w.ascending || cta.w.asc_walks);
    INFO("key tile " << cta.w.n_block << " of kv head " << cta.w.hk << ", batch " << cta.w.b);
    REQUIRE(cta.walk[FmhaBwdSm90aWalk::kUp] == (walks_here ? up_here : 0));
    if (!walks_here) continue;
    ++walks;
    const auto expected = expected_walk(owner, cta.w.n_block, top, cta.w.hk, group, up_here);
    std::vector<std::pair<int, int>> walked;
    for (const auto& [h, m, turn] : cta.visits) walked.push_back({h, m});
    CHECK(walked == expected);
  }
  // What the walk is for: a cell that key tiles n and n + 1 both visit comes u(n) iterations
  // later in n's walk (u(n) = min(u, n's own cells)).
  for (const auto& [tile, cta] : by_tile) {
    const auto next =
        by_tile.find(std::make_tuple(std::get<0>(tile), std::get<1>(tile), std::get<2>(tile) + 1));
    if (cta->walk[FmhaBwdSm90aWalk::kUp] == 0 || next == by_tile.end() ||
        next->second->walk[FmhaBwdSm90aWalk::kUp] == 0)
      continue;
    std::map<std::pair<int, int>, int> at;
    for (std::size_t i = 0; i < next->second->visits.size(); ++i) {
      const auto& [h, m, turn] = next->second->visits[i];
      at[{h, m}] = static_cast<int>(i);
    }
    const int own = static_cast<int>(cta->visits.size() - next->second->visits.size());
    for (std::size_t i = 0; i < cta->visits.size(); ++i) {
      const auto& [h, m, turn] = cta->visits[i];
      const auto shared = at.find({h, m});
      if (shared == at.end()) continue;
      INFO("key tile " << cta->w.n_block << ", query head " << h << ", query tile " << m);
      CHECK(static_cast<int>(i) - shared->second ==
            std::min(cta->walk[FmhaBwdSm90aWalk::kUp], own));
    }
  }
  const bool descends = prob.hk * prob.batch > params.det_asc_pairs;  // some pair's chain
  if (kCausal && walk_up > 0 && top >= 0 && descends) CHECK(walks > 0);

  // Turns: at each (batch, query head, query tile) the visitors' turns are 0 .. n - 1, in the
  // chain's order of key tiles (one order per (kv head, batch) pair).
  std::map<std::tuple<int, int, int>, std::map<int, int>> turns;  // turn -> key tile
  std::map<std::pair<int, int>, bool> ascending;                  // per (batch, kv head)
  for (const Cta& cta : ctas) {
    const auto [it, fresh] = ascending.insert({{cta.w.b, cta.w.hk}, cta.w.ascending});
    CHECK((fresh || it->second == cta.w.ascending));
    for (const auto& [h, m, turn] : cta.visits) {
      auto& at = turns[std::make_tuple(cta.w.b, h, m)];
      INFO("query tile " << m << " of head " << h << ", key tile " << cta.w.n_block);
      CHECK(at.count(turn) == 0);
      at[turn] = cta.w.n_block;
    }
  }
  for (const auto& [key, at] : turns) {
    const bool up = ascending[{std::get<0>(key), std::get<1>(key) / group}];
    int expect = 0, previous = -1;
    for (const auto& [turn, n] : at) {
      CHECK(turn == expect++);
      if (previous >= 0) CHECK((up ? n > previous : n < previous));
      previous = n;
    }
  }

  // Launch-order simulation: `sms` resident CTAs at a time, admitted in linear order; each adds
  // at its next visit when the semaphore equals its turn. A pass without progress is a deadlock.
  std::vector<const Cta*> order(ctas.size());
  for (const Cta& cta : ctas) order[static_cast<std::size_t>(cta.linear)] = &cta;
  std::map<std::tuple<int, int, int>, int> sem;
  std::vector<std::pair<const Cta*, std::size_t>> resident;
  std::size_t next = 0, done = 0;
  while (done < order.size()) {
    while (resident.size() < static_cast<std::size_t>(sms) && next < order.size())
      resident.push_back({order[next++], 0});
    bool progress = false;
    for (auto& [cta, pos] : resident) {
      while (pos < cta->visits.size()) {
        const auto& [h, m, turn] = cta->visits[pos];
        int& count = sem[std::make_tuple(cta->w.b, h, m)];
        if (count != turn) break;
        ++count;
        ++pos;
        progress = true;
      }
    }
    const auto finished = std::remove_if(resident.begin(), resident.end(), [](const auto& r) {
      return r.second == r.first->visits.size();
    });
    done += static_cast<std::size_t>(resident.end() - finished);
    progress = progress || finished != resident.end();
    resident.erase(finished, resident.end());
    if (!progress) {
      FAIL("deadlock: " << resident.size() << " resident CTAs wait, " << done << " of "
                        << order.size() << " done");
    }
  }
}

template <class Shape, bool kDet>
void check_masks(const Problem& base, int sms) {
  Problem p = base;
  p.mask = MaskKind::none;
  check_launch<Shape, FMHA_MASK_NONE, kDet>(p, sms);
  p.mask = MaskKind::causal_top_left;
  check_launch<Shape, FMHA_MASK_CAUSAL_TOP_LEFT, kDet>(p, sms);
  p.mask = MaskKind::causal_bottom_right;
  check_launch<Shape, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, kDet>(p, sms);
  p.mask = MaskKind::sliding_window;
  for (auto [left, right] : std::vector<std::pair<int, int>>{{20, 7}, {100, 0}, {-1, 3}}) {
    p.window_left = left;
    p.window_right = right;
    check_launch<Shape, FMHA_MASK_SLIDING_WINDOW, kDet>(p, sms);
  }
}

template <bool kDet>
void check_hdims(Problem p, int sms) {
  p.hdim = 64;
  check_masks<ScheduleShape<128, 128, 1>, kDet>(p, sms);
  p.hdim = 128;
  check_masks<ScheduleShape<64, 128, 1>, kDet>(p, sms);
  p.hdim = 256;
  check_masks<ScheduleShape<64, 64, 0>, kDet>(p, sms);
}

const std::vector<Problem> kProblems = {
    // hdim and mask are set per check; odd lengths leave partial tiles on both sides.
    {0, 1, 1, 8, 1, 1, MaskKind::none},       {0, 17, 45, 4, 2, 2, MaskKind::none},
    {0, 130, 77, 4, 2, 2, MaskKind::none},    {0, 300, 260, 4, 2, 2, MaskKind::none},
    {0, 1000, 999, 8, 1, 3, MaskKind::none},  {0, 777, 1000, 8, 2, 3, MaskKind::none},
    {0, 2500, 2500, 10, 5, 2, MaskKind::none}};

}  // namespace

TEST_CASE("bwd schedule: every key tile visits exactly its query tiles (atomic mode)",
          "[schedule]") {
  for (int sms : {132, 7}) {
    for (const Problem& p : kProblems) check_hdims<false>(p, sms);
  }
}

TEST_CASE("bwd schedule: the deterministic turns order each tile's adds and never deadlock",
          "[schedule]") {
  for (int sms : {132, 7, 1}) {
    for (const Problem& p : kProblems) check_hdims<true>(p, sms);
  }
}

TEST_CASE("bwd schedule: the atomic causal sections cover every key tile once, largest first",
          "[schedule]") {
  // 4 and 6 pairs, in sections of 1, 2, 3 (a partial last one) and all of them.
  for (const Problem& base : {Problem{0, 300, 260, 4, 2, 2, MaskKind::none},
                              Problem{0, 777, 1000, 8, 2, 3, MaskKind::none}}) {
    for (int per : {1, 2, 3, base.hk * base.batch}) {
      Problem p = base;
      p.mask = MaskKind::causal_top_left;
      p.hdim = 128;
      check_launch<ScheduleShape<64, 128, 1>, FMHA_MASK_CAUSAL_TOP_LEFT, false>(p, 132, per);
      p.hdim = 256;
      check_launch<ScheduleShape<64, 64, 0>, FMHA_MASK_CAUSAL_TOP_LEFT, false>(p, 7, per);
      p.mask = MaskKind::causal_bottom_right;
      p.hdim = 64;
      check_launch<ScheduleShape<128, 128, 1>, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, false>(p, 132, per);
    }
  }
}

TEST_CASE(
    "bwd schedule: the deterministic causal up-down walk keeps u iterations between a "
    "cell's key tiles",
    "[schedule]") {
  // Every u from one cell to more than a key tile owns (clamped), with MHA (whose order the
  // runner leaves head-major) and GQA, both causal masks, every tile shape, the turn and deadlock
  // checks of check_launch included.
  for (const Problem& base : kProblems) {
    for (int up : {1, 2, 3, 5, 64}) {
      Problem p = base;
      p.mask = MaskKind::causal_top_left;
      p.hdim = 128;
      check_launch<ScheduleShape<64, 128, 1>, FMHA_MASK_CAUSAL_TOP_LEFT, true>(p, 132, 0, up);
      p.hdim = 64;
      check_launch<ScheduleShape<128, 128, 1>, FMHA_MASK_CAUSAL_TOP_LEFT, true>(p, 7, 0, up);
      p.mask = MaskKind::causal_bottom_right;
      p.hdim = 256;
      check_launch<ScheduleShape<64, 64, 0>, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, true>(p, 132, 0, up);
      p.hdim = 128;
      check_launch<ScheduleShape<64, 128, 1>, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, true>(p, 1, 0, up);
    }
  }
}

TEST_CASE("bwd schedule: deterministic causal sections order each tile's adds, no deadlock",
          "[schedule]") {
  // Sections of 2 and 3 pairs (a partial last one) and all of them, the last section ascending.
  for (const Problem& base : {Problem{0, 300, 260, 4, 2, 2, MaskKind::none},
                              Problem{0, 777, 1000, 8, 2, 3, MaskKind::none}}) {
    for (int per : {2, 3, base.hk * base.batch}) {
      for (int sms : {132, 7, 1}) {
        Problem p = base;
        p.mask = MaskKind::causal_top_left;
        p.hdim = 128;
        check_launch<ScheduleShape<64, 128, 1>, FMHA_MASK_CAUSAL_TOP_LEFT, true>(p, sms, per);
        p.hdim = 256;
        check_launch<ScheduleShape<64, 64, 0>, FMHA_MASK_CAUSAL_TOP_LEFT, true>(p, sms, per);
        p.mask = MaskKind::causal_bottom_right;
        p.hdim = 64;
        check_launch<ScheduleShape<128, 128, 1>, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, true>(p, sms, per);
      }
    }
  }
}

TEST_CASE("bwd schedule: a deterministic tail section over walking chains orders each tile's adds",
          "[schedule]") {
  // GQA chains walk one pair after another; the last 1, 2, 3 or all pairs share one ascending
  // section (or none: tail 0), the lead pairs' chains all decreasing or alternating, the
  // ascending ones walking from some pair on or not. Turn order, the walks and the deadlock
  // simulation as in check_launch.
  for (const Problem& base : {Problem{0, 300, 260, 4, 2, 2, MaskKind::none},
                              Problem{0, 777, 1000, 8, 2, 3, MaskKind::none}}) {
    for (int tail : {0, 1, 2, 3, base.hk * base.batch}) {
      for (auto [alternate, up, from] : std::vector<std::tuple<bool, int, int>>{
               {false, 0, 0}, {true, 0, 0}, {true, 2, 0}, {true, 5, 3}, {true, 9, 1}}) {
        if (tail == 0 && !alternate) continue;  // check_launch's default plan (other cases)
        for (int sms : {132, 7, 1}) {
          Problem p = base;
          p.mask = MaskKind::causal_top_left;
          p.hdim = 128;
          check_launch<ScheduleShape<64, 128, 1>, FMHA_MASK_CAUSAL_TOP_LEFT, true>(
              p, sms, 0, -1, tail, alternate, up, from);
          p.hdim = 256;
          check_launch<ScheduleShape<64, 64, 0>, FMHA_MASK_CAUSAL_TOP_LEFT, true>(
              p, sms, 0, -1, tail, alternate, up, from);
          p.mask = MaskKind::causal_bottom_right;
          p.hdim = 64;
          check_launch<ScheduleShape<128, 128, 1>, FMHA_MASK_CAUSAL_BOTTOM_RIGHT, true>(
              p, sms, 0, -1, tail, alternate, up, from);
        }
      }
    }
  }
}

TEST_CASE("bwd schedule: the split last wave covers each split key tile's visits once",
          "[schedule]") {
  // 2048 key tiles at hdim 128 S 8192 2 x 16 heads: a partial last wave the plan splits.
  const Problem p{128, 8192, 8192, 16, 16, 2, MaskKind::none};
  FmhaKernelConfig c;
  c.family = Family::bwd;
  c.arch = "sm_90";
  c.hdim_q = c.hdim_v = 128;
  FmhaProblem fp;
  fp.batch = 2;
  fp.nhead_q = fp.nhead_k = 16;
  fp.seqlen_q = fp.seqlen_k = 8192;
  fp.hdim_q = fp.hdim_v = 128;
  REQUIRE(kernels::wgmma_sm90a::bwd_split_tail(canonicalize(c), fp, 132).tiles > 0);
  check_launch<ScheduleShape<64, 128, 1>, FMHA_MASK_NONE, false>(p, 132);
}
