// The cache key changes when any one of its inputs changes (docs/CACHE_FORMAT.md).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include "cache/key.hpp"
#include "codegen/render.hpp"
#include "codegen/rtc/compiler.hpp"
#include "codegen/templates.hpp"
#include "dispatcher/pipeline.hpp"
#include "kernels/registry.hpp"
#include "support/dynamic_library.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;

namespace {

// A compiler stand-in: the key needs only identity, version and options.
class FakeCompiler final : public codegen::rtc::RtcCompiler {
 public:
  std::string id_ = "nvrtc", version_ = "13.0 (libnvrtc, 109338064 bytes)";
  std::vector<std::string> extra_;
  std::string_view id() const override { return id_; }
  const std::string& version() const override { return version_; }
  std::string_view binary_file_name() const override { return "kernel.cubin"; }
  std::vector<std::string> options(const FmhaKernelConfig& c) const override {
    auto o = std::vector<std::string>{"-arch=" + c.arch, "-std=c++17"};
    o.insert(o.end(), extra_.begin(), extra_.end());
    return o;
  }
  codegen::rtc::CompileOutput compile(const codegen::rtc::CompileRequest&) const override {
    return {};
  }
};

std::string key_of(const FmhaKernelConfig& config, const FakeCompiler& compiler,
                   const codegen::TemplateSet& templates = codegen::TemplateSet::embedded()) {
  const auto canonical = canonicalize(config);
  const auto entry = kernels::render_entry(canonical);
  return cache::compute_key(dispatch::key_inputs(canonical, entry, compiler, templates));
}

// SHA-256 of a file by CMake, the same tool that hashes templates at build time.
std::string cmake_sha256(const std::filesystem::path& file) {
  const auto r =
      test::run_command(std::string(FMHA_JIT_CMAKE) + " -E sha256sum '" + file.string() + "'");
  REQUIRE(r.status == 0);
  return r.output.substr(0, 64);
}

}  // namespace

