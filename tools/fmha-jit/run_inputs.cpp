#include "tools/fmha-jit/run_inputs.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "fmha_jit/error.hpp"

namespace fmha_jit::cli {
namespace {
namespace fs = std::filesystem;

// A folder's cu_seqlens_*.npy must describe the batch the flags describe: the flags size the
// tensors, and a file from another batch would have them read with the wrong sequence bounds.
void check_cu_seqlens_files(const fs::path& dir, const FmhaProblem& p) {
  std::error_code ec;
  for (const auto& [file, cu] : {std::pair{"cu_seqlens_q.npy", p.cu_seqlens_q_host},
                                 std::pair{"cu_seqlens_k.npy", p.cu_seqlens_k_host}}) {
    if (!fs::exists(dir / file, ec)) continue;
    if (!p.varlen()) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("{}: {} describes a packed batch; accepted: its sequence lengths "
                              "as --seqlens-q (and --seqlens-k), which size the inputs",
                              dir.string(), file));
    }
    const auto got = read_int32_input(dir, file, cu_seqlens_shape(p));
    if (!std::equal(got.begin(), got.end(), cu)) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("{}: [{}] is not the batch of the flags; accepted: [{}] (from "
                              "--seqlens-q / --seqlens-k)",
                              (dir / file).string(), fmt::join(got, ", "),
                              fmt::join(cu, cu + p.batch + 1, ", ")));
    }
  }
}

}  // namespace

Inputs load_inputs(const ProblemOptions& options, const std::string& inputs, const FmhaProblem& p,
                   Family family, bool bf16) {
  Inputs in;
  if (inputs.empty()) {
    const std::uint32_t seed = options.seed;
    in.q = random_tensor(p.q_elements(), bf16, seed);
    in.k = random_tensor(p.k_elements(), bf16, seed + 1);
    in.v = random_tensor(p.v_elements(), bf16, seed + 2);
    if (family == Family::bwd) in.d_o = random_tensor(p.o_elements(), bf16, seed + 3);
    if (options.sinks) in.sinks = random_floats(p.nhead_q, seed + 4);
    return in;
  }
  const fs::path dir = inputs;
  const std::string layout(to_string(p.layout));
  check_cu_seqlens_files(dir, p);
  std::error_code ec;
  if (options.sinks) {
    if (!fs::exists(dir / "sinks.npy", ec)) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("{}: no sinks.npy; --sinks with --inputs reads the sink logits "
                              "from it: float32 {} = ({})",
                              dir.string(), sinks_shape(p).names, p.nhead_q));
    }
    in.sinks = read_input(dir, "sinks.npy", sinks_shape(p), layout);
  } else if (fs::exists(dir / "sinks.npy", ec)) {
    spdlog::warn("{}: sinks.npy is not read without --sinks", dir.string());
  }
  in.q = round_to_dtype(read_input(dir, "q.npy", q_shape(p), layout), bf16);
  in.k = round_to_dtype(read_input(dir, "k.npy", k_shape(p), layout), bf16);
  in.v = round_to_dtype(read_input(dir, "v.npy", v_shape(p), layout), bf16);
  if (family == Family::fwd) return in;
  in.d_o = round_to_dtype(read_input(dir, "do.npy", o_shape(p), layout), bf16);
  const bool have_o = fs::exists(dir / "o.npy", ec), have_lse = fs::exists(dir / "lse.npy", ec);
  // O and LSE must come from the same forward: one without the other cannot be completed.
  if (have_o != have_lse) {
    throw Error(
        ErrorCode::invalid_argument,
        fmt::format("{}: {} without {}; give both or neither (then a forward computes them)",
                    dir.string(), have_o ? "o.npy" : "lse.npy", have_o ? "lse.npy" : "o.npy"));
  }
  if (have_o) {
    in.o = round_to_dtype(read_input(dir, "o.npy", o_shape(p), layout), bf16);
    in.lse = read_input(dir, "lse.npy", lse_shape(p), layout);
  }
  return in;
}

}  // namespace fmha_jit::cli
