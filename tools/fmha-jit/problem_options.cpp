#include "tools/fmha-jit/problem_options.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "dispatcher/launch.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "tools/fmha-jit/sweep.hpp"
#include "tools/fmha-jit/sweep_files.hpp"

namespace fmha_jit::cli {
namespace {

template <class E>
std::vector<std::string> spellings() {
  std::vector<std::string> out;
  for (const auto& s : enum_spellings<E>()) out.emplace_back(s.name);
  return out;
}

template <class E>
E enum_from(const std::string& text) {
  for (const auto& s : enum_spellings<E>()) {
    if (s.name == text) return s.value;
  }
  // Unreachable after CLI11's IsMember check; kept so a new caller cannot read garbage.
  throw Error(ErrorCode::invalid_argument, "unknown value \"" + text + "\"");
}

[[noreturn]] void bad_mask(const std::string& text) {
  throw FieldError(ErrorCode::invalid_argument, "mask", text,
                   "none, causal, causal-br, window:L,R (L, R >= -1; -1 = unbounded), e.g. "
                   "window:256,0");
}

// CLI11's own range checks print the whole double range; this one says what is meant.
std::string check_scale(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v) || v <= 0) {
    return "scale = " + text + " is not supported; accepted: a finite positive number";
  }
  return {};
}

// A cap of 0 would mean "no softcap", which is what leaving the flag out says; accepting it would
// give two spellings of one problem and a config whose softcap field disagrees with the problem.
std::string check_softcap(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v) || v <= 0 ||
      v > std::numeric_limits<float>::max()) {
    return "softcap = " + text +
           " is not supported; accepted: a finite positive number (the scores s become "
           "softcap * tanh(s / softcap)), e.g. 30; leave --softcap out for no cap";
  }
  return {};
}

