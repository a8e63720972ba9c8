// XXH3-128 (libxxhash) as lowercase hex: the cache key and the binary checksums.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace fmha_jit::cache {

std::string xxh3_128_hex(std::string_view data);
std::string xxh3_128_hex(std::span<const std::uint8_t> data);

// Streaming form, for hashing a sequence of fields without concatenating them.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  Hasher& update(std::string_view data);
  std::string hex() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fmha_jit::cache
