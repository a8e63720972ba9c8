// A runner shared by threads, streams and a long process: gradients of the deterministic mode
// must be the same bits whoever else runs at the same time, whatever ran before, and in another
// process. The host-side bookkeeping behind this is followed without a GPU in
// tests/rtc/test_runner_state.cpp; here the kernels run.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "fmha_jit/device.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "support/test_support.hpp"
#include "tools/npy/npy.hpp"

using namespace fmha_jit;

namespace {

std::uint16_t bf16_bits(float x) {  // round to nearest even; the inputs are finite
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float bf16_value(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t{h} << 16); }

DeviceBuffer upload(const std::vector<std::uint16_t>& bits) {
  DeviceBuffer b(bits.size() * 2);
  b.upload(bits.data(), bits.size() * 2);
  return b;
}

std::vector<std::uint16_t> random_bits(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(n));
  for (auto& b : bits) b = bf16_bits(dist(rng));
  return bits;
}

std::vector<std::uint16_t> download_bits(const DeviceBuffer& b, std::int64_t n) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(n));
  b.download(bits.data(), bits.size() * 2);
  return bits;
}

FmhaKernelConfig config_of(Family family, MaskKind mask, KernelImpl impl) {
  FmhaKernelConfig c;
  c.family = family;
  c.dtype = DType::bf16;
  c.hdim_q = c.hdim_v = 128;
  c.mask = mask;
  c.impl = impl;
  c.deterministic = family == Family::bwd;
  c.arch = detect_gpu_arch();
  return c;
}

std::shared_ptr<FmhaRunner> setup(const FmhaKernelConfig& config,
                                  const test::TempDir* root = nullptr) {
  SetupOptions options;
  if (root) options.cache_dir = root->path();
  const auto r = setup_fmha_dispatcher(config, options);
  INFO(r.error);
  REQUIRE(r.success);
  return r.runner;
}

// Inputs of a backward, with O and LSE from the forward kernel of the same mask.
struct Inputs {
  std::vector<std::uint16_t> q, k, v, d_o, o;
  std::vector<float> lse;
  DeviceBuffer d_o_dev, d_lse;
  DeviceBuffer q_dev, k_dev, v_dev, o_dev;
};

Inputs make_inputs(const FmhaProblem& p, MaskKind mask, std::uint32_t seed) {
  Inputs in;
  in.q = random_bits(p.q_elements(), seed);
  in.k = random_bits(p.k_elements(), seed + 1);
  in.v = random_bits(p.v_elements(), seed + 2);
  in.d_o = random_bits(p.o_elements(), seed + 3);
  in.q_dev = upload(in.q);
  in.k_dev = upload(in.k);
  in.v_dev = upload(in.v);
  in.d_o_dev = upload(in.d_o);
  in.o_dev = DeviceBuffer(p.o_elements() * 2);
  in.d_lse = DeviceBuffer(p.lse_elements() * 4);
  auto fwd = setup(config_of(Family::fwd, mask, KernelImpl::automatic));
  fwd->run_fwd(p, {in.q_dev.data(), in.k_dev.data(), in.v_dev.data(), in.o_dev.data(),
                   static_cast<float*>(in.d_lse.data())});
  device_synchronize();
  in.o = download_bits(in.o_dev, p.o_elements());
  in.lse.resize(static_cast<std::size_t>(p.lse_elements()));
  in.d_lse.download(in.lse.data(), in.lse.size() * 4);
  return in;
}

struct Gradients {
  DeviceBuffer dq, dk, dv;
  std::vector<std::uint16_t> bits[3];
};

// NaN-poisoned gradient buffers, so a gradient a kernel leaves unwritten differs.
Gradients poisoned_gradients(const FmhaProblem& p) {
  Gradients g{DeviceBuffer(p.q_elements() * 2),
              DeviceBuffer(p.k_elements() * 2),
              DeviceBuffer(p.v_elements() * 2),
              {}};
  g.dq.fill(0xFF);
  g.dk.fill(0xFF);
  g.dv.fill(0xFF);
  return g;
}

