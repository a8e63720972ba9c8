// The attention-problem flags shared by `run` and `bench` (family, dtype, sizes or packed lengths,
// mask, score modifiers, layout, impl, ...), and what is derived from them: the kernel config and
// the FmhaProblem.
// `bench --sweep` applies each sweep point through the same flag definitions, so a sweep key and
// the flag of the same name accept exactly the same values.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"
#include "tools/fmha-jit/packed_batch.hpp"

namespace fmha_jit::cli {

// Flag values as given. Sizes left at 0 follow another flag (nhead_k -> nhead_q, seqlen_k ->
// seqlen_q, hdim_v -> hdim_q); scale 0 is 1/sqrt(hdim_q); an empty arch is detect_gpu_arch().
// A non-empty seqlens_q makes a packed batch (varlen config) of those lengths, in place of batch,
// seqlen_q and seqlen_k; an empty seqlens_k then follows seqlens_q.
struct ProblemOptions {
  std::string family = "fwd";  // fwd | bwd (run); fwd | bwd | fwdbwd (bench)
  std::string dtype = "bf16";
  std::int64_t batch = 1;
  std::int64_t nhead_q = 1;
  std::int64_t nhead_k = 0;
  std::int64_t seqlen_q = 1024;
  std::int64_t seqlen_k = 0;
  int hdim_q = 128;
  int hdim_v = 0;
  std::string mask = "none";  // none | causal | causal-br | window:L,R
  std::string layout;         // empty: bshd for a packed batch (--seqlens-q), else bhsd
  double scale = 0;
  std::uint32_t seed = 0;
  std::string impl = "auto";
  std::string arch;
  bool deterministic = false;
  bool lse = true;
  std::string seqlens_q, seqlens_k;  // "100,2000,17"
  bool sinks = false;
  double softcap = 0;  // 0 = none
  // Tile overrides (0 = the heuristic's choice), for tuning sweeps.
  int block_m = 0, block_n = 0, num_warps = 0, num_stages = 0;
};

// Registers the flags above on `app`, bound to `o`; `families` lists the accepted --family values.
// Once parsed, `app` checks that the packed lengths exclude the dense sizes given in the same
// parse and that the two lists have as many entries (CLI::ValidationError naming the options).
void add_problem_options(CLI::App& app, ProblemOptions& o,
                         const std::vector<std::string>& families);

struct MaskSpec {
  MaskKind kind = MaskKind::none;
  int window_left = -1;
  int window_right = -1;
};
// Parses a --mask value; throws Error(invalid_argument) saying what is accepted.
MaskSpec parse_mask(const std::string& text);
// The --mask spelling of a mask: "none", "causal", "causal-br", "window:128,0".
std::string mask_text(const MaskSpec& mask);

// Config of the given family from the flags (arch resolved). Not validated: setup does that.
// The forward that produces O and LSE for a backward of `bwd`: same dtype, head dims, mask and
// arch, LSE on, and the forward heuristic's own tile (a backward tile override is not one the
// forward can run).
FmhaKernelConfig producer_config(const FmhaKernelConfig& bwd);
FmhaKernelConfig make_config(const ProblemOptions& o, Family family);

// A problem and, for a packed batch, the host cu_seqlens its pointers refer to (shared, so that a
// copy of this struct keeps them alive). Its device cu_seqlens are stand-ins until a command
// uploads them (set_packed, with_device_seqlens).
struct CliProblem {
  FmhaProblem problem;
  std::shared_ptr<const PackedBatch> packed;  // null for a dense batch
};
// Throws Error(invalid_argument) for packed lengths not accepted (parse_seqlens, pack_seqlens).
CliProblem make_problem(const ProblemOptions& o);

// Validates the config (canonicalize) and the problem and checks that they fit each other, without
// compiling anything; throws the library's FieldError. Lets a command report a bad flag before it
// asks for a GPU or spends time on a compile.
FmhaKernelConfig validate_config_and_problem(const FmhaKernelConfig& config,
                                             const FmhaProblem& problem);

// The problem as JSON (sizes, packed lengths, layout, mask, window, scale, score modifiers) for
// --json output.
nlohmann::json problem_json(const FmhaProblem& problem, const MaskSpec& mask);
// "bf16 B2 H16:16 S1024x1024 D128 causal bhsd"; a packed batch reads
// "bf16 B3 H16:16 varlen S<=2000x<=2000 T2117x2117 D128 causal bshd", and sinks and a softcap
// follow as "sinks softcap 30". For logs and messages.
std::string describe_problem(const ProblemOptions& o, const FmhaProblem& problem);

// One point of a `bench --sweep` file: the flags with the point's keys applied.
struct SweepPoint {
  nlohmann::json point;  // as written in the file, after list expansion
  ProblemOptions options;
};

// Expands a sweep document (an object, or an array of objects, whose list values expand to their
// cartesian product) over the base options given on the command line. Keys: any problem flag name
// with '_' for '-' (dtype, nhead_k, mask, impl, deterministic, seqlens_q, ...), plus the shorthands
// hdim (sets hdim_q and hdim_v), seqlen (seqlen_q and seqlen_k), causal (bool: mask causal / none),
// and tokens and model_dim (batch = tokens / seqlen_q, nhead_q = model_dim / hdim_q). A point's
// dense sizes (batch, seqlen_q, seqlen_k, seqlen, tokens) replace packed lengths given on the
// command line. Throws Error(invalid_argument) naming the file and the point for a malformed
// document or value.
std::vector<SweepPoint> expand_sweep_file(const std::filesystem::path& file,
                                          const ProblemOptions& base,
                                          const std::vector<std::string>& families);

}  // namespace fmha_jit::cli
