// The disk cache on fabricated entries: no compiler involved, so every fault is injected exactly.
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <thread>

#include "cache/archive.hpp"
#include "cache/disk_cache.hpp"
#include "cache/file_io.hpp"
#include "cache/hashing.hpp"
#include "cache/key.hpp"
#include "fmha_jit/error.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
using namespace fmha_jit::cache;
namespace fs = std::filesystem;

namespace {

const Expectation kExpect{"sm_90", "nvrtc", "13.0 (test)"};

std::string make_key(int i) { return xxh3_128_hex("entry " + std::to_string(i)); }

EntryFiles make_entry(const std::string& key, std::size_t binary_bytes = 1000) {
  EntryFiles e;
  e.binary.resize(binary_bytes);
  for (std::size_t i = 0; i < binary_bytes; ++i) e.binary[i] = static_cast<std::uint8_t>(i * 7 + 1);
  e.source = "// source of " + key + "\n";
  Manifest& m = e.manifest;
  m.format_version = kCacheFormatVersion;
  m.key = key;
  m.config = {{"family", "fwd"}};
  m.kernel_symbols = {"k_fwd"};
  m.arch = kExpect.arch;
  m.compiler_id = kExpect.compiler_id;
  m.compiler_version = kExpect.compiler_version;
  m.options = {"-arch=sm_90"};
  m.binary_file = "kernel.cubin";
  m.binary_size = e.binary.size();
  m.binary_xxh3 = xxh3_128_hex(e.binary);
  m.source_file = "source.cu";
  m.created = m.last_used = utc_now_iso8601();
  return e;
}

void overwrite(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

// get_or_build with a producer that counts its calls.
int builds_for(DiskCache& cache, const std::string& key) {
  int produced = 0;
  auto got = cache.get_or_build(key, kExpect, [&] {
    ++produced;
    return make_entry(key);
  });
  CHECK(got.entry.binary == make_entry(key).binary);
  return produced;
}

}  // namespace

TEST_CASE("disk cache: store, load, and the entry's files", "[cache]") {
  test::TempDir tmp;
  DiskCache cache(tmp.path());
  REQUIRE(cache.writable());
  const auto key = make_key(1);
  CHECK_FALSE(cache.load(key, kExpect).entry);
  CHECK(cache.load(key, kExpect).rejected.empty());  // a miss is not a rejection
  CHECK(builds_for(cache, key) == 1);
  CHECK(builds_for(cache, key) == 0);  // now a disk hit
  const auto dir = cache.entry_dir(key);
  CHECK(fs::exists(dir / "manifest.json"));
  CHECK(fs::exists(dir / "kernel.cubin"));
  CHECK(fs::exists(dir / "source.cu"));
  // No absolute paths and no leftovers of the atomic install.
  std::ifstream in(dir / "manifest.json");
  const std::string manifest((std::istreambuf_iterator<char>(in)), {});
  CHECK(manifest.find(tmp.path().string()) == std::string::npos);
  for (const auto& f : fs::directory_iterator(dir.parent_path())) {
    CHECK(f.path().filename().string() == key);
  }
}

TEST_CASE("disk cache: damaged entries are never loaded and are rebuilt", "[cache]") {
  test::TempDir tmp;
  DiskCache cache(tmp.path());
  const auto key = make_key(2);
  auto damage_and_expect_rebuild = [&](const std::string& what, auto damage) {
    INFO(what);
    cache.store(make_entry(key));
    REQUIRE(cache.load(key, kExpect).entry);
    damage(cache.entry_dir(key));
    const auto loaded = cache.load(key, kExpect);
    CHECK_FALSE(loaded.entry);
    CHECK_FALSE(loaded.rejected.empty());
    CHECK(builds_for(cache, key) == 1);
    CHECK(cache.load(key, kExpect).entry);
  };
  damage_and_expect_rebuild("truncated binary",
                            [](const fs::path& d) { fs::resize_file(d / "kernel.cubin", 500); });
  damage_and_expect_rebuild("flipped byte", [](const fs::path& d) {
    std::fstream f(d / "kernel.cubin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(123);
    f.put('\x5a');
  });
  damage_and_expect_rebuild("empty binary",
                            [](const fs::path& d) { fs::resize_file(d / "kernel.cubin", 0); });
  damage_and_expect_rebuild("binary missing",
                            [](const fs::path& d) { fs::remove(d / "kernel.cubin"); });
  damage_and_expect_rebuild("manifest missing",
                            [](const fs::path& d) { fs::remove(d / "manifest.json"); });
  damage_and_expect_rebuild("manifest unparsable", [](const fs::path& d) {
    overwrite(d / "manifest.json", "{\"key\": ");
  });
  damage_and_expect_rebuild("manifest names another key", [](const fs::path& d) {
    auto j = to_json(make_entry(make_key(3)).manifest);
    overwrite(d / "manifest.json", j.dump());
  });
  damage_and_expect_rebuild("manifest of another arch", [&](const fs::path& d) {
    auto m = make_entry(key).manifest;
    m.arch = "sm_80";
    overwrite(d / "manifest.json", to_json(m).dump());
  });
  damage_and_expect_rebuild("manifest of another compiler version", [&](const fs::path& d) {
    auto m = make_entry(key).manifest;
    m.compiler_version = "12.4";
    overwrite(d / "manifest.json", to_json(m).dump());
  });
  damage_and_expect_rebuild("manifest naming a file outside the entry", [&](const fs::path& d) {
    auto j = to_json(make_entry(key).manifest);
    j["binary"]["file"] = "../../../../etc/passwd";
    overwrite(d / "manifest.json", j.dump());
  });
}

TEST_CASE("disk cache: unwritable roots degrade to in-memory compiles", "[cache]") {
  test::TempDir tmp;
  SECTION("root is a file") {
    overwrite(tmp.path() / "file", "x");
    DiskCache cache(tmp.path() / "file");
    CHECK_FALSE(cache.writable());
    CHECK_THAT(cache.unwritable_reason(), Catch::Contains("file"));
    const auto key = make_key(4);
    CHECK(builds_for(cache, key) == 1);
    CHECK(builds_for(cache, key) == 1);  // nothing stored: compiled again
  }
  SECTION("root on a read-only filesystem") {
    DiskCache cache("/proc/fmha-jit-cache-test");
    CHECK_FALSE(cache.writable());
    CHECK(builds_for(cache, make_key(5)) == 1);
  }
  SECTION("read-only folder with entries still serves hits") {
    {
      DiskCache writer(tmp.path() / "ro");
      writer.store(make_entry(make_key(6)));
    }
    if (::geteuid() != 0) {  // root ignores permission bits; the /proc case covers root
      fs::permissions(tmp.path() / "ro", fs::perms::owner_read | fs::perms::owner_exec);
      DiskCache cache(tmp.path() / "ro");
      CHECK_FALSE(cache.writable());
      CHECK(builds_for(cache, make_key(6)) == 0);
    }
  }
}

TEST_CASE("disk cache: LRU eviction under the size cap", "[cache]") {
  test::TempDir tmp;
  DiskCache cache(tmp.path(), 12000);  // room for about five 2000-byte entries with manifests
  std::vector<std::string> keys;
  for (int i = 0; i < 8; ++i) {
    keys.push_back(make_key(100 + i));
    int produced = 0;
    cache.get_or_build(keys.back(), kExpect, [&] {
      ++produced;
      return make_entry(keys.back(), 2000);
    });
    // Distinct last-used times: age each entry by its index.
    const auto when = fs::file_time_type::clock::now() - std::chrono::hours(100 - i);
    fs::last_write_time(cache.entry_dir(keys.back()) / "manifest.json", when);
  }
  std::uint64_t total = 0;
  for (const auto& e : cache.list()) total += e.bytes;
  CHECK(total <= 12000);
  CHECK(cache.load(keys.back(), kExpect).entry);         // newest kept
  CHECK_FALSE(cache.load(keys.front(), kExpect).entry);  // oldest evicted
  // A hit refreshes the LRU clock.
  const auto before = fs::last_write_time(cache.entry_dir(keys.back()) / "manifest.json");
  CHECK(cache.load(keys.back(), kExpect).entry);
  CHECK(fs::last_write_time(cache.entry_dir(keys.back()) / "manifest.json") > before);
}

TEST_CASE("disk cache: concurrent stores of one key leave one valid entry", "[cache]") {
  test::TempDir tmp;
  DiskCache cache(tmp.path());
  const auto key = make_key(7);
  std::atomic<int> produced{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      cache.get_or_build(key, kExpect, [&] {
        ++produced;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return make_entry(key);
      });
    });
  }
  for (auto& t : threads) t.join();
  CHECK(produced == 1);  // flock: the others waited, checked again and loaded
  CHECK(cache.list().size() == 1);
}