CLI::Validator seqlens_validator(const char* key) {
  return CLI::Validator(
      [key](std::string& text) {
        try {
          parse_seqlens(key, text);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      },
      "", key);
}

// Checks what one option cannot check alone. The dense sizes have defaults, so only those given in
// this parse conflict with the packed lengths (a sweep point's parser sees the point's keys only).
void check_packed_options(const ProblemOptions& o, const CLI::Option* seqlens_q,
                          const CLI::Option* seqlens_k,
                          const std::vector<const CLI::Option*>& dense) {
  for (const CLI::Option* packed : {seqlens_q, seqlens_k}) {
    if (packed->count() == 0) continue;
    for (const CLI::Option* size : dense) {
      if (size->count() == 0) continue;
      throw CLI::ValidationError(
          packed->get_name() + " and " + size->get_name() + " conflict",
          "a packed batch takes its sequence count and lengths from --seqlens-q (and "
          "--seqlens-k); accepted: either those or --batch / --seqlen-q / --seqlen-k");
    }
  }
  if (o.seqlens_q.empty() && !o.seqlens_k.empty()) {
    throw CLI::ValidationError(
        seqlens_k->get_name(),
        "given without --seqlens-q; accepted: the key lengths of a packed batch whose query "
        "lengths --seqlens-q gives");
  }
  if (o.seqlens_q.empty()) return;
  try {
    const auto q = parse_seqlens("seqlens_q", o.seqlens_q);
    pack_seqlens(q, o.seqlens_k.empty() ? q : parse_seqlens("seqlens_k", o.seqlens_k));
  } catch (const Error& e) {
    throw CLI::ValidationError(e.what());
  }
}

bool parse_int(std::string_view text, int& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

}  // namespace

void add_problem_options(CLI::App& app, ProblemOptions& o,
                         const std::vector<std::string>& families) {
  constexpr std::int64_t kMaxSize = std::numeric_limits<int>::max();
  std::string family_help = "Kernel family: " + fmt::format("{}", fmt::join(families, " | "));
  app.add_option("--family", o.family, family_help)
      ->capture_default_str()
      ->check(CLI::IsMember(families));
  app.add_option("--dtype", o.dtype, "Element type")
      ->capture_default_str()
      ->check(CLI::IsMember(spellings<DType>()));
  CLI::Option* batch = app.add_option("--batch", o.batch, "Batch size");
  batch->capture_default_str()->check(CLI::Range(std::int64_t{1}, kMaxSize))->type_name("B");
  app.add_option("--nhead-q", o.nhead_q, "Query heads")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{1}, kMaxSize))
      ->type_name("H");
  app.add_option("--nhead-k", o.nhead_k, "Key/value heads (GQA / MQA) [default: --nhead-q]")
      ->check(CLI::Range(std::int64_t{1}, kMaxSize))
      ->type_name("HK");
  CLI::Option* seqlen_q = app.add_option("--seqlen-q", o.seqlen_q, "Query sequence length");
  seqlen_q->capture_default_str()->check(CLI::Range(std::int64_t{1}, kMaxSize))->type_name("SQ");
  CLI::Option* seqlen_k =
      app.add_option("--seqlen-k", o.seqlen_k, "Key sequence length [default: --seqlen-q]");
  seqlen_k->check(CLI::Range(std::int64_t{1}, kMaxSize))->type_name("SK");
  CLI::Option* seqlens_q = app.add_option(
      "--seqlens-q", o.seqlens_q,
      "Packed batch of variable-length sequences (varlen config): the query length of each "
      "sequence, comma-separated, 0 allowed, e.g. 100,2000,17. Replaces --batch, --seqlen-q and "
      "--seqlen-k; tensors are (total, H, D) in bshd, (H, total, D) in bhsd");
  seqlens_q->check(seqlens_validator("seqlens_q"))->type_name("L1,L2,...");
  CLI::Option* seqlens_k = app.add_option(
      "--seqlens-k", o.seqlens_k,
      "Key length of each packed sequence, as many as --seqlens-q [default: --seqlens-q]");
  seqlens_k->check(seqlens_validator("seqlens_k"))->type_name("L1,L2,...");
  app.add_option("--hdim-q", o.hdim_q, "Head dim of Q and K")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024))
      ->type_name("D");
  app.add_option("--hdim-v", o.hdim_v, "Head dim of V and O [default: --hdim-q]")
      ->check(CLI::Range(1, 1024))
      ->type_name("DV");
  app.add_option("--mask", o.mask, "none | causal | causal-br | window:L,R (-1 = unbounded)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              parse_mask(text);
              return std::string();
            } catch (const Error& e) {
              return std::string(e.what());
            }
          },
          "", "mask"))
      ->type_name("MASK");
  app.add_option("--layout", o.layout,
                 "bhsd = [B, H, S, D], bshd = [B, S, H, D] [default: bshd for a packed batch "
                 "(--seqlens-q), whose tensors are then (total, H, D), else bhsd]")
      ->check(CLI::IsMember({"bhsd", "bshd"}));
  app.add_option("--scale", o.scale, "Softmax scale [default: 1/sqrt(hdim_q)]")
      ->check(CLI::Validator([](std::string& text) { return check_scale(text); }, "", "scale"))
      ->type_name("S");
  app.add_option("--seed", o.seed, "Seed of the random inputs")->capture_default_str();
  app.add_option("--impl", o.impl, "Kernel implementation (auto: the fastest for the arch)")
      ->capture_default_str()
      ->check(CLI::IsMember(spellings<KernelImpl>()));
  app.add_option("--arch", o.arch, "Target arch [default: the GPU's]")->type_name("ARCH");
  app.add_flag("--deterministic", o.deterministic, "bwd: bit-identical gradients run to run");
  app.add_flag("--lse,!--no-lse", o.lse, "fwd: store the log-sum-exp (default on)");
  app.add_flag("--sinks", o.sinks,
               "Per-head sink logits join each row's softmax denominator (sinks config; random, "
               "or sinks.npy of run --inputs); bwd also computes their gradient");
  app.add_option("--softcap", o.softcap,
                 "Cap the scaled scores s as X * tanh(s / X), X > 0 (softcap config) [default: no "
                 "cap]")
      ->check(CLI::Validator([](std::string& text) { return check_softcap(text); }, "", "softcap"))
      ->type_name("X");
  // Tile overrides: the config fields of the same names (validated with the config).
  const char* tile_help = "Tile override (0 = heuristic; see docs/ARCHITECTURE.md)";
  app.add_option("--block-m", o.block_m, tile_help)->check(CLI::Range(0, 1024));
  app.add_option("--block-n", o.block_n, tile_help)->check(CLI::Range(0, 1024));
  app.add_option("--num-warps", o.num_warps, tile_help)->check(CLI::Range(0, 32));
  app.add_option("--num-stages", o.num_stages, tile_help)->check(CLI::Range(0, 8));
  app.parse_complete_callback([&o, seqlens_q, seqlens_k, batch, seqlen_q, seqlen_k] {
    check_packed_options(o, seqlens_q, seqlens_k, {batch, seqlen_q, seqlen_k});
  });
}

