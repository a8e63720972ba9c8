// fmha_jit._C.Kernel: one config set up (memory, disk cache or compile) and its launches. The
// package keeps one per config and device and calls fwd / bwd with raw device pointers, torch's
// strides and the current stream; nothing here allocates or synchronises once the module is loaded
// (the workspaces come from the caller), so the calls can be captured in a CUDA graph.
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "python/src/bindings.hpp"

namespace nb = nanobind;

namespace fmha_jit::python {
namespace {

// torch's stride() of a 4-d tensor: [batch, seq, head, dim] (bshd) or [batch, head, seq, dim].
using TorchStrides = std::array<std::int64_t, 4>;
using Pointer = std::uintptr_t;

TensorStrides strides_of(const char* tensor, const TorchStrides& s, bool bshd) {
  if (s[3] != 1) {
    throw FieldError(ErrorCode::invalid_argument, std::string(tensor) + ".stride(-1)",
                     std::to_string(s[3]), "1 (the head dim contiguous)");
  }
  return bshd ? TensorStrides{s[0], s[2], s[1]} : TensorStrides{s[0], s[1], s[2]};
}

// The run-time shape of one call; the layout decides how torch's strides are read.
struct Shape {
  bool bshd = true;
  std::int64_t batch = 0, nhead_q = 0, nhead_k = 0, seqlen_q = 0, seqlen_k = 0;
  std::int64_t hdim_q = 0, hdim_v = 0;
  std::optional<float> scale;
  int window_left = -1, window_right = -1;

  FmhaProblem problem() const {
    FmhaProblem p;
    p.layout = bshd ? Layout::bshd : Layout::bhsd;
    p.batch = batch;
    p.nhead_q = nhead_q;
    p.nhead_k = nhead_k;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.hdim_q = hdim_q;
    p.hdim_v = hdim_v;
    p.scale = scale;
    p.window_left = window_left;
    p.window_right = window_right;
    return p;
  }
};

template <class T>
T* as_ptr(Pointer p) {
  return reinterpret_cast<T*>(p);
}

class Kernel {
 public:
  Kernel(const std::string& config_json, const std::optional<std::string>& cache_dir, bool load) {
    FmhaKernelConfig config = config_from_json(nlohmann::json::parse(config_json));
    SetupOptions options;
    if (cache_dir) options.cache_dir = *cache_dir;
    options.load = load;
    setup_ = setup_fmha_dispatcher(config, options);
    if (!setup_.success) {
      throw Error(setup_.error_code.value_or(ErrorCode::device_error), setup_.error);
    }
  }

  const std::string& key() const { return setup_.key; }
  std::string source() const { return std::string(to_string(setup_.source)); }
  double build_time_s() const { return setup_.build_time_s; }
  const std::vector<std::string>& kernel_symbols() const { return setup_.runner->kernel_symbols(); }

  // The key of the kernel that runs this shape (the config's own, or its tile variant's),
  // obtaining the variant as a first launch would.
  std::string key_for(const Shape& shape) { return runner().runner_for(shape.problem()).key(); }

  std::size_t fwd_workspace_bytes(const Shape& shape) {
    return runner().fwd_workspace_bytes(shape.problem());
  }
  std::size_t bwd_workspace_bytes(const Shape& shape) const {
    return setup_.runner->bwd_workspace_bytes(shape.problem());
  }

  void fwd(Pointer stream, const Shape& shape, Pointer q, const TorchStrides& q_stride, Pointer k,
           const TorchStrides& k_stride, Pointer v, const TorchStrides& v_stride, Pointer o,
           const TorchStrides& o_stride, Pointer lse, Pointer workspace,
           std::size_t workspace_bytes) {
    FmhaProblem p = shape.problem();
    p.q_strides = strides_of("q", q_stride, shape.bshd);
    p.k_strides = strides_of("k", k_stride, shape.bshd);
    p.v_strides = strides_of("v", v_stride, shape.bshd);
    p.o_strides = strides_of("out", o_stride, shape.bshd);
    FwdTensors t;
    t.q = as_ptr<const void>(q);
    t.k = as_ptr<const void>(k);
    t.v = as_ptr<const void>(v);
    t.o = as_ptr<void>(o);
    t.lse = as_ptr<float>(lse);
    t.workspace = as_ptr<void>(workspace);
    t.workspace_bytes = workspace_bytes;
    runner().run_fwd(p, t, as_ptr<void>(stream));
  }

