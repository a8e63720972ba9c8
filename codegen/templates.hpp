// Device templates embedded into the library at build time (cmake/embed_templates.cmake), each with
// its SHA-256 computed at build time, and the include closure a rendered entry pulls in.
#pragma once

#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fmha_jit::codegen {

struct EmbeddedTemplate {
  std::string_view path;  // relative to templates/, as written in #include "..."
  std::string_view text;
  std::string_view sha256;  // hex digest of text
};

// Defined in the generated embedded_templates.cpp.
std::span<const EmbeddedTemplate> embedded_template_table();

// A set of templates addressable by path. The library uses the embedded set; tests build modified
// sets to prove that a one-byte change of a template changes the cache key.
class TemplateSet {
 public:
  explicit TemplateSet(std::vector<EmbeddedTemplate> templates);
  static const TemplateSet& embedded();

  const EmbeddedTemplate* find(std::string_view path) const;
  const std::vector<EmbeddedTemplate>& all() const { return templates_; }

  // Every template reachable through quoted #include lines from `source`, sorted by path. Throws
  // Error(io_error) when an include names no template. Memoised per distinct include list, so a
  // hot path never rescans template text.
  std::vector<const EmbeddedTemplate*> closure(std::string_view source) const;

 private:
  std::vector<EmbeddedTemplate> templates_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<const EmbeddedTemplate*>> closure_memo_;
};

// The paths named by quoted #include directives of `text`, in order of appearance.
std::vector<std::string> quoted_includes(std::string_view text);

}  // namespace fmha_jit::codegen
