#!/usr/bin/env bash
# The Python package's tests (README "Test"): a virtual environment under build/, torch from PyPI
# (its default wheel runs without a GPU), `pip install .` of this checkout (the extension built by
# scikit-build-core with the project's CMake), then pytest. Tests marked gpu report "skipped" with
# the reason on a machine without a CUDA GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/python-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
"$py" -m pip install -q --disable-pip-version-check "torch>=2.4" pytest numpy
# Reuses compiled objects across runs where ccache is installed (CMake reads the variable).
if command -v ccache >/dev/null; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
"$py" -m pip install -q --disable-pip-version-check .
"$py" -m pytest -q -rs tests/python
