// The Hopper kernels' side of a call: the forward's split tail and causal tile plan, the
// backward's deterministic turns and causal sections, and the tensor maps, added to the common
// parameters before the stages launch. Plans are kept per problem shape for the runner's life.
#include <array>
#include <map>
#include <mutex>
#include <unordered_map>

#include "fmha_jit/device.hpp"
#include "kernels/wgmma_sm90a/bwd_schedule.hpp"
#include "kernels/wgmma_sm90a/family.hpp"
#include "kernels/wgmma_sm90a/fwd_schedule.hpp"
#include "kernels/wgmma_sm90a/params.hpp"
#include "support/lru_map.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {
namespace {

// What the host plans of a launch depend on besides the config (which fixes the mask, the tile
// and the head dimensions): the problem's lengths and head counts, and the SM count.
using PlanShape = std::array<std::int64_t, 6>;
PlanShape plan_shape(const FmhaProblem& problem, int multiprocessors) {
  return {problem.seqlen_q, problem.seqlen_k, problem.nhead_q,
          problem.nhead_k,  problem.batch,    multiprocessors};
}

class WgmmaSm90aLauncher final : public FamilyLauncher {
 public:
  explicit WgmmaSm90aLauncher(const FmhaKernelConfig& canonical) : config_(canonical) {}

  void run_fwd(LaunchContext& launch, const FmhaProblem& problem, FmhaFwdParams& params) override {
    const int sms = launch.multiprocessors();
    const FwdSplitTail split = fwd_split_tail(config_, problem, sms);
    // The split tiles' arrival counters live across launches (each leaves them at zero), so two
    // streams must not share them.
    void* scratch = split.tiles > 0
                        ? launch.scratch("fwd_split_tail", split.workspace_bytes, /*zeroed=*/true)
                        : nullptr;
    FmhaFwdSm90Params hopper = make_fwd_params(config_, params, launch.api(), split, scratch);
    const TileOrder order = tile_order(launch, problem, sms);
    hopper.tile_order = order.table;
    hopper.tile_order_rounds = order.rounds;
    if (order.section_heads > 0) hopper.causal_section_heads = order.section_heads;
    launch.launch_stages(&hopper);
  }

  void run_bwd(LaunchContext& launch, const FmhaProblem& problem, FmhaBwdParams& params) override {
    const int sms = launch.multiprocessors();
    set_bwd_choices(params, config_, problem, sms);
    if (is_causal(config_.mask)) {
      const BwdCausalSections sections = causal_sections(problem, sms);
      if (config_.deterministic) {
        params.det_group_heads = sections.section_pairs;
        params.det_asc_pairs = static_cast<int>(sections.asc_pairs);
        params.det_tail_pairs = sections.tail_pairs;
        params.det_alternate = sections.alternate ? 1 : 0;
        params.det_asc_walk_up = sections.asc_walk_up;
        params.det_asc_walk_from = sections.asc_walk_from;
      } else {
        params.causal_section_pairs = sections.section_pairs;
      }
    }
    FmhaBwdSm90Params hopper = make_bwd_params(config_, params, launch.api());
    launch.launch_stages(&hopper);
  }

 private:
  struct PlannedOrder {
    DeviceBuffer table;  // empty: the kernel's static order
    int rounds = 0;
    int section_heads = 0;  // the static order's sections (FwdTileOrder::static_section_heads)
  };
  // How a launch's CTAs find their tiles: `table` (device memory, `rounds` x SMs), or, where it
  // is null, the kernel's static order in sections of `section_heads` (batch, head) pairs (0:
  // the kernel parameters' default, one section).
  struct TileOrder {
    const int* table = nullptr;
    int rounds = 0;
    int section_heads = 0;
  };

  // The plan of this problem's causal forward on `multiprocessors` SMs, uploaded to the call's
  // context on first use. Which CTA runs a tile changes no arithmetic, so a shape that gets no
  // plan runs in the static order with the same results.
  TileOrder tile_order(LaunchContext& launch, const FmhaProblem& problem, int multiprocessors) {
    // A plan balances the tiles of one shape; a packed batch's tiles differ by their sequence's
    // length, unknown on the host, so it runs the static order (heaviest m-blocks first).
    if (!is_causal(config_.mask) || config_.varlen) return {};
    const PlanShape shape = plan_shape(problem, multiprocessors);
    std::lock_guard lock(mutex_);
    auto& orders = tile_orders_[launch.context()];
    auto it = orders.find(shape);
    if (it == orders.end()) {
      // Past the cap a new shape runs in the static order in L2 sections, without the plan's
      // balance (1-4 % slower than a plan on causal rows; docs/METHOD.md, "Hopper forward launch
      // order"), instead of holding one more plan for the runner's life. So does a shape first
      // seen inside a graph capture, where uploading the plan would end the capture; the graph
      // keeps that order, a later eager call of the shape makes the plan.
      if (orders.size() >= kMaxTileOrders || launch.capturing()) {
        return {nullptr, 0, fwd_l2_section_heads(problem)};
      }
      const FwdTileOrder plan = fwd_tile_order(config_, problem, multiprocessors);
      auto planned = std::make_unique<PlannedOrder>();
      if (!plan.order.empty()) {
        planned->table = DeviceBuffer(plan.order.size() * sizeof(int));
        planned->table.upload(plan.order.data(), plan.order.size() * sizeof(int));
        planned->rounds = plan.rounds;
      }
      planned->section_heads = plan.static_section_heads;
      it = orders.emplace(shape, std::move(planned)).first;
    }
    const PlannedOrder& p = *it->second;
    return {static_cast<const int*>(p.table.data()), p.rounds, p.section_heads};
  }

  // The causal backward's sections on `multiprocessors` SMs (bwd_causal_sections), modelled once
  // per problem shape while it stays among the last kMaxCausalSections shapes (a model of up to
  // kBwdMaxModelledCtas CTAs costs milliseconds, a launch's worth at S 2048). Always the plan,
  // never a fallback: the deterministic mode's order of additions follows from it, so a shape
  // must get the same plan whatever shapes the process saw before.
  BwdCausalSections causal_sections(const FmhaProblem& problem, int multiprocessors) {
    const PlanShape shape = plan_shape(problem, multiprocessors);
    std::lock_guard lock(mutex_);
    return causal_sections_.get_or_make(
        shape, [&] { return bwd_causal_sections(config_, problem, multiprocessors); });
  }

  const FmhaKernelConfig config_;
  std::mutex mutex_;
  // The causal forward's tile plans per context (device memory; read-only once uploaded, so every
  // stream shares them). Never erased, since a stream may still read a table, and at most
  // kMaxTileOrders shapes per context: a server that sees every prompt length would otherwise add
  // a table per length without bound. A table is rounds x SMs ints (16 KB at 2048 tiles on 132
  // SMs).
  static constexpr std::size_t kMaxTileOrders = 128;
  std::unordered_map<void*, std::map<PlanShape, std::unique_ptr<PlannedOrder>>> tile_orders_;
  static constexpr std::size_t kMaxCausalSections = 256;
  support::LruMap<PlanShape, BwdCausalSections> causal_sections_{kMaxCausalSections};
};

}  // namespace

std::unique_ptr<FamilyLauncher> make_launcher(const FmhaKernelConfig& canonical) {
  return std::make_unique<WgmmaSm90aLauncher>(canonical);
}

}  // namespace fmha_jit::kernels::wgmma_sm90a
