// fmha_jit._C.Kernel: one config set up (memory, disk cache or compile) and its launches. The
// package keeps one per config and device and calls fwd / bwd with raw device pointers, torch's
// strides and the current stream; nothing here allocates or synchronises once the module is loaded
// (the workspaces come from the caller), so the calls can be captured in a CUDA graph.
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "python/src/bindings.hpp"

namespace nb = nanobind;

namespace fmha_jit::python {
namespace {

// torch's stride() of a 4-d tensor, [batch, seq, head, dim] (bshd) or [batch, head, seq, dim], or
// of a packed batch's 3-d tensor, [total, head, dim] (bshd) or [head, total, dim]: the 4-d form
// is tried first, so a dense call pays nothing for the other.
using TorchStrides = std::variant<std::array<std::int64_t, 4>, std::array<std::int64_t, 3>>;
using Pointer = std::uintptr_t;

TensorStrides strides_of(const char* tensor, const TorchStrides& strides, bool bshd, bool packed) {
  if (const auto* s = std::get_if<0>(&strides)) {
    if ((*s)[3] != 1) {
      throw FieldError(ErrorCode::invalid_argument, std::string(tensor) + ".stride(-1)",
                       std::to_string((*s)[3]), "1 (the head dim contiguous)");
    }
    return bshd ? TensorStrides{(*s)[0], (*s)[2], (*s)[1]}
                : TensorStrides{(*s)[0], (*s)[1], (*s)[2]};
  }
  const auto& s = std::get<1>(strides);
  if (!packed) {
    throw FieldError(ErrorCode::invalid_argument, std::string(tensor) + ".stride()", "3 entries",
                     "4 (a dense call's tensors are 4-d; 3-d tensors are packed batches)");
  }
  if (s[2] != 1) {
    throw FieldError(ErrorCode::invalid_argument, std::string(tensor) + ".stride(-1)",
                     std::to_string(s[2]), "1 (the head dim contiguous)");
  }
  // A packed batch is one sequence of all its tokens: no batch dim to step.
  return bshd ? TensorStrides{0, s[1], s[0]} : TensorStrides{0, s[0], s[1]};
}

// Stands in for the device cu_seqlens of a packed shape where no call is made (workspace sizes,
// the kernel's key): the library asks only whether they are set, and never reads them there.
constexpr std::int32_t kNoSeqlens[1] = {0};

// The run-time shape of one call; the layout decides how torch's strides are read.
struct Shape {
  bool bshd = true;
  std::int64_t batch = 0, nhead_q = 0, nhead_k = 0, seqlen_q = 0, seqlen_k = 0;
  std::int64_t hdim_q = 0, hdim_v = 0;
  std::optional<float> scale;
  int window_left = -1, window_right = -1;
  // Packed batches: batch is the number of sequences, seqlen_q / seqlen_k the longest ones,
  // total_q / total_k the token counts; the launch supplies the cu_seqlens.
  bool varlen = false;
  std::int64_t total_q = 0, total_k = 0;
  float softcap = 0;  // 0 = none

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
    p.softcap = softcap;
    if (varlen) {
      p.cu_seqlens_q = kNoSeqlens;
      p.cu_seqlens_k = kNoSeqlens;
      p.total_q = total_q;
      p.total_k = total_k;
    }
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
           std::size_t workspace_bytes, Pointer cu_seqlens_q, Pointer cu_seqlens_k, Pointer sinks) {
    FmhaProblem p = shape.problem();
    set_seqlens(p, shape, cu_seqlens_q, cu_seqlens_k);
    const bool packed = shape.varlen;
    p.q_strides = strides_of("q", q_stride, shape.bshd, packed);
    p.k_strides = strides_of("k", k_stride, shape.bshd, packed);
    p.v_strides = strides_of("v", v_stride, shape.bshd, packed);
    p.o_strides = strides_of("out", o_stride, shape.bshd, packed);
    FwdTensors t;
    t.q = as_ptr<const void>(q);
    t.k = as_ptr<const void>(k);
    t.v = as_ptr<const void>(v);
    t.o = as_ptr<void>(o);
    t.lse = as_ptr<float>(lse);
    t.workspace = as_ptr<void>(workspace);
    t.workspace_bytes = workspace_bytes;
    t.sinks = as_ptr<const float>(sinks);
    runner().run_fwd(p, t, as_ptr<void>(stream));
  }

