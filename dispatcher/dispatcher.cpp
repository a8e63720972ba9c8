#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <type_traits>

#include "cache/cache_dir.hpp"
#include "cache/disk_cache.hpp"
#include "cache/file_io.hpp"
#include "cache/hashing.hpp"
#include "cache/memory_cache.hpp"
#include "codegen/heuristics.hpp"
#include "codegen/render.hpp"
#include "codegen/rtc/compiler.hpp"
#include "codegen/templates.hpp"
#include "dispatcher/environment.hpp"
#include "dispatcher/pipeline.hpp"
#include "dispatcher/runner.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit {
namespace dispatch {
namespace fs = std::filesystem;

namespace {

cache::MemoryCache<CompiledKernel>& compiled_kernels() {
  static cache::MemoryCache<CompiledKernel> cache;
  return cache;
}

// One DiskCache per root: construction probes the folder, which should happen once per process.
cache::DiskCache& disk_cache(const fs::path& root) {
  static std::mutex mutex;
  static std::map<fs::path, std::unique_ptr<cache::DiskCache>> caches;
  std::lock_guard lock(mutex);
  auto& slot = caches[root];
  if (!slot) slot = std::make_unique<cache::DiskCache>(root, cache::cache_max_bytes_from_env());
  return *slot;
}

// Writes the rendered source and the log of a failed compile where a user can find them.
std::string save_failed_compile(const fs::path& root, const KeyedConfig& k, const CompileError& e) {
  std::error_code ec;
  for (const fs::path& dir : {disk_cache(root).version_dir() / "failed" / k.key,
                              fs::temp_directory_path() / "fmha-jit-failed" / k.key}) {
    fs::create_directories(dir, ec);
    if (ec) continue;
    try {
      auto bytes = [](const std::string& s) {
        return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(s.data()),
                                             s.size());
      };
      cache::write_file_atomically(dir / k.entry.file_name, bytes(k.entry.source));
      cache::write_file_atomically(dir / "compile.log", bytes(e.log()));
      return (dir / k.entry.file_name).string();
    } catch (const Error&) {
    }
  }
  return "(not saved: no writable folder)";
}

// Read on every compile, set by tests: a shared_ptr swapped under a mutex so that an observer can
// be replaced while other threads are inside a compile.
std::mutex observer_mutex;
std::shared_ptr<const CompileObserver> compile_observer;

std::shared_ptr<const CompileObserver> current_observer() {
  std::lock_guard lock(observer_mutex);
  return compile_observer;
}

// Tells the observer (if any) that a compile of `key` begins, and that it ended on destruction.
class ObservedCompile {
 public:
  explicit ObservedCompile(const std::string& key) : key_(key), observer_(current_observer()) {
    if (observer_) (*observer_)(key_, false);
  }
  ~ObservedCompile() {
    if (observer_) (*observer_)(key_, true);
  }
  ObservedCompile(const ObservedCompile&) = delete;
  ObservedCompile& operator=(const ObservedCompile&) = delete;

 private:
  const std::string& key_;
  std::shared_ptr<const CompileObserver> observer_;
};

cache::EntryFiles compile_entry(const KeyedConfig& k, const fs::path& root) {
  const auto& compiler = codegen::rtc::compiler_for(k.canonical.arch);
  codegen::rtc::CompileRequest request;
  request.entry = {k.entry.file_name, k.entry.source};
  for (const auto* t : codegen::TemplateSet::embedded().closure(k.entry.source)) {
    request.headers.push_back({t->path, t->text});
  }
  request.arch = k.canonical.arch;
  request.options = k.inputs.options;
  codegen::rtc::CompileOutput out;
  try {
    ObservedCompile observed(k.key);
    out = compiler.compile(request);
  } catch (const CompileError& e) {
    const std::string path = save_failed_compile(root, k, e);
    throw CompileError(std::string(e.what()) + "; source: " + path, e.log(), e.options(), path);
  }
  cache::EntryFiles files;
  cache::Manifest& m = files.manifest;
  m.format_version = k.inputs.format_version;
  m.key = k.key;
  m.config = to_json(k.canonical);
  m.kernel_symbols = k.entry.symbols;
  m.arch = k.canonical.arch;
  m.compiler_id = k.inputs.compiler_id;
  m.compiler_version = k.inputs.compiler_version;
  m.options = k.inputs.options;
  m.templates = k.inputs.templates;
  m.binary_file = std::string(compiler.binary_file_name());
  m.binary_size = out.binary.size();
  m.binary_xxh3 = cache::xxh3_128_hex(out.binary);
  m.source_file = "source.cu";
  m.resources = std::move(out.resources);
  m.compile_seconds = out.seconds;
  m.created = m.last_used = cache::utc_now_iso8601();
  m.fmha_jit_version = FMHA_JIT_VERSION;
  files.binary = std::move(out.binary);
  files.source = k.entry.source;
  for (const auto& r : m.resources) {
    if (r.spill_store_bytes > 0 || r.spill_load_bytes > 0) {
      spdlog::warn("{} spills {} / {} bytes (store / load)", r.symbol, r.spill_store_bytes,
                   r.spill_load_bytes);
    }
    if (r.wgmma_serialized) {
      spdlog::warn("{}: ptxas serialised its wgmma instructions (no MMA overlaps other work)",
                   r.symbol);
    }
  }
  return files;
}

}  // namespace