void launch_bwd(FmhaRunner& runner, const FmhaProblem& p, const Inputs& in, Gradients& g,
                void* stream) {
  runner.run_bwd(p,
                 {in.q_dev.data(), in.k_dev.data(), in.v_dev.data(), in.o_dev.data(),
                  static_cast<const float*>(in.d_lse.data()), in.d_o_dev.data(), g.dq.data(),
                  g.dk.data(), g.dv.data()},
                 stream);
}

void download(Gradients& g, const FmhaProblem& p) {
  g.bits[0] = download_bits(g.dq, p.q_elements());
  g.bits[1] = download_bits(g.dk, p.k_elements());
  g.bits[2] = download_bits(g.dv, p.v_elements());
}

void check_same_bits(const Gradients& got, const Gradients& want, const char* what) {
  const char* names[3] = {"dQ", "dK", "dV"};
  for (int t = 0; t < 3; ++t) {
    INFO(what << ": " << names[t]);
    REQUIRE(got.bits[t].size() == want.bits[t].size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < got.bits[t].size(); ++i)
      differ += got.bits[t][i] != want.bits[t][i];
    CHECK(differ == 0);
  }
}

const char* cli_path() {
  const char* env = std::getenv("FMHA_JIT_CLI");
  return env && *env ? env : FMHA_JIT_CLI;
}

}  // namespace

TEST_CASE("gpu runner: 4 threads on 2 streams give the single-threaded gradients bit for bit",
          "[gpu]") {
  const FmhaProblem p = test::sized_problem(2, 8, 2, 1500, 1500, 128);
  for (KernelImpl impl : {KernelImpl::automatic, KernelImpl::mma_sm80}) {
    INFO("impl " << to_string(impl));
    const Inputs in = make_inputs(p, MaskKind::causal_top_left, 71000);
    auto runner = setup(config_of(Family::bwd, MaskKind::causal_top_left, impl));
    Gradients want = poisoned_gradients(p);
    launch_bwd(*runner, p, in, want, nullptr);
    device_synchronize();
    download(want, p);

    // Every call writes its own gradients and takes the runner's scratch (no workspace given).
    constexpr int kThreads = 4, kCalls = 6;
    DeviceStream streams[2];
    std::vector<Gradients> got;
    for (int i = 0; i < kThreads * kCalls; ++i) got.push_back(poisoned_gradients(p));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int c = 0; c < kCalls; ++c) {
          launch_bwd(*runner, p, in, got[t * kCalls + c], streams[(t + c) % 2].handle());
        }
      });
    }
    for (auto& th : threads) th.join();
    for (auto& s : streams) s.synchronize();
    for (std::size_t i = 0; i < got.size(); ++i) {
      download(got[i], p);
      INFO("call " << i);
      check_same_bits(got[i], want, "threaded");
    }
  }
}

