"""How the benchmark times: kernel time from CUPTI through torch.profiler, per-call wall time
through Python, and the interleaving of implementations.

Kernel time. Each timed window runs one implementation alone: its N calls back to back,
then a sync, inside a torch.profiler window that records CUDA activity only. CUPTI sees
every kernel of the process, JAX's (FA3) and cuDNN's too, so the window's kernel time
summed over every kernel and memset in it, divided by N, is the implementation's GPU time
per call, a split-KV combine or a tile-list pre-kernel included. Launch gaps between kernels
are not counted. Kernel names are still matched against what each implementation is
expected to launch (Impl.expect): a window whose kernels match nothing is reported with the
names it saw, so a mislabelled column shows.

Interleaving. Clock and power drift hit alike when implementations alternate: each round
times every (implementation, mode) once, in an order shuffled per round; the result is the
median over rounds (default 3).

Wall time. perf_counter over N back-to-back calls from Python, ended by a sync: what an
eager caller sees, host overhead (argument checks, allocation, dispatch) included.
"""
import random
import re
import statistics
import time


def short(e, n=160):
    """One line of an exception: 'Type: first line'."""
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0][:n] if s else ''}"


def _sync():
    import torch
    torch.cuda.synchronize()


# Device-side records of the profiler itself, not of the work (CUPTI overhead kinds).
_NOT_WORK = re.compile(r"Buffer Flush|Activity Buffer|CUPTI|Overhead|Module Loading|Function Loading", re.I)


def _device_events(prof):
    """(name, microseconds) of every device-side event (kernels, memsets, copies) in a window."""
    out = []
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if getattr(dt, "name", str(dt)) != "CUDA" or _NOT_WORK.search(e.name):
            continue
        out.append((e.name[:300], e.time_range.elapsed_us()))  # template names run to kilobytes
    return out


def kernel_time(impl, idxs):
    """(microseconds per call, kernels) of impl over input sets idxs, from CUPTI. kernels: a
    list of {name, n (launches per call), us (per call)}, longest first."""
    from torch.profiler import ProfilerActivity, profile
    impl.setup()
    try:
        _sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in idxs:
                impl.call(i)
            impl.sync()
    finally:
        impl.teardown()
    ev = _device_events(prof)
    if not ev:
        raise RuntimeError("the profiler recorded no kernel (CUPTI unavailable?)")
    per = {}
    for name, us in ev:
        n, t = per.get(name, (0, 0.0))
        per[name] = (n + 1, t + us)
    n = float(len(idxs))
    ks = sorted(({"name": k, "n": c / n, "us": t / n} for k, (c, t) in per.items()), key=lambda k: -k["us"])
    return sum(k["us"] for k in ks), ks


def wall_time(impl, idxs):
    """Microseconds per call from Python over idxs, ended by a sync (host overhead included)."""
    impl.setup()
    try:
        _sync()
        t0 = time.perf_counter()
        for i in idxs:
            impl.call(i)
        impl.sync()
        t1 = time.perf_counter()
    finally:
        impl.teardown()
    return (t1 - t0) * 1e6 / len(idxs)


def unmatched(kernels, expect):
    """A note when no kernel of the window matches the expected name pattern, else None."""
    if not expect or not kernels:
        return None
    pat = re.compile(expect, re.I)
    if any(pat.search(k["name"]) for k in kernels):
        return None
    return f"no kernel matched /{expect}/ (saw {', '.join(k['name'][:60] for k in kernels[:3])})"


def interleave(entries, rounds, seed=7):
    """entries: {key: fn() -> (us, info)}. Every round runs each entry once, in a shuffled
    order. Returns ({key: median us}, {key: info of its first run}, {key: error}, {key: every
    round's us, in round order}); an entry that raises is dropped from later rounds and
    reported in errors."""
    rng = random.Random(seed)
    times = {k: [] for k in entries}
    info, errors = {}, {}
    for _ in range(max(1, rounds)):
        for k in rng.sample(list(entries), len(entries)):
            if k in errors:
                continue
            try:
                us, inf = entries[k]()
            except Exception as e:  # noqa: BLE001 - one failing column must not end the row
                errors[k] = short(e)
                try:
                    _sync()
                except Exception:  # noqa: BLE001
                    pass
                continue
            times[k].append(us)
            info.setdefault(k, inf)
    return {k: statistics.median(v) for k, v in times.items() if v}, info, errors, times
