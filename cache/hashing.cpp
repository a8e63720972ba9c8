#include "cache/hashing.hpp"

#include <xxhash.h>

#include <cstdio>

namespace fmha_jit::cache {
namespace {
std::string to_hex(XXH128_hash_t h) {
  // Canonical (big-endian) byte order, as xxhsum prints it.
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[canonical.digest[i] >> 4];
    out[2 * i + 1] = kDigits[canonical.digest[i] & 15];
  }
  return out;
}
}  // namespace

std::string xxh3_128_hex(std::string_view data) {
  return to_hex(XXH3_128bits(data.data(), data.size()));
}

std::string xxh3_128_hex(std::span<const std::uint8_t> data) {
  return to_hex(XXH3_128bits(data.data(), data.size()));
}

struct Hasher::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

Hasher::Hasher() : state_(std::make_unique<State>()) { XXH3_128bits_reset(state_->xxh); }
Hasher::~Hasher() = default;

Hasher& Hasher::update(std::string_view data) {
  XXH3_128bits_update(state_->xxh, data.data(), data.size());
  return *this;
}

std::string Hasher::hex() const { return to_hex(XXH3_128bits_digest(state_->xxh)); }

}  // namespace fmha_jit::cache
