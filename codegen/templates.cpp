#include "codegen/templates.hpp"

#include <algorithm>
#include <set>

#include "fmha_jit/error.hpp"

namespace fmha_jit::codegen {

TemplateSet::TemplateSet(std::vector<EmbeddedTemplate> templates)
    : templates_(std::move(templates)) {
  std::sort(templates_.begin(), templates_.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
}

const TemplateSet& TemplateSet::embedded() {
  static const TemplateSet set(
      {embedded_template_table().begin(), embedded_template_table().end()});
  return set;
}

const EmbeddedTemplate* TemplateSet::find(std::string_view path) const {
  const auto it = std::lower_bound(templates_.begin(), templates_.end(), path,
                                   [](const auto& t, std::string_view p) { return t.path < p; });
  return it != templates_.end() && it->path == path ? &*it : nullptr;
}

std::vector<std::string> quoted_includes(std::string_view text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] != '#') continue;
    line.remove_prefix(first + 1);
    line.remove_prefix(std::min(line.find_first_not_of(" \t"), line.size()));
    if (!line.starts_with("include")) continue;
    const auto open = line.find('"');
    const auto close = open == std::string_view::npos ? open : line.find('"', open + 1);
    if (close == std::string_view::npos) continue;  // <system> includes are not templates
    out.emplace_back(line.substr(open + 1, close - open - 1));
  }
  return out;
}

std::vector<const EmbeddedTemplate*> TemplateSet::closure(std::string_view source) const {
  const auto roots = quoted_includes(source);
  std::string memo_key;
  for (const auto& r : roots) memo_key += r + '\n';
  {
    std::lock_guard lock(mutex_);
    if (auto it = closure_memo_.find(memo_key); it != closure_memo_.end()) return it->second;
  }
  std::set<std::string_view> seen;
  std::vector<std::string> pending(roots.rbegin(), roots.rend());
  std::vector<const EmbeddedTemplate*> out;
  while (!pending.empty()) {
    const std::string path = std::move(pending.back());
    pending.pop_back();
    const EmbeddedTemplate* t = find(path);
    if (!t) {
      throw Error(ErrorCode::io_error,
                  "template \"" + path + "\" is included but not embedded in this build");
    }
    if (!seen.insert(t->path).second) continue;
    out.push_back(t);
    for (auto& inc : quoted_includes(t->text)) pending.push_back(std::move(inc));
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->path < b->path; });
  std::lock_guard lock(mutex_);
  closure_memo_.emplace(memo_key, out);
  return out;
}

}  // namespace fmha_jit::codegen