MaskSpec parse_mask(const std::string& text) {
  constexpr std::string_view kWindow = "window:";
  MaskSpec m;
  if (text.starts_with(kWindow)) {
    const std::string_view sizes = std::string_view(text).substr(kWindow.size());
    const auto comma = sizes.find(',');
    if (comma == std::string_view::npos || !parse_int(sizes.substr(0, comma), m.window_left) ||
        !parse_int(sizes.substr(comma + 1), m.window_right) || m.window_left < -1 ||
        m.window_right < -1) {
      bad_mask(text);
    }
    m.kind = MaskKind::sliding_window;
    return m;
  }
  for (const auto& s : enum_spellings<MaskKind>()) {
    // A window without sizes would silently mean "unbounded on both sides", i.e. no mask at all.
    if (s.name == text && s.value != MaskKind::sliding_window) {
      m.kind = s.value;
      return m;
    }
  }
  bad_mask(text);
}

std::string mask_text(const MaskSpec& mask) {
  switch (mask.kind) {
    case MaskKind::none: return "none";
    case MaskKind::causal_top_left: return "causal";
    case MaskKind::causal_bottom_right: return "causal-br";
    case MaskKind::sliding_window:
      return fmt::format("window:{},{}", mask.window_left, mask.window_right);
  }
  return "?";
}

FmhaKernelConfig make_config(const ProblemOptions& o, Family family) {
  FmhaKernelConfig c;
  c.family = family;
  c.dtype = enum_from<DType>(o.dtype);
  c.hdim_q = o.hdim_q;
  c.hdim_v = o.hdim_v ? o.hdim_v : o.hdim_q;
  c.arch = o.arch.empty() ? detect_gpu_arch() : o.arch;
  c.deterministic = o.deterministic;
  c.mask = parse_mask(o.mask).kind;
  c.lse = o.lse;
  c.varlen = !o.seqlens_q.empty();
  c.sinks = o.sinks;
  c.softcap = o.softcap > 0;
  c.impl = enum_from<KernelImpl>(o.impl);
  c.block_m = o.block_m;
  c.block_n = o.block_n;
  c.num_warps = o.num_warps;
  c.num_stages = o.num_stages;
  return c;
}

FmhaKernelConfig producer_config(const FmhaKernelConfig& bwd) {
  FmhaKernelConfig c = bwd;
  c.family = Family::fwd;
  c.lse = true;
  c.block_m = c.block_n = c.num_warps = c.num_stages = 0;
  return c;
}

CliProblem make_problem(const ProblemOptions& o) {
  CliProblem cp;
  FmhaProblem& p = cp.problem;
  p.batch = o.batch;
  p.nhead_q = o.nhead_q;
  p.nhead_k = o.nhead_k ? o.nhead_k : o.nhead_q;
  p.seqlen_q = o.seqlen_q;
  p.seqlen_k = o.seqlen_k ? o.seqlen_k : o.seqlen_q;
  p.hdim_q = o.hdim_q;
  p.hdim_v = o.hdim_v ? o.hdim_v : o.hdim_q;
  if (o.scale > 0) p.scale = static_cast<float>(o.scale);
  const MaskSpec m = parse_mask(o.mask);
  p.window_left = m.window_left;
  p.window_right = m.window_right;
  // A packed batch is (total, heads, dim) unless asked otherwise, as FlashAttention's varlen
  // functions take it.
  p.layout = o.layout.empty() ? (o.seqlens_q.empty() ? Layout::bhsd : Layout::bshd)
                              : *layout_from_string(o.layout);
  if (o.softcap > 0) p.softcap = static_cast<float>(o.softcap);
  if (!o.seqlens_q.empty()) {
    const auto q = parse_seqlens("seqlens_q", o.seqlens_q);
    auto packed = std::make_shared<PackedBatch>(
        pack_seqlens(q, o.seqlens_k.empty() ? q : parse_seqlens("seqlens_k", o.seqlens_k)));
    set_packed(p, *packed);
    cp.packed = std::move(packed);
  }
  return cp;
}

