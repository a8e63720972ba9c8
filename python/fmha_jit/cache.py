"""The kernel cache from Python: the same folder and environment variables as the fmha-jit CLI
(FMHA_JIT_CACHE_DIR, FMHA_JIT_CACHE_MAX_BYTES; README.md, "Environment")."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from fmha_jit import _C

logger = logging.getLogger("fmha_jit")

Sweep = Union[Dict[str, Any], List[Dict[str, Any]], str, os.PathLike]


def default_cache_dir() -> str:
    """FMHA_JIT_CACHE_DIR, else $XDG_CACHE_HOME/fmha-jit, else ~/.cache/fmha-jit."""
    return _C.default_cache_dir()


def _cache_dir(cache_dir) -> Optional[str]:
    return os.fspath(cache_dir) if cache_dir is not None else None


def prebuild(
    sweep: Sweep,
    *,
    jobs: Optional[int] = None,
    cache_dir: Optional[Union[str, os.PathLike]] = None,
) -> List[Dict[str, Any]]:
    """Compiles the kernels of a sweep into the disk cache (no GPU needed), as `fmha-jit
    prebuild` does: a JSON object whose list-valued fields expand to their product, a list of
    such objects, or the path of a JSON file holding one. Each config's tile variant is built
    too. The ops' kernels are the configs {family, dtype, hdim_q, hdim_v, arch, mask,
    deterministic, lse, varlen, sinks, softcap} with the other fields left to their defaults
    (the forward without LSE serves calls that need no gradient; varlen the packed batches of
    flash_attn_varlen_func, sinks and softcap the calls given them), e.g.

        fmha_jit.prebuild({"family": ["fwd", "bwd"], "dtype": "bf16", "hdim_q": [64, 128],
                           "arch": "sm_90", "mask": ["none", "causal_bottom_right"],
                           "lse": [True, False]})

    Returns one dict per kernel: kernel, config, key, source ("memory", "disk", "compiled") and
    seconds. Raises InvalidInputError for a malformed sweep or one with no valid config, and
    CompileError naming each kernel that failed; points that are not valid configs are logged
    as warnings and skipped, as the CLI does.
    """
    if isinstance(sweep, (str, os.PathLike)):
        path = Path(sweep)
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise _C.InvalidInputError(f"sweep file {path}: {e}") from e
    else:
        document = sweep
    try:
        text = json.dumps(document)
    except (TypeError, ValueError) as e:
        raise _C.InvalidInputError(f"sweep: {e}; accepted: a JSON object or list") from e
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs is {jobs!r}; accepted: an int >= 1")
    report = json.loads(_C.prebuild(text, _cache_dir(cache_dir), jobs))
    for skip in report["skipped"]:
        logger.warning("prebuild skipped %s: %s", json.dumps(skip["point"]), skip["reason"])
    kernels = report["kernels"]
    if not kernels:
        reasons = "; ".join(
            f"{json.dumps(skip['point'])}: {skip['reason']}" for skip in report["skipped"][:3]
        )
        raise _C.InvalidInputError(
            "prebuild: no valid config in the sweep (every point skipped, or none given)"
            + (f": {reasons}" if reasons else "")
        )
    failed = [k for k in kernels if "error" in k]
    if failed:
        lines = "\n".join(f"  {k['kernel']}: {k['error']}" for k in failed)
        raise _C.CompileError(f"{len(failed)} of {len(kernels)} kernels failed:\n{lines}")
    return kernels


def cache_info(cache_dir: Optional[Union[str, os.PathLike]] = None) -> Dict[str, Any]:
    """The disk cache: {"cache_dir", "entries", "bytes"}, entries most recently used first, each
    {key, kernel, arch, bytes, compile_seconds, last_used (seconds since the epoch)}."""
    info = json.loads(_C.cache_info(_cache_dir(cache_dir)))
    info["bytes"] = sum(e["bytes"] for e in info["entries"])
    return info
