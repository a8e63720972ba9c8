// The one cache-key formula (also written out in docs/CACHE_FORMAT.md). Any change of any input,
// down to one byte of one template, yields a different key.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace fmha_jit::cache {

// Bumped whenever the on-disk layout or the meaning of an entry changes.
inline constexpr int kCacheFormatVersion = 1;

// Every input of a key, as text: the pipeline (dispatcher/pipeline.cpp) gathers them from the
// canonical config, the rendered entry, the compiler and the templates; the cache only hashes them.
struct KeyInputs {
  int format_version = kCacheFormatVersion;
  std::string canonical_config;  // canonical_string(config)
  std::string arch;
  std::string compiler_id;       // nvrtc | hiprtc
  std::string compiler_version;  // API version and library file
  std::vector<std::string> options;
  std::string entry_hash;  // XXH3-128 of the rendered entry: covers changes of codegen itself
  std::vector<std::pair<std::string, std::string>> templates;  // (path, sha256), sorted by path
};

// The text that is hashed: one line per input, each value length-prefixed ("name <len>:<value>") so
// no value can imitate another field.
std::string key_material(const KeyInputs& inputs);

// 32 lowercase hex digits: XXH3-128 of key_material().
std::string compute_key(const KeyInputs& inputs);

}  // namespace fmha_jit::cache
