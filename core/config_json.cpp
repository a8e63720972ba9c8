// JSON round trip of FmhaKernelConfig, driven by for_each_field() so that a new field needs no
// edit here.
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "fmha_jit/config.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit {
namespace {

template <class E>
std::string accepted_spellings() {
  std::string out;
  for (const auto& s : enum_spellings<E>()) {
    if (!out.empty()) out += ", ";
    out += s.name;
  }
  return out;
}

std::string accepted_field_names() {
  std::string out;
  FmhaKernelConfig probe;
  for_each_field(probe, [&](const FieldInfo& info, auto&) {
    if (!out.empty()) out += ", ";
    out += info.name;
  });
  return out;
}

[[noreturn]] void bad_type(const FieldInfo& info, const nlohmann::json& value, const char* want) {
  throw FieldError(ErrorCode::invalid_config, std::string(info.name), value.dump(), want);
}

template <class T>
void read_field(const FieldInfo& info, const nlohmann::json& value, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) bad_type(info, value, "true, false");
    out = value.get<bool>();
  } else if constexpr (std::is_same_v<T, int>) {
    if (!value.is_number_integer()) bad_type(info, value, "an integer");
    const auto v = value.get<long long>();
    if (v < -(1LL << 30) || v > (1LL << 30)) bad_type(info, value, "an integer in [-2^30, 2^30]");
    out = static_cast<int>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) bad_type(info, value, "a string");
    out = value.get<std::string>();
  } else {
    static_assert(std::is_enum_v<T>);
    if (value.is_string()) {
      const auto text = value.get<std::string>();
      for (const auto& s : enum_spellings<T>()) {
        if (s.name == text) {
          out = s.value;
          return;
        }
      }
    }
    bad_type(info, value, accepted_spellings<T>().c_str());
  }
}

template <class T>
nlohmann::json write_field(const T& value) {
  if constexpr (std::is_enum_v<T>) {
    return std::string(to_string(value));
  } else {
    return value;
  }
}

}  // namespace

nlohmann::json to_json(const FmhaKernelConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  for_each_field(config, [&](const FieldInfo& info, const auto& value) {
    j[std::string(info.name)] = write_field(value);
  });
  return j;
}

FmhaKernelConfig config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) {
    throw FieldError(ErrorCode::invalid_config, "config", j.dump(),
                     "a JSON object with fields " + accepted_field_names());
  }
  FmhaKernelConfig config;
  std::size_t matched = 0;
  for_each_field(config, [&](const FieldInfo& info, auto& field) {
    const auto it = j.find(std::string(info.name));
    if (it == j.end()) return;
    read_field(info, *it, field);
    ++matched;
  });
  // One head dim named means it for both, as `fmha-jit run --hdim-q` reads it: the default
  // hdim_v (128) would pair every other hdim_q with a head dim it does not support.
  if (j.contains("hdim_q") && !j.contains("hdim_v")) config.hdim_v = config.hdim_q;
  if (matched != j.size()) {
    FmhaKernelConfig probe;
    for (const auto& item : j.items()) {
      // (Not a structured binding: clang 14, the fuzz build's compiler, cannot capture one.)
      const std::string& name = item.key();
      bool known = false;
      for_each_field(probe, [&](const FieldInfo& info, auto&) { known |= info.name == name; });
      if (!known) {
        throw FieldError(ErrorCode::invalid_config, "config field '" + name + "'",
                         item.value().dump(), "fields " + accepted_field_names());
      }
    }
  }
  return config;
}

}  // namespace fmha_jit
