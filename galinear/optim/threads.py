r"""A training loop's thread count chosen from its own step times (``--threads auto``).

A training step on the CPU is many parallel operations of torch's intra-op pool, each ending at a
barrier. With another busy process on the machine a barrier waits for a core that process holds,
and a step at two threads can take twice as long as at one (docs/performance.md, "Threads").
Which count is fastest depends on the load of the moment, so it is measured, not guessed:

- the first step of every loop runs at the current count and is not counted (it compiles
  kernels and fills caches);
- then, in the first loop, a *probe*: ``probe_steps`` real steps at each candidate count (the
  powers of two below the most allowed, and the most), interleaved (most, ..., 1, most, ..., 1)
  so that a change of load hits every count alike; the loop goes on at the count of the smallest
  median step time. Later loops (the next layer's fit, the distillation) start at the count
  chosen last and measure their own reference step time over ``probe_steps + 1`` steps;
- the probe is repeated after ``every_seconds`` of step time, and at once when three steps in a
  row take ``slowdown`` times the chosen count's median (the load changed); each probe that
  confirms the count in use doubles the wait before the next one (up to ``longest_seconds``),
  one that changes it (or a slowdown) resets the wait to ``every_seconds``.

Before the first loop the work of a command (loading, captures, evaluations) runs at the count
:meth:`ThreadGovernor.calibrate` picks: the same interleaved comparison on a few float32 matrix
products of a training step's shape (a fraction of a second).

Every probe step is a step of the loop, so nothing is computed twice; its cost is the steps
run at the slower counts. The counts are set for torch (``torch.set_num_threads``, MKL and OpenMP)
and numba's parallel loops alike. A thread count can change the last bits of torch's parallel
reductions: a run under the governor is not bit-for-bit repeatable, one at a fixed count is.

The governor is process-wide, like the thread counts it sets: :func:`use` installs one and
:func:`galinear.optim.loop.train` drives it (:meth:`ThreadGovernor.start_loop`,
:meth:`~ThreadGovernor.before_step`, :meth:`~ThreadGovernor.after_step`) in every loop of the
process: train-lm's steps, the fits and distillation of ``galinear compress``.
"""
from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time
from typing import Callable

__all__ = ["ThreadGovernor", "active", "candidate_counts", "install", "kept", "restore", "set_counts", "snapshot",
           "use"]


def candidate_counts(most: int) -> tuple[int, ...]:
    """The counts a probe tries for at most ``most`` threads: 1, 2, 4, ... below ``most``, and ``most``."""
    if isinstance(most, bool) or not isinstance(most, int) or most < 1:
        raise ValueError(f"the most threads must be a positive integer, got {most!r}")
    counts = {most}
    power = 1
    while power < most:
        counts.add(power)
        power *= 2
    return tuple(sorted(counts))


def set_counts(count: int) -> None:
    """Run torch's intra-op pool and numba's parallel loops with ``count`` threads (numba's first:
    starting its pool can reset torch's count)."""
    import torch

    try:
        from galinear import _numba
    except ImportError:  # numba missing: torch's pool only
        _numba = None
    if _numba is not None:
        _numba.set_threads(count)
    torch.set_num_threads(count)


