// Module functions that need no kernel: the arch, the cache folder, config checks, prebuilding a
// sweep into the disk cache (the CLI's `prebuild` semantics: lists expand to their product, each
// config's tile variant is built too) and the cache's listing. They honour the CLI's environment
// variables (FMHA_JIT_CACHE_DIR, FMHA_JIT_ARCH, FMHA_JIT_DEVICE, FMHA_JIT_CACHE_MAX_BYTES).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache_dir.hpp"
#include "cache/disk_cache.hpp"
#include "codegen/kernel_name.hpp"
#include "dispatcher/pipeline.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "python/src/bindings.hpp"
#include "tools/fmha-jit/sweep.hpp"

namespace nb = nanobind;
namespace fs = std::filesystem;

namespace fmha_jit::python {
namespace {

fs::path cache_root(const std::optional<std::string>& cache_dir) {
  return cache_dir ? fs::path(*cache_dir) : cache::default_cache_root();
}

// The canonical form of a JSON config, as JSON text (InvalidInputError naming the field).
std::string canonical_config(const std::string& config_json) {
  return to_json(canonicalize(config_from_json(nlohmann::json::parse(config_json)))).dump();
}

nlohmann::json build_one(const FmhaKernelConfig& config, const fs::path& root) {
  nlohmann::json r = {{"kernel", codegen::kernel_base_name(config)}, {"config", to_json(config)}};
  const auto start = std::chrono::steady_clock::now();
  try {
    const auto obtained = dispatch::obtain_kernel(config, root);
    r["key"] = obtained.kernel->key;
    r["source"] = std::string(to_string(obtained.source));
  } catch (const std::exception& e) {
    r["error"] = e.what();
  }
  r["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// {"kernels": [{kernel, config, key, source | error, seconds}], "skipped": [{point, reason}]}.
// A malformed document raises InvalidInputError; points that are not valid configs are listed
// in "skipped" and compile failures in their kernel's "error": the caller decides what fails.
std::string prebuild(const std::string& document_json, const std::optional<std::string>& cache_dir,
                     int jobs) {
  const auto items = cli::plan_sweep(nlohmann::json::parse(document_json));
  std::vector<FmhaKernelConfig> configs;
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& item : items) {
    if (item.valid) {
      configs.push_back(item.config);
    } else {
      skipped.push_back({{"point", item.point}, {"reason", item.skip_reason}});
    }
  }
  const fs::path root = cache_root(cache_dir);
  std::vector<nlohmann::json> results(configs.size());
  std::atomic<std::size_t> next{0};
  {
    const auto threads = std::clamp<std::size_t>(static_cast<std::size_t>(std::max(jobs, 1)), 1,
                                                 std::max<std::size_t>(configs.size(), 1));
    std::vector<std::jthread> pool;
    for (std::size_t t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (std::size_t i; (i = next.fetch_add(1)) < configs.size();) {
          results[i] = build_one(configs[i], root);
        }
      });
    }
  }
  return nlohmann::json{{"kernels", results}, {"skipped", skipped}}.dump();
}

// {"cache_dir", "entries": [{key, kernel, arch, bytes, compile_seconds, last_used}]}, most
// recently used first; last_used in seconds since the epoch. No folder is created.
std::string cache_info(const std::optional<std::string>& cache_dir) {
  const fs::path root = cache_root(cache_dir);
  nlohmann::json out = {{"cache_dir", root.string()}, {"entries", nlohmann::json::array()}};
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out.dump();
  auto entries = cache::DiskCache(root).list();
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.last_used > b.last_used; });
  for (const auto& e : entries) {
    const auto sys = std::chrono::file_clock::to_sys(e.last_used);
    nlohmann::json j = {
        {"key", e.key},
        {"bytes", e.bytes},
        {"last_used", std::chrono::duration<double>(sys.time_since_epoch()).count()}};
    if (e.manifest) {
      j["arch"] = e.manifest->arch;
      j["compile_seconds"] = e.manifest->compile_seconds;
      try {
        j["kernel"] = codegen::kernel_base_name(config_from_json(e.manifest->config));
      } catch (const std::exception&) {
        // A manifest of another library version may hold fields this one rejects.
        j["kernel"] = nullptr;
      }
    }
    out["entries"].push_back(std::move(j));
  }
  return out.dump();
}

}  // namespace

void add_cache_functions(nb::module_& m) {
  using nb::arg;
  const auto unlocked = nb::call_guard<nb::gil_scoped_release>();
  m.def("detect_gpu_arch", &detect_gpu_arch, unlocked,
        "Arch of GPU 0 (\"sm_90\"); FMHA_JIT_ARCH or sm_90 without a GPU.");
  m.def("gpu_available", &gpu_available, unlocked);
  m.def(
      "default_cache_dir", [] { return cache::default_cache_root().string(); },
      "FMHA_JIT_CACHE_DIR, else $XDG_CACHE_HOME/fmha-jit, else ~/.cache/fmha-jit.");
  m.def("canonical_config", &canonical_config, arg("config_json"));
  m.def("prebuild", &prebuild, arg("document_json"), arg("cache_dir").none(), arg("jobs"),
        unlocked);
  m.def("cache_info", &cache_info, arg("cache_dir").none(), unlocked);
}

}  // namespace fmha_jit::python