  void bwd(Pointer stream, const Shape& shape, Pointer q, const TorchStrides& q_stride, Pointer k,
           const TorchStrides& k_stride, Pointer v, const TorchStrides& v_stride, Pointer o,
           const TorchStrides& o_stride, Pointer lse, Pointer d_o, const TorchStrides& do_stride,
           Pointer dq, const TorchStrides& dq_stride, Pointer dk, const TorchStrides& dk_stride,
           Pointer dv, const TorchStrides& dv_stride, Pointer workspace,
           std::size_t workspace_bytes) {
    FmhaProblem p = shape.problem();
    p.q_strides = strides_of("q", q_stride, shape.bshd);
    p.k_strides = strides_of("k", k_stride, shape.bshd);
    p.v_strides = strides_of("v", v_stride, shape.bshd);
    p.o_strides = strides_of("out", o_stride, shape.bshd);
    p.do_strides = strides_of("dout", do_stride, shape.bshd);
    p.dq_strides = strides_of("dq", dq_stride, shape.bshd);
    p.dk_strides = strides_of("dk", dk_stride, shape.bshd);
    p.dv_strides = strides_of("dv", dv_stride, shape.bshd);
    BwdTensors t;
    t.q = as_ptr<const void>(q);
    t.k = as_ptr<const void>(k);
    t.v = as_ptr<const void>(v);
    t.o = as_ptr<const void>(o);
    t.lse = as_ptr<const float>(lse);
    t.d_o = as_ptr<const void>(d_o);
    t.d_q = as_ptr<void>(dq);
    t.d_k = as_ptr<void>(dk);
    t.d_v = as_ptr<void>(dv);
    t.workspace = as_ptr<void>(workspace);
    t.workspace_bytes = workspace_bytes;
    runner().run_bwd(p, t, as_ptr<void>(stream));
  }

 private:
  FmhaRunner& runner() const { return *setup_.runner; }

  FmhaSetupResult setup_;
};

}  // namespace

void add_kernel(nb::module_& m) {
  nb::class_<Shape>(m, "Shape", "The run-time shape of a call (not part of the kernel's key).")
      .def(
          "__init__",
          [](Shape* s, bool bshd, std::int64_t batch, std::int64_t nhead_q, std::int64_t nhead_k,
             std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t hdim_q, std::int64_t hdim_v,
             std::optional<float> scale, int window_left, int window_right) {
            new (s) Shape{bshd,   batch,  nhead_q, nhead_k,     seqlen_q,    seqlen_k,
                          hdim_q, hdim_v, scale,   window_left, window_right};
          },
          nb::arg("bshd"), nb::arg("batch"), nb::arg("nhead_q"), nb::arg("nhead_k"),
          nb::arg("seqlen_q"), nb::arg("seqlen_k"), nb::arg("hdim_q"), nb::arg("hdim_v"),
          nb::arg("scale").none(), nb::arg("window_left"), nb::arg("window_right"));

  using nb::arg;
  const auto unlocked = nb::call_guard<nb::gil_scoped_release>();
  nb::class_<Kernel>(m, "Kernel",
                     "A kernel module set up for one config (fmha_jit.ops keeps one "
                     "per config and device).")
      .def(nb::init<const std::string&, const std::optional<std::string>&, bool>(),
           arg("config_json"), arg("cache_dir").none() = nb::none(), arg("load") = true, unlocked)
      .def_prop_ro("key", &Kernel::key)
      .def_prop_ro("source", &Kernel::source)
      .def_prop_ro("build_time_s", &Kernel::build_time_s)
      .def_prop_ro("kernel_symbols", &Kernel::kernel_symbols)
      .def("key_for", &Kernel::key_for, arg("shape"), unlocked)
      .def("fwd_workspace_bytes", &Kernel::fwd_workspace_bytes, arg("shape"), unlocked)
      .def("bwd_workspace_bytes", &Kernel::bwd_workspace_bytes, arg("shape"), unlocked)
      .def("fwd", &Kernel::fwd, arg("stream"), arg("shape"), arg("q"), arg("q_stride"), arg("k"),
           arg("k_stride"), arg("v"), arg("v_stride"), arg("out"), arg("out_stride"), arg("lse"),
           arg("workspace"), arg("workspace_bytes"), unlocked)
      .def("bwd", &Kernel::bwd, arg("stream"), arg("shape"), arg("q"), arg("q_stride"), arg("k"),
           arg("k_stride"), arg("v"), arg("v_stride"), arg("out"), arg("out_stride"), arg("lse"),
           arg("dout"), arg("dout_stride"), arg("dq"), arg("dq_stride"), arg("dk"),
           arg("dk_stride"), arg("dv"), arg("dv_stride"), arg("workspace"), arg("workspace_bytes"),
           unlocked);
}

}  // namespace fmha_jit::python