TEST_CASE(
    "gpu runner: a deterministic shape's bits do not depend on what ran before, nor on the "
    "process",
    "[gpu]") {
  // 8 (kv head, batch) pairs of long causal chains: on Hopper the planned order alternates the
  // chains' directions (bwd_causal_sections), unlike the order without a plan.
  const FmhaProblem shape = test::sized_problem(8, 4, 1, 8704, 8704, 128);
  const MaskKind mask = MaskKind::causal_top_left;
  const Inputs in = make_inputs(shape, mask, 72000);
  const FmhaKernelConfig bwd = config_of(Family::bwd, mask, KernelImpl::automatic);
  const FmhaKernelConfig fwd = config_of(Family::fwd, mask, KernelImpl::automatic);

  // Each cache root has its own runner: a fresh one, and one that runs 200 other shapes first.
  test::TempDir fresh_root, busy_root;
  Gradients fresh = poisoned_gradients(shape);
  launch_bwd(*setup(bwd, &fresh_root), shape, in, fresh, nullptr);
  DeviceBuffer fresh_o(shape.o_elements() * 2), fresh_lse(shape.lse_elements() * 4);
  setup(fwd, &fresh_root)
      ->run_fwd(shape, {in.q_dev.data(), in.k_dev.data(), in.v_dev.data(), fresh_o.data(),
                        static_cast<float*>(fresh_lse.data())});
  device_synchronize();
  download(fresh, shape);

  auto busy_bwd = setup(bwd, &busy_root);
  auto busy_fwd = setup(fwd, &busy_root);
  {
    const FmhaProblem largest = test::sized_problem(1, 2, 2, 263, 263, 128);
    DeviceBuffer scratch(largest.q_elements() * 2 * 9);
    scratch.fill(0);
    auto* base = static_cast<unsigned char*>(scratch.data());
    const std::size_t n = largest.q_elements() * 2;
    for (int i = 0; i < 200; ++i) {
      const FmhaProblem other = test::sized_problem(1, 2, 2, 64 + i, 64 + i, 128);
      busy_bwd->run_bwd(other, {base, base + n, base + 2 * n, base + 3 * n,
                                reinterpret_cast<const float*>(base + 4 * n), base + 5 * n,
                                base + 6 * n, base + 7 * n, base + 8 * n});
      busy_fwd->run_fwd(other, {base, base + n, base + 2 * n, base + 3 * n,
                                reinterpret_cast<float*>(base + 4 * n)});
    }
    device_synchronize();
  }
  Gradients busy = poisoned_gradients(shape);
  launch_bwd(*busy_bwd, shape, in, busy, nullptr);
  DeviceBuffer busy_o(shape.o_elements() * 2), busy_lse(shape.lse_elements() * 4);
  busy_fwd->run_fwd(shape, {in.q_dev.data(), in.k_dev.data(), in.v_dev.data(), busy_o.data(),
                            static_cast<float*>(busy_lse.data())});
  device_synchronize();
  download(busy, shape);
  check_same_bits(busy, fresh, "after 200 other shapes");
  CHECK(download_bits(busy_o, shape.o_elements()) == download_bits(fresh_o, shape.o_elements()));
  std::vector<float> lse_a(shape.lse_elements()), lse_b(shape.lse_elements());
  fresh_lse.download(lse_a.data(), lse_a.size() * 4);
  busy_lse.download(lse_b.data(), lse_b.size() * 4);
  CHECK(std::memcmp(lse_a.data(), lse_b.data(), lse_a.size() * 4) == 0);

  // Another process: the CLI on the same inputs (float32 .npy of the bf16 values; O and LSE given).
  test::TempDir io;
  const auto write = [&](const char* name, const std::vector<std::uint16_t>& bits,
                         std::vector<std::int64_t> dims) {
    std::vector<float> values(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) values[i] = bf16_value(bits[i]);
    npy::write_npy(io.path() / name, dims, values);
  };
  const std::int64_t B = shape.batch, Hq = shape.nhead_q, Hk = shape.nhead_k, S = shape.seqlen_q,
                     D = shape.hdim_q;
  write("q.npy", in.q, {B, Hq, S, D});
  write("k.npy", in.k, {B, Hk, S, D});
  write("v.npy", in.v, {B, Hk, S, D});
  write("do.npy", in.d_o, {B, Hq, S, D});
  write("o.npy", in.o, {B, Hq, S, D});
  npy::write_npy(io.path() / "lse.npy", std::vector<std::int64_t>{B, Hq, S}, in.lse);
  const std::string command =
      std::string(cli_path()) + " run --family bwd --deterministic --dtype bf16 --mask causal" +
      " --layout bhsd --batch 8 --nhead-q 4 --nhead-k 1 --seqlen-q 8704 --hdim-q 128 --inputs '" +
      io.path().string() + "' --outputs '" + (io.path() / "out").string() + "' 2>&1";
  const auto r = test::run_command(command);
  INFO(command << "\n" << r.output);
  REQUIRE(r.status == 0);
  const char* files[3] = {"dq.npy", "dk.npy", "dv.npy"};
  for (int t = 0; t < 3; ++t) {
    INFO(files[t]);
    const npy::Array a = npy::read_npy(io.path() / "out" / files[t]);
    REQUIRE(a.data.size() == fresh.bits[t].size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < a.data.size(); ++i) {
      differ += bf16_bits(a.data[i]) != fresh.bits[t][i] || std::isnan(a.data[i]);
    }
    CHECK(differ == 0);
  }
}