class ThreadGovernor:
    """Chooses the thread count of a training loop's steps from their measured times (module text).

    Parameters
    ----------
    most : int, optional
        The most threads a step may use (default: the CPU cores).
    probe_steps : int
        Steps at each candidate count per probe (their median is compared).
    every_seconds : float
        Step time after which the counts are probed again.
    slowdown : float
        Three steps in a row this many times slower than the chosen count's median start a probe.
    longest_seconds : float, optional
        The longest wait between probes that keep confirming the count (default 16 x ``every_seconds``).
    apply : callable, optional
        ``apply(count)`` sets the count (default :func:`set_counts`); tests pass a recorder.

    ``decisions`` lists every probe's outcome: ``{"step", "count", "medians"}`` (medians in
    seconds per step, by count), ``step`` counting the steps the governor has seen.
    """

    def __init__(self, most: int | None = None, *, probe_steps: int = 2, every_seconds: float = 60.0,
                 slowdown: float = 1.5, longest_seconds: float | None = None,
                 apply: Callable[[int], None] | None = None):
        most = (os.cpu_count() or 1) if most is None else most
        self.candidates = candidate_counts(most)
        if isinstance(probe_steps, bool) or not isinstance(probe_steps, int) or probe_steps < 1:
            raise ValueError(f"probe_steps must be a positive integer, got {probe_steps!r}")
        longest_seconds = 16.0 * every_seconds if longest_seconds is None else longest_seconds
        for name, value, low in (("every_seconds", every_seconds, 0.0), ("slowdown", slowdown, 1.0),
                                 ("longest_seconds", longest_seconds, 0.0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < math.inf:
                raise ValueError(f"{name} must be a finite number > {low:g}, got {value!r}")
        self.most, self.probe_steps = most, probe_steps
        self.every_seconds, self.slowdown = float(every_seconds), float(slowdown)
        self.longest_seconds = max(float(longest_seconds), self.every_seconds)
        self._wait = self.every_seconds  # step seconds until the next probe
        self._apply = set_counts if apply is None else apply
        self.count = None          # the count last set
        self.chosen = most         # the count steps run at outside a probe
        self.decisions: list[dict] = []
        self.calibration: dict[int, float] = {}
        self.steps = 0
        self._median = None        # the chosen count's step time in this loop (None: not known yet)
        self._reference: list[float] = []
        self._warmup = True
        self._queue: list[int] = []
        self._samples: dict[int, list[float]] = {}
        self._since = 0.0
        self._streak = 0

    def calibrate(self, products: int = 4, rows: int = 2048, width: int = 256) -> dict:
        """Time ``products`` products (rows x width) @ (width x width) at each candidate count,
        twice, interleaved, and start at the fastest (the first loop still probes its own steps).
        Returns ``{count: median seconds}`` (empty with one candidate)."""
        if len(self.candidates) == 1:
            return {}
        import torch

        generator = torch.Generator().manual_seed(0)
        a = torch.randn(rows, width, generator=generator)
        b = torch.randn(width, width, generator=generator)
        times: dict[int, list[float]] = {count: [] for count in self.candidates}
        for count in sorted(self.candidates, reverse=True) * 2:
            self._set(count)
            torch.mm(a, b)  # the pool at this count is up before the clock starts
            started = time.perf_counter()
            for _ in range(products):
                torch.mm(a, b)
            times[count].append(time.perf_counter() - started)
        medians = {count: statistics.median(values) for count, values in times.items()}
        self.chosen = min(medians, key=lambda count: (medians[count], -count))
        self._set(self.chosen)
        self.calibration = medians
        return medians

    def start_loop(self) -> None:
        """A new loop starts (its steps may cost more or less than the last loop's): its first
        step is not counted; then a probe if none has chosen a count yet, else the loop's own
        reference step time at the chosen count (the wait before the next probe goes on)."""
        self._warmup = True
        self._queue, self._samples = [], {}
        self._median, self._reference, self._streak = None, [], 0

    def _start_probe(self) -> None:
        if len(self.candidates) == 1:
            return
        order = sorted(self.candidates, reverse=True)
        self._queue = order * self.probe_steps
        self._samples = {count: [] for count in self.candidates}

    def _set(self, count: int) -> int:
        if count != self.count:
            self._apply(count)
            self.count = count
        return count

    def before_step(self) -> int:
        """Set and return the thread count of the coming step."""
        if not self._warmup and self._queue:
            return self._set(self._queue[0])
        return self._set(self.chosen)

    def after_step(self, seconds: float) -> None:
        """Record the wall seconds of the step just run at the count :meth:`before_step` set."""
        self.steps += 1
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0):
            return  # a step whose time could not be measured says nothing
        if self._warmup:
            self._warmup = False
            if not self.decisions:
                self._start_probe()
            return
        if self._queue:
            self._samples[self._queue.pop(0)].append(float(seconds))
            if not self._queue:
                self._decide()
            return
        self._since += seconds
        if self._median is None:
            self._reference.append(float(seconds))
            if len(self._reference) > self.probe_steps:
                self._median = statistics.median(self._reference)
        self._streak = self._streak + 1 if self._median is not None and seconds > self.slowdown * self._median else 0
        if self._streak >= 3:
            self._wait = self.every_seconds
            self._start_probe()
        elif self._since >= self._wait:
            self._start_probe()

    def _decide(self) -> None:
        medians = {count: statistics.median(times) for count, times in self._samples.items()}
        # the fastest; on a tie the larger count
        chosen = min(medians, key=lambda count: (medians[count], -count))
        confirmed = bool(self.decisions) and chosen == self.chosen
        self._wait = min(2 * self._wait, self.longest_seconds) if confirmed else self.every_seconds
        self.chosen = chosen
        self._median = medians[self.chosen]
        self._since, self._streak, self._samples = 0.0, 0, {}
        self.decisions.append({"step": self.steps, "count": self.chosen, "medians": medians})

    def summary(self) -> str:
        """One line: the probes' choices (e.g. ``threads chosen by step time: 2 at step 5 (2: 0.31 s, 1: 0.52 s)``)."""
        if not self.decisions:
            if self.calibration:
                products = ", ".join(f"{c}: {s:.3g} s" for c, s in sorted(self.calibration.items(), reverse=True))
                return f"threads: {self.chosen} (from matrix products: {products}; no training step probed)"
            return f"threads: {self.chosen} (nothing probed)"
        parts = []
        for d in self.decisions[-3:]:
            medians = ", ".join(f"{c}: {s:.3g} s" for c, s in sorted(d["medians"].items(), reverse=True))
            parts.append(f"{d['count']} at step {d['step']} ({medians})")
        more = f"{len(self.decisions) - 3} earlier probe(s), then " if len(self.decisions) > 3 else ""
        return "threads chosen by step time: " + more + "; ".join(parts)


_ACTIVE: ThreadGovernor | None = None


def use(governor: ThreadGovernor | None) -> ThreadGovernor | None:
    """Install ``governor`` for every training loop of this process (None: loops keep the
    current count); returns the one installed before."""
    global _ACTIVE
    if governor is not None and not isinstance(governor, ThreadGovernor):
        raise TypeError(f"use() takes a ThreadGovernor or None, got {type(governor).__name__}")
    previous, _ACTIVE = _ACTIVE, governor
    return previous


def active() -> ThreadGovernor | None:
    """The governor installed by :func:`use`, or None."""
    return _ACTIVE


def install(most: int | None = None) -> ThreadGovernor:
    """What ``--threads auto`` does: a :class:`ThreadGovernor` for at most ``most`` threads
    (default: the CPU cores), its starting count calibrated, installed with :func:`use`."""
    governor = ThreadGovernor(most)
    governor.calibrate()
    use(governor)
    return governor


def snapshot() -> dict:
    """This process's thread settings that a study or a test may change: torch's count (once torch is
    imported), numba's (None while its pool has not started: reading the count would start it) and
    the governor installed by :func:`use`. :func:`restore` puts them back."""
    state = {"governor": _ACTIVE, "numba": None}
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch"] = torch.get_num_threads()
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is not None and getattr(parallel, "_is_initialized", False):
        state["numba"] = parallel.get_num_threads()
    return state


def restore(state: dict) -> None:
    """Put back the settings of :func:`snapshot` (numba's count first: starting its pool can reset
    torch's). A numba pool started since the snapshot goes back to the count an unstarted pool starts
    with (``numba.config.NUMBA_NUM_THREADS``); a count that is already right is left alone."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is not None and getattr(parallel, "_is_initialized", False):
        count = state.get("numba") or sys.modules["numba"].config.NUMBA_NUM_THREADS
        if parallel.get_num_threads() != count:
            parallel.set_num_threads(count)
    if "torch" in state:
        torch = sys.modules["torch"]
        if torch.get_num_threads() != state["torch"]:
            torch.set_num_threads(state["torch"])
    if _ACTIVE is not state.get("governor"):
        use(state.get("governor"))


@contextlib.contextmanager
def kept():
    """``with kept():`` the block may set thread counts and install a governor; the process has its
    own back when the block ends, however it ends."""
    state = snapshot()
    try:
        yield
    finally:
        restore(state)