TEST_CASE("key: 32 hex digits, stable for equal inputs", "[key]") {
  FakeCompiler compiler;
  const auto config = test::small_config();
  const std::string k = key_of(config, compiler);
  CHECK(k.size() == 32);
  CHECK(k.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(key_of(config, compiler) == k);
}

TEST_CASE("key: every config field changes the key", "[key]") {
  FakeCompiler compiler;
  const auto base = test::small_config(Family::bwd);
  std::set<std::string> keys{key_of(base, compiler)};
  std::vector<FmhaKernelConfig> variants;
  auto add = [&](auto mutate) {
    FmhaKernelConfig c = base;
    mutate(c);
    variants.push_back(c);
  };
  add([](auto& c) { c.family = Family::fwd; });
  add([](auto& c) { c.dtype = DType::fp16; });
  add([](auto& c) { c.hdim_q = c.hdim_v = 128; });
  add([](auto& c) { c.hdim_q = 192, c.hdim_v = 128; });
  add([](auto& c) { c.arch = "sm_80"; });
  add([](auto& c) { c.arch = "sm_90a"; });
  add([](auto& c) { c.arch = "gfx90a"; });
  add([](auto& c) { c.deterministic = true; });
  add([](auto& c) { c.mask = MaskKind::causal_top_left; });
  add([](auto& c) { c.mask = MaskKind::causal_bottom_right; });
  add([](auto& c) { c.mask = MaskKind::sliding_window; });
  for (const auto& v : variants) {
    INFO(to_json(v).dump());
    CHECK(keys.insert(key_of(v, compiler)).second);
  }
  // Fields that do not apply to the family canonicalise away and must NOT change the key.
  FmhaKernelConfig bwd_lse = base;
  bwd_lse.lse = !base.lse;
  CHECK(key_of(bwd_lse, compiler) == key_of(base, compiler));
}

TEST_CASE("key: fwd lse output changes the key", "[key]") {
  FakeCompiler compiler;
  auto a = test::small_config(Family::fwd);
  auto b = a;
  b.lse = !a.lse;
  CHECK(key_of(a, compiler) != key_of(b, compiler));
}

TEST_CASE("key: compiler identity, version, options and format version", "[key]") {
  FakeCompiler compiler;
  const auto config = test::small_config();
  const auto canonical = canonicalize(config);
  const auto entry = kernels::render_entry(canonical);
  const auto base =
      dispatch::key_inputs(canonical, entry, compiler, codegen::TemplateSet::embedded());
  const std::string k = cache::compute_key(base);
  auto changed = [&](auto mutate) {
    cache::KeyInputs in = base;
    mutate(in);
    return cache::compute_key(in) != k;
  };
  CHECK(changed([](auto& in) { in.compiler_id = "hiprtc"; }));
  CHECK(changed([](auto& in) { in.compiler_version = "13.1 (libnvrtc, 109361232 bytes)"; }));
  CHECK(changed([](auto& in) { in.options.push_back("-lineinfo"); }));
  CHECK(changed([](auto& in) { in.options.back() = "-std=c++20"; }));
  CHECK(changed([](auto& in) { std::swap(in.options.front(), in.options.back()); }));
  CHECK(changed([](auto& in) { in.arch = "sm_80"; }));
  CHECK(changed([](auto& in) { in.format_version += 1; }));
  CHECK(changed([](auto& in) { in.entry_hash[0] = in.entry_hash[0] == 'a' ? 'b' : 'a'; }));
  CHECK(changed([](auto& in) { in.canonical_config += " "; }));
  CHECK(changed([](auto& in) { in.templates.front().second[5] ^= 1; }));
  CHECK(changed([](auto& in) { in.templates.pop_back(); }));
  // Length prefixes: moving a character between adjacent fields changes the key.
  CHECK(changed([](auto& in) { in.options = {"-arch=sm_90 -std=c++17"}; }));

  FakeCompiler other = compiler;
  other.extra_ = {"-DX=1"};
  CHECK(key_of(config, other) != key_of(config, compiler));
}

TEST_CASE("key: the RTC library's identity is its name and size, not its packaging", "[key]") {
  // One NVRTC build ships as a plain libnvrtc.so.13 in one toolkit packaging and as a symlink to
  // libnvrtc.so.13.0.88 in another: a cache warmed on one must hit on the other, while another
  // build (another size) must not.
  test::TempDir dir;
  auto write = [&](const std::string& name, std::size_t bytes) {
    std::ofstream(dir.path() / name, std::ios::binary) << std::string(bytes, 'x');
    return (dir.path() / name).string();
  };
  const std::string plain = write("libnvrtc.so.13", 4096);
  std::filesystem::create_directory(dir.path() / "other");
  const std::string patch = write("other/libnvrtc.so.13.0.88", 4096);
  const std::string update = write("libnvrtc.so.13.1.0", 4097);
  CHECK(support::library_identity(plain) == "libnvrtc, 4096 bytes");
  CHECK(support::library_identity(patch) == support::library_identity(plain));
  CHECK(support::library_identity(update) != support::library_identity(plain));
  // Unreadable: the name alone, so the version string still says which library it was.
  CHECK(support::library_identity((dir.path() / "libhiprtc.so.5").string()) == "libhiprtc");
}

TEST_CASE("key: embedded template hashes are the SHA-256 of the source files", "[key]") {
  const auto& set = codegen::TemplateSet::embedded();
  REQUIRE_FALSE(set.all().empty());
  for (const auto& t : set.all()) {
    INFO(t.path);
    CHECK(cmake_sha256(std::filesystem::path(FMHA_JIT_SOURCE_DIR) / "templates" / t.path) ==
          t.sha256);
  }
}

TEST_CASE("key: one byte of any included template changes the key", "[key]") {
  FakeCompiler compiler;
  test::TempDir tmp;
  for (Family family : {Family::fwd, Family::bwd}) {
    const auto config = test::small_config(family);
    const auto canonical = canonicalize(config);
    const auto entry = kernels::render_entry(canonical);
    const auto& embedded = codegen::TemplateSet::embedded();
    const std::string base_key = key_of(config, compiler);
    const auto closure = embedded.closure(entry.source);
    REQUIRE(closure.size() >= 3);  // entry -> family header -> common headers
    for (const auto* target : closure) {
      INFO(target->path);
      // Flip one byte of this template, hash it as the build would, rebuild the set.
      std::string text(target->text);
      text[text.size() / 2] ^= 0x20;
      const auto file = tmp.path() / "modified.h";
      std::ofstream(file, std::ios::binary) << text;
      const std::string sha = cmake_sha256(file);
      CHECK(sha != target->sha256);
      std::vector<codegen::EmbeddedTemplate> modified;
      for (const auto& t : embedded.all()) {
        modified.push_back(&t == target ? codegen::EmbeddedTemplate{t.path, text, sha} : t);
      }
      const codegen::TemplateSet set(std::move(modified));
      CHECK(key_of(config, compiler, set) != base_key);
    }
  }
}