FmhaKernelConfig validate_config_and_problem(const FmhaKernelConfig& config,
                                             const FmhaProblem& problem) {
  FmhaKernelConfig canonical = canonicalize(config);
  dispatch::check_problem(canonical, problem);
  return canonical;
}

nlohmann::json problem_json(const FmhaProblem& p, const MaskSpec& mask) {
  nlohmann::json j = {{"batch", p.batch},
                      {"nhead_q", p.nhead_q},
                      {"nhead_k", p.nhead_k},
                      {"seqlen_q", p.seqlen_q},
                      {"seqlen_k", p.seqlen_k},
                      {"hdim_q", p.hdim_q},
                      {"hdim_v", p.hdim_v},
                      {"layout", std::string(to_string(p.layout))},
                      {"mask", mask_text(mask)},
                      {"window_left", p.window_left},
                      {"window_right", p.window_right},
                      {"scale", p.softmax_scale()},
                      {"varlen", p.varlen()},
                      {"softcap", p.softcap}};
  if (p.varlen()) {
    // seqlen_q / seqlen_k above are the longest sequences.
    j["total_q"] = p.total_q;
    j["total_k"] = p.total_k;
    j["seqlens_q"] = seqlens_of(p.cu_seqlens_q_host, p.batch);
    j["seqlens_k"] = seqlens_of(p.cu_seqlens_k_host, p.batch);
  }
  return j;
}

std::string describe_problem(const ProblemOptions& o, const FmhaProblem& p) {
  const std::string hdim =
      p.hdim_q == p.hdim_v ? std::to_string(p.hdim_q) : fmt::format("{}x{}", p.hdim_q, p.hdim_v);
  const std::string seq = p.varlen() ? fmt::format("varlen S<={}x<={} T{}x{}", p.seqlen_q,
                                                   p.seqlen_k, p.total_q, p.total_k)
                                     : fmt::format("S{}x{}", p.seqlen_q, p.seqlen_k);
  std::string text =
      fmt::format("{} B{} H{}:{} {} D{} {} {}", o.dtype, p.batch, p.nhead_q, p.nhead_k, seq, hdim,
                  mask_text(parse_mask(o.mask)), to_string(p.layout));
  if (o.sinks) text += " sinks";
  if (p.softcap > 0) text += fmt::format(" softcap {:g}", p.softcap);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Sweeps

namespace {

[[noreturn]] void bad_point(const std::string& origin, const nlohmann::json& point,
                            const std::string& what) {
  throw Error(ErrorCode::invalid_argument, origin + ": " + point.dump() + ": " + what);
}

// A JSON scalar as the text a flag would be given.
std::string flag_value(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean() || v.is_number()) return v.dump();
  throw Error(ErrorCode::invalid_argument, "expected a string, number or boolean, got " + v.dump());
}

std::int64_t positive_integer(const nlohmann::json& point, const char* key) {
  const auto& v = point.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1) {
    throw Error(ErrorCode::invalid_argument, std::string(key) + " = " + v.dump() +
                                                 " is not supported; accepted: an integer >= 1");
  }
  return v.get<std::int64_t>();
}

