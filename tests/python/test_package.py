"""The package without a GPU: import, errors, the cache functions and prebuild through NVRTC."""

import json
import os
import subprocess
import sys

import pytest

import fmha_jit


def test_public_names():
    for name in fmha_jit.__all__:
        assert hasattr(fmha_jit, name), name
    assert issubclass(fmha_jit.InvalidInputError, ValueError)
    assert issubclass(fmha_jit.InvalidInputError, fmha_jit.Error)
    assert issubclass(fmha_jit.CompileError, RuntimeError)


def test_cache_dir_follows_environment(tmp_path):
    # The same variable as the CLI, read by the library itself: a fresh interpreter sees it.
    code = "import fmha_jit; print(fmha_jit.default_cache_dir())"
    env = {**os.environ, "FMHA_JIT_CACHE_DIR": str(tmp_path / "c")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == str(tmp_path / "c")


def test_cache_info_of_missing_folder_creates_nothing(tmp_path):
    info = fmha_jit.cache_info(tmp_path / "none")
    assert info == {"cache_dir": str(tmp_path / "none"), "entries": [], "bytes": 0}
    assert not (tmp_path / "none").exists()


def test_prebuild_fills_the_cache_and_then_hits_it(tmp_path, caplog):
    sweep = {"family": "fwd", "dtype": "bf16", "hdim_q": 64, "arch": "sm_80", "mask": "none"}
    with caplog.at_level("INFO", logger="fmha_jit"):
        built = fmha_jit.prebuild(sweep, jobs=2, cache_dir=tmp_path)
    assert len(built) == 1 and built[0]["source"] == "compiled"
    assert built[0]["kernel"].startswith("fmha_fwd_bf16_hq64_hv64_sm80_none_lse_mma_sm80")
    # One info line per compile: the kernel and the time it took.
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("compiled ")]
    assert len(lines) == 1 and built[0]["kernel"] in lines[0] and lines[0].endswith(
        built[0]["key"] + ")")
    info = fmha_jit.cache_info(tmp_path)
    assert [e["key"] for e in info["entries"]] == [built[0]["key"]]
    assert info["entries"][0]["kernel"] == built[0]["kernel"]
    assert info["bytes"] > 0 and info["entries"][0]["compile_seconds"] > 0
    # A file with the same sweep: already built (this process's memory cache).
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep))
    again = fmha_jit.prebuild(path, cache_dir=tmp_path)
    assert again[0]["key"] == built[0]["key"] and again[0]["source"] in ("memory", "disk")


def test_prebuild_refuses_a_sweep_without_a_valid_config(tmp_path, caplog):
    with pytest.raises(fmha_jit.InvalidInputError, match="no valid config"):
        fmha_jit.prebuild({"family": "fwd", "hdim_q": [100, 101]}, cache_dir=tmp_path)
    assert any("hdim_q = 100 is not supported" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "sweep, message",
    [
        ({"family": "sideways"}, "family"),
        ({"hdim_q": "128"}, "hdim_q"),
        ({"no_such_field": 1}, "no_such_field"),
    ],
)
def test_prebuild_names_the_bad_field(tmp_path, sweep, message):
    with pytest.raises(ValueError, match=message):
        fmha_jit.prebuild(sweep, cache_dir=tmp_path)


def test_prebuild_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="jobs"):
        fmha_jit.prebuild({"family": "fwd"}, jobs=0, cache_dir=tmp_path)
    with pytest.raises(fmha_jit.InvalidInputError, match="sweep file"):
        fmha_jit.prebuild(tmp_path / "missing.json", cache_dir=tmp_path)
    with pytest.raises(fmha_jit.InvalidInputError, match="sweep"):
        fmha_jit.prebuild({"family": object()}, cache_dir=tmp_path)


def test_kernel_names_the_tile_variant_of_short_causal_problems(tmp_path):
    # Set up without a GPU (load=False): compiled into the cache, never launched. Hopper's causal
    # forward at hdim 64 runs problems of both lengths <= 1024 on a tile of its own.
    config = {"family": "fwd", "dtype": "bf16", "hdim_q": 64, "arch": "sm_90",
              "mask": "causal_bottom_right"}
    kernel = fmha_jit._C.Kernel(json.dumps(config), str(tmp_path), False)
    assert kernel.source == "compiled" and kernel.kernel_symbols

    def shape(seqlen):
        return fmha_jit._C.Shape(True, 2, 16, 16, seqlen, seqlen, 64, 64, None, -1, -1)

    assert kernel.key_for(shape(8192)) == kernel.key
    short = kernel.key_for(shape(512))  # compiled on first use, as a launch would
    assert short != kernel.key
    assert short in {e["key"] for e in fmha_jit.cache_info(tmp_path)["entries"]}
    with pytest.raises(fmha_jit.InvalidInputError, match="hdim"):
        kernel.key_for(fmha_jit._C.Shape(True, 2, 16, 16, 512, 512, 128, 128, None, -1, -1))
