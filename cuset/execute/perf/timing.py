"""KernelBench-style timing of a forward: warm-up runs, then timed trials, the L2 cache
flushed before each trial, each trial between two CUDA events.

STANDALONE (stdlib only, never cuset): the perf harness copies this file into its
sandboxed run dir and imports it there. The events, the synchronize and the flush are
injected, so the loop's logic is tested with a fake clock on any machine:

    timer = CudaEventTimer(torch)          # captured BEFORE the candidate is imported
    flush = l2_flush(torch, "cuda", l2_bytes)
    ms = time_trials(lambda: model(*inputs), warmup=3, trials=100, timer=timer, flush=flush)

`CudaEventTimer` binds the methods of torch's C event type (`torch._C._CudaEventBase`,
an immutable type whose methods Python code cannot reassign) and the C synchronize
when it is made, so a candidate that later patches `torch.cuda.Event` or
`torch.cuda.synchronize` changes nothing here (the static rule timing_patch flags it too).
"""

import math
import statistics
import time

DEFAULT_WARMUP = 3
DEFAULT_TRIALS = 100
L2_FLUSH_FACTOR = 2          # the flush buffer is twice the L2 cache


def time_trials(run, *, warmup, trials, timer, flush=None, after=None):
    """Milliseconds of each of `trials` timed calls of `run()`, after `warmup` untimed ones.
    Before each trial: `flush()` (not timed) and a device synchronize, so a trial starts
    with a cold L2 and an idle device; after it, the end event is waited for, then `after()`
    runs (not timed)."""
    if warmup < 0 or trials < 1:
        raise ValueError(f"warmup={warmup}, trials={trials}: need warmup >= 0 and trials >= 1")
    for _ in range(warmup):
        run()
    timer.synchronize()
    times = []
    for _ in range(trials):
        if flush is not None:
            flush()
        timer.synchronize()
        start, end = timer.pair()
        timer.record(start)
        run()
        timer.record(end)
        timer.wait(end)
        times.append(float(timer.elapsed_ms(start, end)))
        if after is not None:
            after()
    return times


def stats(times):
    """mean, median, std (sample), min, max of trial times (ms), and n."""
    if not times:
        raise ValueError("no trial times")
    return {"mean": statistics.fmean(times), "median": statistics.median(times),
            "std": statistics.stdev(times) if len(times) > 1 else 0.0, "min": min(times), "max": max(times),
            "n": len(times)}


class CudaEventTimer:
    """CUDA events and synchronize bound when made (see the module docstring)."""

    def __init__(self, torch):
        base = torch._C._CudaEventBase
        self._new = base.__new__
        self._base = base
        self._record = base.record
        self._sync_event = base.synchronize
        self._elapsed = base.elapsed_time
        self._device_sync = torch._C._cuda_synchronize
        self._stream = torch.cuda.current_stream()   # the stream the forward is launched on

    def pair(self):
        return (self._new(self._base, enable_timing=True), self._new(self._base, enable_timing=True))

    def record(self, event):
        self._record(event, self._stream)

    def wait(self, event):
        self._sync_event(event)

    def elapsed_ms(self, start, end):
        return self._elapsed(start, end)

    def synchronize(self):
        self._device_sync()


class HostTimer:
    """The host's monotonic clock in place of CUDA events: only for running the timing
    harness's logic on a CPU in tests (kb_timing_harness.py with device "cpu"); no CPU time
    is ever reported as a kernel time."""

    def __init__(self):
        self._now = time.perf_counter

    def pair(self):
        return {}, {}

    def record(self, event):
        event["t"] = self._now()

    def wait(self, event):
        pass

    def elapsed_ms(self, start, end):
        return (end["t"] - start["t"]) * 1e3

    def synchronize(self):
        pass


def l2_flush(torch, device, l2_bytes):
    """A flush: zero a buffer of L2_FLUSH_FACTOR x `l2_bytes` (evicts what the last trial left
    in L2), its zero_ bound now."""
    n = max(int(l2_bytes) * L2_FLUSH_FACTOR // 4, 1)
    buf = torch.empty(n, dtype=torch.float32, device=device)
    zero = torch.Tensor.zero_
    return lambda: zero(buf)


def finite_positive(times):
    return all(isinstance(t, float) and math.isfinite(t) and t > 0 for t in times)
