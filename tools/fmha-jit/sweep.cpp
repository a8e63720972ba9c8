#include "tools/fmha-jit/sweep.hpp"

#include <optional>
#include <set>

#include "fmha_jit/error.hpp"
#include "kernels/resolve.hpp"

namespace fmha_jit::cli {
namespace {

void expand_object(const nlohmann::json& object, std::vector<nlohmann::json>& out) {
  if (!object.is_object()) {
    throw FieldError(ErrorCode::invalid_config, "prebuild entry", object.dump().substr(0, 80),
                     "a JSON object of config fields");
  }
  std::vector<std::pair<std::string, nlohmann::json>> axes;
  std::size_t points = 1;
  for (const auto& [name, value] : object.items()) {
    if (!value.is_array()) continue;
    if (value.empty()) {
      throw FieldError(ErrorCode::invalid_config, name, "[]", "a value or a non-empty list");
    }
    axes.emplace_back(name, value);
    points *= value.size();
    if (points > kMaxSweepPoints) {
      throw FieldError(ErrorCode::invalid_config, "prebuild entry",
                       "more than " + std::to_string(kMaxSweepPoints) + " points",
                       "at most " + std::to_string(kMaxSweepPoints) + " configs per file");
    }
  }
  if (out.size() + points > kMaxSweepPoints) {
    throw FieldError(ErrorCode::invalid_config, "prebuild file",
                     "more than " + std::to_string(kMaxSweepPoints) + " points",
                     "at most " + std::to_string(kMaxSweepPoints) + " configs per file");
  }
  // Odometer over the axes; the last axis varies fastest.
  std::vector<std::size_t> index(axes.size(), 0);
  for (std::size_t p = 0; p < points; ++p) {
    nlohmann::json point = object;
    for (std::size_t a = 0; a < axes.size(); ++a) point[axes[a].first] = axes[a].second[index[a]];
    out.push_back(std::move(point));
    for (std::size_t a = axes.size(); a-- > 0;) {
      if (++index[a] < axes[a].second.size()) break;
      index[a] = 0;
    }
  }
}

}  // namespace

std::vector<nlohmann::json> expand_sweep(const nlohmann::json& document) {
  std::vector<nlohmann::json> out;
  if (document.is_array()) {
    for (const auto& object : document) expand_object(object, out);
  } else {
    expand_object(document, out);
  }
  return out;
}

std::vector<SweepItem> plan_sweep(const nlohmann::json& document) {
  std::vector<SweepItem> items;
  std::set<std::string> seen;
  for (auto& point : expand_sweep(document)) {
    SweepItem item;
    item.point = point;
    std::optional<kernels::ProblemTileVariant> variant;
    try {
      kernels::ResolvedConfig resolved = kernels::resolve(config_from_json(point));
      item.config = resolved.canonical;
      item.impl_fallback = std::move(resolved.fallback_reason);
      item.valid = true;
      variant = std::move(resolved.tile_variant);
      if (!seen.insert(to_json(item.config).dump()).second) continue;
    } catch (const Error& e) {
      item.skip_reason = e.what();
    }
    items.push_back(std::move(item));
    // A runner of this config runs short causal problems on its tile variant: prebuild that too,
    // so that a warmed cache serves every problem without a compile.
    if (variant) {
      SweepItem extra = items.back();
      extra.config = canonicalize(variant->config);
      if (seen.insert(to_json(extra.config).dump()).second) items.push_back(std::move(extra));
    }
  }
  return items;
}

}  // namespace fmha_jit::cli