TEST_CASE("disk cache: verify, fix and clear", "[cache]") {
  test::TempDir tmp;
  DiskCache cache(tmp.path());
  for (int i = 0; i < 3; ++i) cache.store(make_entry(make_key(10 + i)));
  fs::resize_file(cache.entry_dir(make_key(11)) / "kernel.cubin", 10);
  auto report = cache.verify(false);
  CHECK(report.ok == 2);
  CHECK(report.bad == 1);
  CHECK_THAT(report.problems.at(0), Catch::Contains(make_key(11)));
  report = cache.verify(true);
  CHECK(report.removed == 1);
  CHECK(cache.verify(false).bad == 0);
  CHECK(cache.clear() == 2);
  CHECK(cache.list().empty());
}

TEST_CASE("file lock: exclusive, and free again when its holder dies", "[cache]") {
  test::TempDir tmp;
  const auto path = tmp.path() / "k.lock";
  {
    FileLock a(path, std::chrono::milliseconds(0));
    REQUIRE(a.locked());
    FileLock b(path, std::chrono::milliseconds(30));
    CHECK_FALSE(b.locked());
    CHECK_THAT(b.error(), Catch::Contains("timed out"));
  }
  // A child takes the lock and is killed while holding it.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
    ::flock(fd, LOCK_EX);
    (void)::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  CHECK_FALSE(FileLock(path, std::chrono::milliseconds(0)).locked());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK(FileLock(path, std::chrono::milliseconds(1000)).locked());
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_CASE("archive: export and import round trip; tampered entries are rejected", "[cache]") {
  test::TempDir tmp;
  DiskCache source(tmp.path() / "a");
  for (int i = 0; i < 3; ++i) source.store(make_entry(make_key(20 + i)));
  const auto file = tmp.path() / "cache.fmha";
  CHECK(export_archive(source, file).exported == 3);

  DiskCache target(tmp.path() / "b");
  auto report = import_archive(target, file);
  CHECK(report.imported == 3);
  CHECK(report.rejected.empty());
  for (int i = 0; i < 3; ++i) CHECK(target.load(make_key(20 + i), kExpect).entry);
  CHECK(import_archive(target, file).already_present == 3);

  // Flip a byte inside the first binary in the archive: that entry must be rejected.
  auto bytes = *read_file(file);
  const auto binary = make_entry(make_key(20)).binary;
  auto at = std::search(bytes.begin(), bytes.end(), binary.begin(), binary.begin() + 64);
  REQUIRE(at != bytes.end());
  at[10] ^= 0xff;
  write_file_atomically(file, bytes);
  DiskCache third(tmp.path() / "c");
  report = import_archive(third, file);
  CHECK(report.rejected.size() == 1);
  CHECK(report.imported == 2);

  overwrite(file, "not an archive");
  CHECK_THROWS_AS(import_archive(third, file), Error);
}

TEST_CASE("atomic write: replaces whole files and leaves no temporaries", "[cache]") {
  test::TempDir tmp;
  const auto file = tmp.path() / "f.bin";
  const std::vector<std::uint8_t> a(100, 1), b(50, 2);
  write_file_atomically(file, a);
  write_file_atomically(file, b);
  CHECK(*read_file(file) == b);
  CHECK(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()) == 1);
  CHECK_THROWS_AS(write_file_atomically(tmp.path() / "missing" / "f", a), Error);
}

