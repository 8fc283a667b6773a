#!/usr/bin/env python3
"""Checks of the benchmark's pure parts (FLOP counts, visible pairs, suites, tables, JSON);
no torch or GPU needed: python3 bench/gpu/selftest.py"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
import shapes  # noqa: E402
from shapes import Case  # noqa: E402


def brute_pairs(sq, sk, causal, wl=-1, wr=-1, chunk=0):
    off, tot = sk - sq, 0
    for i in range(sq):
        p = i + off
        for j in range(sk):
            ok = (not causal or j <= p) and (wl < 0 or j >= p - wl) and (wr < 0 or j <= p + wr)
            ok = ok and (chunk <= 0 or j // chunk == p // chunk)
            tot += ok
    return tot


def test_pairs():
    for sq, sk in ((1, 1), (5, 5), (7, 13), (13, 7), (16, 64), (64, 16), (33, 33)):
        for causal in (False, True):
            assert shapes.visible_pairs(sq, sk, causal) == brute_pairs(sq, sk, causal), (sq, sk, causal)
            for wl, wr, ch in ((3, -1, 0), (2, 2, 0), (-1, -1, 4), (0, 0, 0), (5, -1, 8)):
                got = shapes.visible_pairs(sq, sk, causal, wl, wr, ch)
                assert got == brute_pairs(sq, sk, causal, wl, wr, ch), (sq, sk, causal, wl, wr, ch, got)


def test_flops():
    c = Case(16, 1024, 1024, 16, 16, 128, False)
    assert shapes.flops(c) == 4 * 16 * 16 * 1024 * 1024 * 128
    assert shapes.flops(c.with_(causal=True)) == 0.5 * shapes.flops(c)  # FA convention
    assert shapes.convention(c.with_(causal=True)) == shapes.FA_CONVENTION
    w = Case(1, 65536, 65536, 16, 16, 128, True, wl=4096)
    pairs = sum(min(i + 1, 4097) for i in range(65536))
    assert shapes.flops(w) == 4 * 16 * 128 * pairs and shapes.convention(w) == shapes.PAIRS_CONVENTION
    g = Case(4, 16, 8192, 32, 8, 128, True)  # short seq_q: visible pairs, bottom-right
    assert shapes.flops(g) == 4 * 4 * 32 * 128 * sum(8192 - 16 + i + 1 for i in range(16))
    s = Case(4, 8192, 8192, 16, 16, 192, False, dv=128)
    assert shapes.flops(s) == 2 * 4 * 16 * (192 + 128) * 8192 * 8192
    assert abs(shapes.tflops(34359738368.0, 57.0) - 602.8) < 0.1  # 1k b16 full at 57 us
    assert shapes.tflops(1.0, None) is None and shapes.tflops(1.0, 0.0) is None


def test_suites():
    h = shapes.headline()
    assert len(h) == 16 and all(c.b * c.sq == 16384 for c in h if c.d == 128 and c.hq == 16)
    assert [(c.b, c.sq, c.hq, c.hk, c.d) for c in h[10:12]] == [(1, 32768, 32, 8, 128)] * 2
    assert {c.dtype for c in shapes.headline("f16")} == {"f16"}
    assert [c.sq for c in shapes.long_context()] == [65536, 65536, 131072, 131072, 262144, 262144]
    assert [shapes.mask_name(c) for c in shapes.windows()] == [
        "causal, window 4096", "causal, window 1024", "causal, chunk 8192", "window (2048, 2048)"]
    assert len(shapes.fp8()) == 18 and {c.d for c in shapes.fp8()} == {64, 128, 256}
    assert shapes.parse_specs("a:dynamic=on,sections=0; sections=0") == [("a", "dynamic=on,sections=0"),
                                                                          ("sections=0", "sections=0")]
    assert shapes.parse_shapes("4x4096:16/8:256:causal; 1x16384:16/16:128", "e4m3") == [
        Case(4, 4096, 4096, 16, 8, 256, True, "e4m3"), Case(1, 16384, 16384, 16, 16, 128, False, "e4m3"),
        Case(1, 16384, 16384, 16, 16, 128, True, "e4m3")]
    assert shapes.parse_shapes("2x700:4/4:64:causal:w33; 1x900:8/8:64:full:w40; 1x800:4/2:128:causal:c256;"
                               "1x100:2/2:64:causal:w0", "bf16") == [
        Case(2, 700, 700, 4, 4, 64, True, wl=33), Case(1, 900, 900, 8, 8, 64, False, wl=40, wr=40),
        Case(1, 800, 800, 4, 2, 128, True, chunk=256), Case(1, 100, 100, 2, 2, 64, True, wl=0)]
    for bad in ("4x4096:16/16", "4x4096:16/16:256:both", "4x0:16/16:256", "4x4096:16/6:128", "4xa:16/16:64",
                "1x64:1/1:64:w8", "1x64:1/1:64:causal:w", "1x64:1/1:64:causal:x8", "1x64:1/1:64:causal:c0",
                "1x64:1/1:64:causal:w-1"):
        try:
            shapes.parse_shapes(bad, "bf16")
            raise AssertionError(bad)
        except ValueError:
            pass
    assert shapes.shape_name(Case(4, 16, 8192, 32, 8, 128, True)) == "d128 b4 x 16q x 8k keys, 32/8 heads"
    assert shapes.rotate_sets(64 << 20, 50 << 20) == 3 and shapes.rotate_sets(1 << 40, 50 << 20) == 2
    assert shapes.rotate_sets(1, 50 << 20, requested=5) == 5
    assert shapes.calls_per_window(60.0) == 20 and shapes.calls_per_window(1.6e6) == 1
    assert shapes.calls_per_window(50000.0) == 4 and shapes.calls_per_window(None) == 20


def fake_row(c, impls, **kw):
    r = {"label": shapes.shape_name(c), "case": c.asdict(), "shape": shapes.shape_name(c),
         "mask": shapes.mask_name(c), "impls": impls, "notes": []}
    r.update(kw)
    return r


def test_tables():
    c = Case(16, 1024, 1024, 16, 16, 128, True)
    k = [{"name": "void longattn::cuda::sm90::fwd_kernel<Cfg>(...)", "n": 1.0, "us": 80.0}]
    r = fake_row(c, {"FA3": {"tflops": 471.0, "tflops_rot": 450.0, "wall_us": 90.0, "us": 73.0,
                             "kernels": [{"name": "cutlass::device_kernel<flash::...>", "n": 1.0, "us": 73.0}]},
                     "cuDNN": {"na": "cuDNN refused: x"},
                     "longattn": {"tflops": 421.0, "tflops_rot": 400.0, "us": 81.6, "wall_us": 100.0,
                                  "maxdiff": 0.004, "ref": "FA3", "kernels": k}},
                 rotate_sets=3)
    t = report.peer_table([r])
    assert "| 128 | d128 b16 x 1k, 16/16 heads | causal | 471 | n/a | 421 | 0.894 | n/a | 4.0e-03 (vs FA3) |" in t, t
    assert "450 (0.955)" in report.rotate_table([r])
    assert "| 100.0 | 90.0 | n/a | 81.6 |" in report.wall_table([r])
    notes = report.na_notes([r, r])
    assert notes == ["- cuDNN: n/a on 2 row(s) (d128 b16 x 1k, 16/16 heads, ...): cuDNN refused: x"], notes
    assert len(report.kernel_lines([r, r])) == 2
    assert report.spread_lines([r]) == []
    r["impls"]["FA3"]["spread"] = 0.08
    assert report.spread_lines([r]) == ["- d128 b16 x 1k, 16/16 heads causal: FA3 8%"], report.spread_lines([r])
    del r["impls"]["FA3"]["spread"]
    bad = fake_row(c, {"longattn": {"tflops": 1.0, "maxdiff": float("nan")}})
    assert "WRONG?" in report.peer_table([bad])
    r["impls"]["dynamic=on"] = {"tflops": 442.05, "maxdiff": 0.01}
    assert "442 (1.050)" in report.variants_table([r], ["dynamic=on", "sections=0"])
    r["impls"]["baseline"] = {"tflops": 400.95, "maxdiff": 0.0}  # a --baseline build: its own column
    vt = report.variants_table([r], ["dynamic=on"])
    assert "| baseline | dynamic=on |" in vt and "401 (0.952)" in vt, vt
    assert "| FA3 | cuDNN | longattn |" in vt and "| 471 | n/a | 421 |" in vt, vt  # cuDNN refused: n/a
    del r["impls"]["baseline"]
    r["base"] = "longattn"
    lt = report.long_table([r])
    # The rows carry wall times, so the table has its "wall us" column.
    assert "| longattn | 0.082 | 100.0 | 421 | base |" in lt and "| FA3 | 0.073 | 90.0 | 471 | 1.119 |" in lt, lt
    for v in r["impls"].values():
        v.pop("wall_us", None)
    lt = report.long_table([r])
    assert "wall us" not in lt and "| longattn | 0.082 | 421 | base |" in lt, lt
    f8 = fake_row(c.with_(dtype="e4m3"), {"longattn fp8": {"na": "NotSupported: fp8"}, "cuDNN fp8": {"tflops": 900.0, "err": 0.01},
                                         "longattn bf16": {"tflops": 600.0, "err": 0.001}, "FA3 bf16": {"tflops": 700.0}})
    assert "| n/a | 900 | 600 | 700 | n/a | n/a | n/a | n/a | 1.0e-02 | 1.0e-03 | n/a |" in report.fp8_table([f8])
    # An override column (--fp8 --specs 'slist:...'): "slist fp8" after the peers; absent labels add none.
    f8["impls"]["slist fp8"] = {"tflops": 950.0, "err": 0.002}
    t8 = report.fp8_table([f8], ["slist", "other"])
    assert "slist fp8" in t8 and "other fp8" not in t8 and "| 700 | 950 |" in t8, t8
    # The fp8 suite's wall table: the Python package's fp8 call, the capi's, the peers, and
    # longattn fp8's kernel time.
    f8["impls"]["longattn fp8"] = {"tflops": 800.0, "us": 600.0, "wall_us": 640.0}
    f8["impls"]["longattn fp8 (py)"] = {"wall_us": 655.5}
    f8["impls"]["cuDNN fp8"]["wall_us"] = 580.0
    tw = report.wall_table([f8], report.FP8_WALL, kernel="longattn fp8")
    assert "longattn fp8 (Python package) us/call" in tw and "| 655.5 | 640.0 | 580.0 | n/a | n/a | 600.0 |" in tw, tw
    w = fake_row(shapes.windows()[0], {"FA3": {"tflops": 700.0}, "longattn": {"tflops": 600.0},
                                       "longattn plain": {"tflops": 650.0}})
    assert "| 700 | 600 | 0.857 | n/a | 650 | 0.923 |" in report.window_table([w])


def test_json():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "bench.json")
        report.save_json(p, "a", {"x": 1})
        report.save_json(p, "b", {"y": float("nan")})
        report.save_json(p, "a", {"x": 2})
        data = json.load(open(p))
        assert data["a"] == {"x": 2} and "b" in data
        report.append_text(os.path.join(d, "t.md"), "one")
        report.append_text(os.path.join(d, "t.md"), "two")
        assert open(os.path.join(d, "t.md")).read() == "one\n\ntwo\n\n"


if __name__ == "__main__":
    for name, f in list(globals().items()):
        if name.startswith("test_"):
            f()
            print("ok", name)
