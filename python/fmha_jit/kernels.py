"""One set-up kernel per (device, config), and per kernel the run-time shapes it has seen.

The config of a call is what the C++ API's FmhaKernelConfig holds: family, dtype, head dims, the
device's arch, mask, the deterministic flag and the varlen / sinks / softcap flags; tiles and
implementation are left to the library's heuristic, so `prebuild` of the same fields warms exactly
these kernels.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from typing import Dict, Optional, Tuple

import torch

from fmha_jit import _C

logger = logging.getLogger("fmha_jit")

_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}
_lock = threading.Lock()
_arch_of_device: Dict[int, str] = {}
_kernels: Dict[tuple, "KernelEntry"] = {}


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPES[dtype]


def device_arch(index: int) -> str:
    """The arch string of CUDA device `index` ("sm_90", "gfx90a")."""
    arch = _arch_of_device.get(index)
    if arch is None:
        if torch.version.hip:
            arch = torch.cuda.get_device_properties(index).gcnArchName.split(":")[0]
        else:
            major, minor = torch.cuda.get_device_capability(index)
            arch = f"sm_{major}{minor}"
        _arch_of_device[index] = arch
    return arch


def cache_dir() -> Optional[str]:
    """The cache folder (None: the library's default, which reads FMHA_JIT_CACHE_DIR itself)."""
    return os.environ.get("FMHA_JIT_CACHE_DIR") or None


class KernelEntry:
    """A set-up kernel and, per call shape, its Shape object and workspace size."""

    __slots__ = ("kernel", "family", "_shapes")

    def __init__(self, kernel: "_C.Kernel", family: str):
        self.kernel = kernel
        self.family = family
        self._shapes: Dict[tuple, Tuple["_C.Shape", int]] = {}

    def shape(self, dims: tuple) -> Tuple["_C.Shape", int]:
        """(Shape, workspace bytes) of dims = (bshd, B, Hq, Hk, Sq, Sk, Dq, Dv, scale, wl, wr),
        and for packed batches or softcap also (varlen, total_q, total_k, softcap); packed, B is
        the number of sequences and Sq / Sk are the longest lengths.

        The forward's workspace depends on the device's SM count, fixed per entry (one device).
        """
        got = self._shapes.get(dims)
        if got is None:
            shape = _C.Shape(*dims)
            if self.family == "fwd":
                need = self.kernel.fwd_workspace_bytes(shape)
            else:
                need = self.kernel.bwd_workspace_bytes(shape)
            got = (shape, need)
            if len(self._shapes) >= 4096:  # a server that sees every length: bound the memo
                self._shapes.clear()
            self._shapes[dims] = got
        return got


def kernel_for(
    device_index: int,
    family: str,
    dtype: torch.dtype,
    hdim_q: int,
    hdim_v: int,
    mask: str,
    deterministic: bool = False,
    lse: bool = True,
    varlen: bool = False,
    sinks: bool = False,
    softcap: bool = False,
) -> KernelEntry:
    """The kernel of this config on this device: set up (memory, disk cache or compile) and
    loaded on first use. `deterministic` is the backward's, `lse` the forward's; `varlen` (packed
    batches), `sinks` and `softcap` are the config's flags of the same names."""
    key = (device_index, family, dtype, hdim_q, hdim_v, mask, deterministic, lse, varlen, sinks,
           softcap)
    entry = _kernels.get(key)
    if entry is not None:
        return entry
    with _lock:
        entry = _kernels.get(key)
        if entry is None:
            config = {
                "family": family,
                "dtype": _DTYPES[dtype],
                "hdim_q": hdim_q,
                "hdim_v": hdim_v,
                "arch": device_arch(device_index),
                "mask": mask,
            }
            if family == "fwd":
                config["lse"] = lse
            else:
                config["deterministic"] = deterministic
            # Named only when set: the JSON of the other configs stays what it was (their
            # canonical form and key are the same either way).
            for name, on in (("varlen", varlen), ("sinks", sinks), ("softcap", softcap)):
                if on:
                    config[name] = True
            with torch.cuda.device(device_index):
                kernel = _C.Kernel(json.dumps(config), cache_dir(), True)
            logger.debug(
                "%s kernel %s: %s in %.3f s",
                family,
                kernel.key[:12],
                kernel.source,
                kernel.build_time_s,
            )
            entry = KernelEntry(kernel, family)
            _kernels[key] = entry
    return entry


def clear() -> None:
    """Forgets the set-up kernels (the next call sets them up again, from the memory cache)."""
    with _lock:
        _kernels.clear()


# The kernels and shapes are the extension's objects: released before the interpreter finalises,
# as nanobind expects of every instance.
atexit.register(clear)