TEST_CASE("disk cache: installs cut short by a killed process are cleaned up", "[cache]") {
  test::TempDir tmp;
  DiskCache cache(tmp.path());
  const auto key = make_key(30), other = make_key(31);
  const auto shard = cache.entry_dir(key).parent_path();
  fs::create_directories(shard);
  // What SIGKILL leaves: a staging folder mid-install and a trash folder mid-removal.
  fs::create_directories(shard / (".staging-" + key + "-123-4-5-6"));
  std::ofstream(shard / (".staging-" + key + "-123-4-5-6") / "kernel.cubin") << "partial";
  fs::create_directories(shard / ".trash-123-4-5-7");
  const auto other_shard = cache.entry_dir(other).parent_path();
  fs::create_directories(other_shard / (".staging-" + other + "-9-9-9-9"));
  auto report = cache.verify(false);
  CHECK(report.leftovers == 3);
  CHECK(report.leftovers_removed == 0);
  CHECK(report.bad == 0);
  {
    // A staging folder whose key is locked may be a live install: verify --fix leaves it.
    FileLock held(cache.version_dir() / "locks" / (other + ".lock"), std::chrono::milliseconds(0));
    REQUIRE(held.locked());
    report = cache.verify(true);
    CHECK(report.leftovers_removed == 2);
    CHECK(fs::exists(other_shard / (".staging-" + other + "-9-9-9-9")));
  }
  // The next compile of a key, under its lock, removes that key's leftovers itself.
  CHECK(builds_for(cache, other) == 1);
  CHECK_FALSE(fs::exists(other_shard / (".staging-" + other + "-9-9-9-9")));
  CHECK(cache.verify(false).leftovers == 0);
}