// Applies one expanded point to a copy of the base options. The problem flags are parsed by CLI11
// from "--name=value" arguments, so a sweep value passes the same checks as the flag.
ProblemOptions apply_point(const nlohmann::json& point, const ProblemOptions& base,
                           const std::vector<std::string>& families) {
  ProblemOptions o = base;
  // A point that sizes a dense batch replaces packed lengths given on the command line, as any
  // point value replaces its flag.
  for (const char* dense : {"batch", "seqlen_q", "seqlen_k", "seqlen", "tokens"}) {
    if (point.contains(dense)) o.seqlens_q.clear(), o.seqlens_k.clear();
  }
  CLI::App parser;
  add_problem_options(parser, o, families);
  // Shorthands of the FlashAttention benchmark grid, expanded into the flags they stand for.
  static const std::vector<std::pair<const char*, std::vector<const char*>>> kShorthands = {
      {"hdim", {"hdim_q", "hdim_v"}},
      {"seqlen", {"seqlen_q", "seqlen_k"}},
      {"causal", {"mask"}},
      {"tokens", {"batch"}},
      {"model_dim", {"nhead_q"}}};
  std::set<std::string> keys;  // the problem flags' long names, spelled as sweep keys
  for (const CLI::Option* opt : parser.get_options()) {
    for (std::string name : opt->get_lnames()) {
      if (name == "help" || name == "no-lse") continue;  // "lse": false says the same
      std::replace(name.begin(), name.end(), '-', '_');
      keys.insert(name);
    }
  }
  auto is_shorthand = [&](const std::string& key) {
    return std::any_of(kShorthands.begin(), kShorthands.end(),
                       [&](const auto& s) { return key == s.first; });
  };
  std::vector<std::string> args;
  for (const auto& [key, value] : point.items()) {
    if (is_shorthand(key)) continue;
    if (!keys.contains(key)) {
      std::vector<std::string> accepted;
      for (const auto& s : kShorthands) accepted.emplace_back(s.first);
      accepted.insert(accepted.end(), keys.begin(), keys.end());
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("unknown key \"{}\"; accepted: {}", key, fmt::join(accepted, ", ")));
    }
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    args.push_back("--" + flag + "=" + flag_value(value));
  }
  for (const auto& [shorthand, replaces] : kShorthands) {
    if (!point.contains(shorthand)) continue;
    for (const char* other : replaces) {
      if (point.contains(other)) {
        throw Error(ErrorCode::invalid_argument,
                    std::string("\"") + shorthand + "\" and \"" + other + "\" both set " + other);
      }
    }
  }
  if (point.contains("hdim")) {
    const std::string v = flag_value(point["hdim"]);
    args.push_back("--hdim-q=" + v);
    args.push_back("--hdim-v=" + v);
  }
  if (point.contains("seqlen")) {
    const std::string v = flag_value(point["seqlen"]);
    args.push_back("--seqlen-q=" + v);
    args.push_back("--seqlen-k=" + v);
  }
  if (point.contains("causal")) {
    if (!point["causal"].is_boolean()) {
      throw Error(ErrorCode::invalid_argument, "causal = " + point["causal"].dump() +
                                                   " is not supported; accepted: true, false");
    }
    args.push_back(point["causal"].get<bool>() ? "--mask=causal" : "--mask=none");
  }
  std::reverse(args.begin(), args.end());  // CLI11 consumes a vector from its back
  try {
    parser.parse(args);
  } catch (const CLI::ParseError& e) {
    throw Error(ErrorCode::invalid_argument, e.what());
  }
  // FlashAttention's grid holds the token count and the model width fixed: batch and heads follow
  // from the sequence length and head dim (rounded down, as its benchmark script does).
  if (point.contains("tokens")) {
    if (!o.seqlens_q.empty()) {
      throw Error(ErrorCode::invalid_argument,
                  "\"tokens\" sets the batch of a dense batch; a packed batch (seqlens_q) has one "
                  "sequence per length");
    }
    const std::int64_t tokens = positive_integer(point, "tokens");
    o.batch = tokens / o.seqlen_q;
    if (o.batch < 1) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("tokens = {} is less than seqlen_q = {}", tokens, o.seqlen_q));
    }
  }
  if (point.contains("model_dim")) {
    const std::int64_t model_dim = positive_integer(point, "model_dim");
    o.nhead_q = model_dim / o.hdim_q;
    if (o.nhead_q < 1) {
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("model_dim = {} is less than hdim_q = {}", model_dim, o.hdim_q));
    }
  }
  return o;
}

}  // namespace

std::vector<SweepPoint> expand_sweep_file(const std::filesystem::path& file,
                                          const ProblemOptions& base,
                                          const std::vector<std::string>& families) {
  const nlohmann::json document = read_json_file(file);
  const std::string origin = file.string();
  if (document.is_array() && document.empty()) {
    bad_point(origin, document, "the sweep is an empty list");
  }
  // The same product expansion as prebuild files (lists expand, the last varies fastest).
  std::vector<nlohmann::json> expanded;
  try {
    expanded = cli::expand_sweep(document);
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument, origin + ": " + e.what());
  }
  std::vector<SweepPoint> points;
  for (auto& point : expanded) {
    try {
      ProblemOptions o = apply_point(point, base, families);
      points.push_back({std::move(point), std::move(o)});
    } catch (const Error& e) {
      bad_point(origin, point, e.what());
    }
  }
  return points;
}

}  // namespace fmha_jit::cli
