// The JIT pipeline: resolve -> render -> key -> memory -> disk -> compile -> store.
#include "dispatcher/pipeline.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <mutex>

#include "cache/cache_dir.hpp"
#include "cache/disk_cache.hpp"
#include "cache/file_io.hpp"
#include "cache/hashing.hpp"
#include "cache/memory_cache.hpp"
#include "codegen/kernel_name.hpp"
#include "codegen/rtc/compiler.hpp"
#include "codegen/templates.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/registry.hpp"

namespace fmha_jit::dispatch {
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

// Tells the observer (if any) that a compile of `key` begins, and that it ended on destruction
// (failed unless succeeded() was called).
class ObservedCompile {
 public:
  ObservedCompile(const std::string& key, const FmhaKernelConfig& canonical)
      : key_(key), observer_(current_observer()), start_(std::chrono::steady_clock::now()) {
    if (!observer_) return;
    kernel_ = codegen::kernel_base_name(canonical);
    (*observer_)(CompileEvent{key_, kernel_});
  }
  ~ObservedCompile() {
    if (!observer_) return;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
    (*observer_)(CompileEvent{key_, kernel_, true, !succeeded_, took.count()});
  }
  ObservedCompile(const ObservedCompile&) = delete;
  ObservedCompile& operator=(const ObservedCompile&) = delete;
  void succeeded() { succeeded_ = true; }

 private:
  const std::string& key_;
  std::shared_ptr<const CompileObserver> observer_;
  std::chrono::steady_clock::time_point start_;
  std::string kernel_;
  bool succeeded_ = false;
};

cache::EntryFiles compile_entry(const KeyedConfig& k, const fs::path& root) {
  const auto& compiler = codegen::rtc::compiler_for(k.resolved.canonical.arch);
  codegen::rtc::CompileRequest request;
  request.entry = {k.entry.file_name, k.entry.source};
  for (const auto* t : codegen::TemplateSet::embedded().closure(k.entry.source)) {
    request.headers.push_back({t->path, t->text});
  }
  request.arch = k.resolved.canonical.arch;
  request.options = k.inputs.options;
  codegen::rtc::CompileOutput out;
  try {
    ObservedCompile observed(k.key, k.resolved.canonical);
    out = compiler.compile(request);
    observed.succeeded();
  } catch (const CompileError& e) {
    const std::string path = save_failed_compile(root, k, e);
    throw CompileError(std::string(e.what()) + "; source: " + path, e.log(), e.options(), path);
  }
  cache::EntryFiles files;
  cache::Manifest& m = files.manifest;
  m.format_version = k.inputs.format_version;
  m.key = k.key;
  m.config = to_json(k.resolved.canonical);
  m.kernel_symbols = k.entry.symbols;
  m.arch = k.resolved.canonical.arch;
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

cache::KeyInputs key_inputs(const FmhaKernelConfig& canonical, const codegen::RenderedEntry& entry,
                            const codegen::rtc::RtcCompiler& compiler,
                            const codegen::TemplateSet& templates) {
  cache::KeyInputs in;
  in.canonical_config = to_json(canonical).dump();
  in.arch = canonical.arch;
  in.compiler_id = std::string(compiler.id());
  in.compiler_version = compiler.version();
  in.options = compiler.options(canonical);
  in.entry_hash = cache::xxh3_128_hex(entry.source);
  for (const auto* t : templates.closure(entry.source)) {
    in.templates.emplace_back(std::string(t->path), std::string(t->sha256));
  }
  return in;
}

KeyedConfig key_config(kernels::ResolvedConfig resolved) {
  KeyedConfig k;
  k.resolved = std::move(resolved);
  const FmhaKernelConfig& canonical = k.resolved.canonical;
  k.entry = kernels::render_entry(canonical);
  const auto& compiler = codegen::rtc::compiler_for(canonical.arch);
  k.inputs = key_inputs(canonical, k.entry, compiler, codegen::TemplateSet::embedded());
  k.key = cache::compute_key(k.inputs);
  return k;
}

KeyedConfig key_config(const FmhaKernelConfig& config) {
  return key_config(kernels::resolve(config));
}

Obtained obtain_kernel(const KeyedConfig& k, const fs::path& cache_root) {
  BinarySource source = BinarySource::memory;
  // Keyed by root and key: a kernel obtained for one cache root must still be stored in another.
  auto kernel = compiled_kernels().get_or_build(cache_root.native() + '\n' + k.key, [&]() {
    cache::DiskCache& disk = disk_cache(cache_root);
    const cache::Expectation expect{k.resolved.canonical.arch, k.inputs.compiler_id,
                                    k.inputs.compiler_version};
    auto got = disk.get_or_build(k.key, expect, [&] { return compile_entry(k, cache_root); });
    source = got.compiled ? BinarySource::compiled : BinarySource::disk;
    return std::make_shared<const CompiledKernel>(CompiledKernel{
        k.key, k.resolved.canonical, std::move(got.entry.manifest), std::move(got.entry.binary)});
  });
  return {std::move(kernel), source};
}

void set_compile_observer(CompileObserver observer) {
  auto next = observer ? std::make_shared<const CompileObserver>(std::move(observer)) : nullptr;
  std::lock_guard lock(observer_mutex);
  compile_observer = std::move(next);
}

void clear_compiled_kernels() { compiled_kernels().clear(); }

}  // namespace fmha_jit::dispatch