  void bwd(Pointer stream, const Shape& shape, Pointer q, const TorchStrides& q_stride, Pointer k,
           const TorchStrides& k_stride, Pointer v, const TorchStrides& v_stride, Pointer o,
           const TorchStrides& o_stride, Pointer lse, Pointer d_o, const TorchStrides& do_stride,
           Pointer dq, const TorchStrides& dq_stride, Pointer dk, const TorchStrides& dk_stride,
           Pointer dv, const TorchStrides& dv_stride, Pointer workspace,
           std::size_t workspace_bytes, Pointer cu_seqlens_q, Pointer cu_seqlens_k, Pointer sinks,
           Pointer d_sinks) {
    FmhaProblem p = shape.problem();
    set_seqlens(p, shape, cu_seqlens_q, cu_seqlens_k);
    const bool packed = shape.varlen;
    p.q_strides = strides_of("q", q_stride, shape.bshd, packed);
    p.k_strides = strides_of("k", k_stride, shape.bshd, packed);
    p.v_strides = strides_of("v", v_stride, shape.bshd, packed);
    p.o_strides = strides_of("out", o_stride, shape.bshd, packed);
    p.do_strides = strides_of("dout", do_stride, shape.bshd, packed);
    p.dq_strides = strides_of("dq", dq_stride, shape.bshd, packed);
    p.dk_strides = strides_of("dk", dk_stride, shape.bshd, packed);
    p.dv_strides = strides_of("dv", dv_stride, shape.bshd, packed);
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
    t.sinks = as_ptr<const float>(sinks);
    t.d_sinks = as_ptr<float>(d_sinks);
    runner().run_bwd(p, t, as_ptr<void>(stream));
  }

 private:
  FmhaRunner& runner() const { return *setup_.runner; }

  // The launch's device cu_seqlens replace the shape's stand-ins. Given for a dense shape they
  // reach the library as given, which refuses them against the kernel's config.
  static void set_seqlens(FmhaProblem& p, const Shape& shape, Pointer cu_seqlens_q,
                          Pointer cu_seqlens_k) {
    if (shape.varlen && (!cu_seqlens_q || !cu_seqlens_k)) {
      throw FieldError(ErrorCode::invalid_argument, cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q",
                       "null", "a device array of batch + 1 int32 (the shape is a packed batch's)");
    }
    if (shape.varlen || cu_seqlens_q || cu_seqlens_k) {
      p.cu_seqlens_q = as_ptr<const std::int32_t>(cu_seqlens_q);
      p.cu_seqlens_k = as_ptr<const std::int32_t>(cu_seqlens_k);
    }
  }

  FmhaSetupResult setup_;
};

}  // namespace

void add_kernel(nb::module_& m) {
  nb::class_<Shape>(m, "Shape", "The run-time shape of a call (not part of the kernel's key).")
      .def(
          "__init__",
          [](Shape* s, bool bshd, std::int64_t batch, std::int64_t nhead_q, std::int64_t nhead_k,
             std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t hdim_q, std::int64_t hdim_v,
             std::optional<float> scale, int window_left, int window_right, bool varlen,
             std::int64_t total_q, std::int64_t total_k, float softcap) {
            new (s) Shape{bshd,   batch,  nhead_q, nhead_k,     seqlen_q,    seqlen_k,
                          hdim_q, hdim_v, scale,   window_left, window_right};
            s->varlen = varlen;
            s->total_q = total_q;
            s->total_k = total_k;
            s->softcap = softcap;
          },
          nb::arg("bshd"), nb::arg("batch"), nb::arg("nhead_q"), nb::arg("nhead_k"),
          nb::arg("seqlen_q"), nb::arg("seqlen_k"), nb::arg("hdim_q"), nb::arg("hdim_v"),
          nb::arg("scale").none(), nb::arg("window_left"), nb::arg("window_right"),
          nb::arg("varlen") = false, nb::arg("total_q") = 0, nb::arg("total_k") = 0,
          nb::arg("softcap") = 0.0f);

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
           arg("workspace"), arg("workspace_bytes"), arg("cu_seqlens_q") = 0,
           arg("cu_seqlens_k") = 0, arg("sinks") = 0, unlocked)
      .def("bwd", &Kernel::bwd, arg("stream"), arg("shape"), arg("q"), arg("q_stride"), arg("k"),
           arg("k_stride"), arg("v"), arg("v_stride"), arg("out"), arg("out_stride"), arg("lse"),
           arg("dout"), arg("dout_stride"), arg("dq"), arg("dq_stride"), arg("dk"),
           arg("dk_stride"), arg("dv"), arg("dv_stride"), arg("workspace"), arg("workspace_bytes"),
           arg("cu_seqlens_q") = 0, arg("cu_seqlens_k") = 0, arg("sinks") = 0, arg("d_sinks") = 0,
           unlocked);

  // The library's check of a packed batch's cumulative lengths, on a host copy of `batch + 1`
  // int32 at `cu_seqlens`: InvalidInputError naming the first bad entry.
  m.def(
      "check_seqlens",
      [](const std::string& name, Pointer cu_seqlens, std::int64_t batch, std::int64_t total,
         std::int64_t max_len) {
        check_seqlens(name.c_str(), as_ptr<const std::int32_t>(cu_seqlens), batch, total, max_len);
      },
      arg("name"), arg("cu_seqlens"), arg("batch"), arg("total"), arg("max_len"));
}

}  // namespace fmha_jit::python
