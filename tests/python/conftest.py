"""pytest setup: tests marked `gpu` need a CUDA GPU and report skipped, with the reason, without
one; the others run anywhere the package imports."""

import sys
from pathlib import Path

import pytest
import torch

# The example model (examples/python) is imported by the tests as a user would use it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "python"))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    reason = "needs a CUDA GPU: torch.cuda.is_available() is False on this machine"
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
