#include "tools/fmha-jit/packed_batch.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "fmha_jit/error.hpp"

namespace fmha_jit::cli {
namespace {

constexpr std::int64_t kMaxTokens = std::numeric_limits<std::int32_t>::max();

[[noreturn]] void bad_seqlens(std::string_view key, const std::string& text,
                              const std::string& why) {
  throw Error(ErrorCode::invalid_argument, fmt::format("{} = {} is not supported: {}; accepted: {}",
                                                       key, text, why, kSeqlensAccepted));
}

std::vector<std::int32_t> cumulative(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> cu(lengths.size() + 1, 0);
  for (std::size_t i = 0; i < lengths.size(); ++i) cu[i + 1] = cu[i] + lengths[i];
  return cu;
}

std::int64_t longest(const std::vector<std::int32_t>& cu) {
  std::int64_t len = 1;  // a batch of empty sequences still launches with lengths of 1
  for (std::size_t i = 0; i + 1 < cu.size(); ++i)
    len = std::max<std::int64_t>(len, cu[i + 1] - cu[i]);
  return len;
}

}  // namespace

std::vector<std::int32_t> parse_seqlens(std::string_view key, const std::string& text) {
  if (text.empty()) bad_seqlens(key, "\"\"", "the list is empty");
  std::vector<std::int32_t> lengths;
  std::int64_t total = 0;
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    std::int64_t value = -1;
    const char* end = entry.data() + entry.size();
    const auto [ptr, ec] = std::from_chars(entry.data(), end, value);
    // from_chars takes no sign or spaces: "+5", " 5" and "-5" all fail here, as they should.
    if (entry.empty() || ec != std::errc() || ptr != end || value < 0 || value > kMaxTokens) {
      bad_seqlens(key, text,
                  entry.empty() ? fmt::format("entry {} is empty", lengths.size() + 1)
                                : fmt::format("entry {} (\"{}\") is not a length",
                                              lengths.size() + 1, entry));
    }
    total += value;
    if (total > kMaxTokens) {
      bad_seqlens(key, text,
                  fmt::format("the lengths add up to more than {} tokens, past the kernels' int32 "
                              "offsets",
                              kMaxTokens));
    }
    lengths.push_back(static_cast<std::int32_t>(value));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return lengths;
}

PackedBatch pack_seqlens(const std::vector<std::int32_t>& seqlens_q,
                         const std::vector<std::int32_t>& seqlens_k) {
  if (seqlens_q.size() != seqlens_k.size()) {
    throw Error(
        ErrorCode::invalid_argument,
        fmt::format("--seqlens-k = {} has {} lengths but --seqlens-q = {} has {}; "
                    "accepted: one key length per query length (one of each per "
                    "sequence), or no --seqlens-k (the keys then have the queries' lengths)",
                    fmt::join(seqlens_k, ","), seqlens_k.size(), fmt::join(seqlens_q, ","),
                    seqlens_q.size()));
  }
  return {cumulative(seqlens_q), cumulative(seqlens_k)};
}

void set_packed(FmhaProblem& p, const PackedBatch& packed) {
  p.batch = packed.batch();
  p.total_q = packed.total_q();
  p.total_k = packed.total_k();
  p.seqlen_q = longest(packed.cu_seqlens_q);
  p.seqlen_k = longest(packed.cu_seqlens_k);
  p.cu_seqlens_q_host = packed.cu_seqlens_q.data();
  p.cu_seqlens_k_host = packed.cu_seqlens_k.data();
  p.cu_seqlens_q = p.cu_seqlens_q_host;
  p.cu_seqlens_k = p.cu_seqlens_k_host;
}

FmhaProblem with_device_seqlens(FmhaProblem p, const void* cu_seqlens_q, const void* cu_seqlens_k) {
  p.cu_seqlens_q = static_cast<const std::int32_t*>(cu_seqlens_q);
  p.cu_seqlens_k = static_cast<const std::int32_t*>(cu_seqlens_k);
  return p;
}

std::vector<Sequence> sequences(const FmhaProblem& p) {
  if (!p.cu_seqlens_q_host || !p.cu_seqlens_k_host) {
    throw Error(ErrorCode::invalid_argument,
                "the sequences of a packed problem are read from its host cu_seqlens, and it has "
                "none");
  }
  std::vector<Sequence> out(static_cast<std::size_t>(p.batch));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    Sequence& s = out[static_cast<std::size_t>(b)];
    s.q_row0 = p.cu_seqlens_q_host[b];
    s.k_row0 = p.cu_seqlens_k_host[b];
    s.seqlen_q = p.cu_seqlens_q_host[b + 1] - s.q_row0;
    s.seqlen_k = p.cu_seqlens_k_host[b + 1] - s.k_row0;
  }
  return out;
}

std::vector<std::int64_t> seqlens_of(const std::int32_t* cu_seqlens, std::int64_t batch) {
  std::vector<std::int64_t> out;
  for (std::int64_t b = 0; b < batch; ++b) out.push_back(cu_seqlens[b + 1] - cu_seqlens[b]);
  return out;
}

}  // namespace fmha_jit::cli