KeyedConfig key_config(const FmhaKernelConfig& config) {
  KeyedConfig k;
  k.canonical = canonicalize(config);
  k.entry = codegen::render_entry(k.canonical);
  const auto& compiler = codegen::rtc::compiler_for(k.canonical.arch);
  k.inputs = cache::key_inputs(k.canonical, k.entry, compiler, codegen::TemplateSet::embedded());
  k.key = cache::compute_key(k.inputs);
  return k;
}

Obtained obtain_kernel(const FmhaKernelConfig& config, const fs::path& cache_root) {
  const KeyedConfig k = key_config(config);
  BinarySource source = BinarySource::memory;
  // Keyed by root and key: a kernel obtained for one cache root must still be stored in another.
  auto kernel = compiled_kernels().get_or_build(cache_root.native() + '\n' + k.key, [&]() {
    cache::DiskCache& disk = disk_cache(cache_root);
    const cache::Expectation expect{k.canonical.arch, k.inputs.compiler_id,
                                    k.inputs.compiler_version};
    auto got = disk.get_or_build(k.key, expect, [&] { return compile_entry(k, cache_root); });
    source = got.compiled ? BinarySource::compiled : BinarySource::disk;
    return std::make_shared<const CompiledKernel>(CompiledKernel{
        k.key, k.canonical, std::move(got.entry.manifest), std::move(got.entry.binary)});
  });
  return {std::move(kernel), source};
}

void set_compile_observer(CompileObserver observer) {
  auto next = observer ? std::make_shared<const CompileObserver>(std::move(observer)) : nullptr;
  std::lock_guard lock(observer_mutex);
  compile_observer = std::move(next);
}

void clear_memory_cache() {
  compiled_kernels().clear();
  clear_runner_memo();
}

}  // namespace dispatch

std::string_view to_string(BinarySource source) {
  switch (source) {
    case BinarySource::memory: return "memory";
    case BinarySource::disk: return "disk";
    case BinarySource::compiled: return "compiled";
  }
  return "?";
}

FmhaSetupResult setup_fmha_dispatcher(const FmhaKernelConfig& config, const SetupOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  FmhaSetupResult result;
  try {
    const std::filesystem::path root =
        options.cache_dir ? *options.cache_dir : cache::default_cache_root();
    // Fast path: a config this process has already set up for this root returns its runner with
    // no canonicalisation, rendering or hashing.
    if (auto runner = dispatch::find_runner_memo(config, root)) {
      result.source = BinarySource::memory;
      result.runner = runner;
    } else {
      // Before any work: a variable set wrong is an error now, not when some later path reads it
      // (a disk hit never reads the lock timeout). The memo's fast path above reads none of them,
      // and a third of its time went to this check.
      dispatch::check_environment();
      if (const std::string why = codegen::impl_fallback_reason(config); !why.empty()) {
        spdlog::info("{} {}: {}", to_string(config.family), config.arch, why);
      }
      auto obtained = dispatch::obtain_kernel(config, root);
      result.source = obtained.source;
      result.runner = dispatch::make_runner(config, root, std::move(obtained.kernel));
    }
    result.key = result.runner->key();
    result.config = result.runner->config();
    if (options.load && gpu_available()) dispatch::ensure_loaded(*result.runner);
    result.success = true;
  } catch (const Error& e) {
    result.error = e.what();
    result.error_code = e.code();
    result.runner.reset();
  } catch (const std::exception& e) {
    result.error = e.what();
    result.runner.reset();
  }
  result.build_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace fmha_jit
