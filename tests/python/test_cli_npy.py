"""The `longattn` command on .npy files written by NumPy (float32, float64, bfloat16 via
ml_dtypes): its --out must match the Python package on the same inputs. Skipped when the
command was not built (set LONGATTN_CLI, or build it into build/tools/)."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import longattn
from conftest import NP_DTYPES, randn

ROOT = pathlib.Path(__file__).resolve().parents[2]
CANDIDATES = [os.environ.get("LONGATTN_CLI", ""), ROOT / "build/tools/longattn",
              ROOT / "build-tools/tools/longattn"]
CLI = next((str(p) for p in CANDIDATES if p and os.access(str(p), os.X_OK)), None)
pytestmark = pytest.mark.skipif(CLI is None, reason="longattn command not built")


def run_cli(*args):
    r = subprocess.run([CLI, "run", *map(str, args)], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f64"])
def test_cli_reads_numpy_files(tmp_path, rng, dtype):
    base = "bf16" if dtype == "bf16" else "f32"
    q, k, v = randn(rng, (2, 23, 4, 32), base), randn(rng, (2, 31, 2, 32), base), randn(rng, (2, 31, 2, 32), base)
    files = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        path = tmp_path / f"{name}.npy"
        np.save(path, x.astype(np.float64) if dtype == "f64" else x)
        files += [f"--{name}", path]
    code, text = run_cli(*files, "--out", tmp_path / "o.npy", "--lse-out", tmp_path / "l.npy",
                         "--backend", "cpu", "--repeat", 1, "--warmup", 0, "--no-causal")
    assert code == 0, text
    assert "batch 2 seq 23/31 heads 4/2 dim 32" in text
    out = np.load(tmp_path / "o.npy")
    lse = np.load(tmp_path / "l.npy")
    assert out.dtype == np.float32 and out.shape == (2, 23, 4, 32) and lse.shape == (2, 4, 23)
    want, want_lse = longattn.flash_attn_func(q, k, v, return_attn_probs=True, backend="cpu")
    np.testing.assert_array_equal(out, want.astype(np.float32))
    np.testing.assert_array_equal(lse, want_lse)


def test_cli_writes_requested_dtype_and_ragged(tmp_path, rng):
    lens = [7, 12]
    q, k, v = (randn(rng, (19, 2, 32), "bf16") for _ in range(3))
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", x)
    code, text = run_cli("--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
                         "--ragged", ",".join(map(str, lens)), "--out", tmp_path / "o.npy",
                         "--out-dtype", "bf16", "--backend", "cpu", "--repeat", 1)
    assert code == 0, text
    out = np.load(tmp_path / "o.npy")  # '<V2': raw bf16 bits
    assert out.dtype.itemsize == 2 and out.shape == (19, 2, 32)
    got = out.view(NP_DTYPES["bf16"])
    cu = np.array([0, 7, 19], np.int32)
    want = longattn.flash_attn_varlen_func(q, k, v, cu, cu, 12, 12, causal=True, backend="cpu")
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_cli_rejects_bad_file(tmp_path):
    np.save(tmp_path / "q.npy", np.zeros((2, 3), np.complex64))
    code, text = run_cli("--q", tmp_path / "q.npy", "--k", tmp_path / "q.npy", "--v", tmp_path / "q.npy")
    assert code == 2 and "unsupported dtype" in text


def test_cli_json_output():
    code, text = run_cli("--seq", 40, "--heads-q", 2, "--heads-kv", 1, "--dim", 32, "--json",
                         "--repeat", 1, "--backend", "cpu")
    assert code == 0, text
    rec = json.loads(text.strip().splitlines()[-1])
    assert rec["pass"] is True and rec["seq_q"] == 40 and rec["max_error"] <= rec["bound"]
    assert rec["gflop"] == pytest.approx(4 * 32 * 2 * (40 * 41 / 2) / 1e9)
