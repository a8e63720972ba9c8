"""Shared by the GPU test files: compile their kernels on every core before the first case (one
at a time inside the cases would take minutes), for this GPU's arch."""

import json
import os
from pathlib import Path

import torch

import fmha_jit
from fmha_jit import kernels

SWEEP = Path(__file__).resolve().parents[2] / "configs" / "python-gpu-tests.json"
_warmed = False


def warm_cache():
    global _warmed
    if _warmed:
        return
    arch = kernels.device_arch(torch.cuda.current_device())
    sweep = json.loads(SWEEP.read_text())
    for point in sweep:
        point["arch"] = arch
    fmha_jit.prebuild(sweep, jobs=os.cpu_count() or 1)
    _warmed = True
