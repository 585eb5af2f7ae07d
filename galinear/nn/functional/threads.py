"""Thread counts inside a call: torch's intra-op pool, numba's parallel loops, and token-block
workers.

:class:`intra_op_threads` runs a block with a given intra-op count and restores the previous
counts on exit. It also remembers the count its caller had (:func:`caller_threads`): a backend
that runs with one intra-op thread can still use the caller's cores by handing independent
pieces of work to that many Python threads (:func:`for_each_block`). Each piece then runs
serially, without the barriers of the intra-op pool; with another busy process on the machine
a barrier costs a scheduler quantum each time, so many small parallel operations become much
slower than one thread, while independent pieces only wait for the core they run on.
"""
from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import torch

from galinear.nn.functional._common import _capturing

__all__ = ["caller_threads", "concurrent_numba_ok", "for_each_block", "intra_op_threads"]

_CALLER: contextvars.ContextVar[int | None] = contextvars.ContextVar("galinear_caller_threads", default=None)


def caller_threads() -> int:
    """The thread count of the code that called into galinear: the count recorded by the
    outermost :class:`intra_op_threads` block around this point, else torch's current count."""
    count = _CALLER.get()
    return torch.get_num_threads() if count is None else count


def _numba():
    """galinear._numba (the module that imports numba) when numba imports, else None."""
    try:
        from galinear import _numba
    except ImportError:  # numba missing or broken: torch's threads only
        return None
    return _numba


class intra_op_threads:
    """``with intra_op_threads(k):`` runs the block with ``k`` intra-op threads: torch's pool
    (``torch.set_num_threads``, which sets MKL's count too) and numba's parallel loops (at most the
    NUMBA_NUM_THREADS it started with). The previous counts come back on exit, also when the block
    raises. A no-op for ``k`` None and while a call is being captured or transformed. Thread counts
    are process-wide for torch: calls on several Python threads at once share them.

    Inside the block :func:`caller_threads` is ``workers`` when given, else the count the caller
    had when the outermost such block was entered.
    """

    __slots__ = ("count", "workers", "saved", "token")

    def __init__(self, count: int | None, workers: int | None = None):
        for name, value in (("the thread count", count), ("the worker count", workers)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        self.count = count
        self.workers = workers
        self.saved = None
        self.token = None

    def __enter__(self):
        count = self.count
        if count is None or _capturing():
            return self
        self.token = _CALLER.set(self.workers if self.workers is not None else caller_threads())
        torch_now = torch.get_num_threads()  # first: starting numba's pool may change torch's count
        numba = _numba()
        numba_now = None if numba is None else numba.numba.get_num_threads()
        if numba_now is not None and numba_now != count:
            numba.set_threads(count)
        else:
            numba = None  # nothing to restore
        self.saved = (torch_now, numba, numba_now)
        if torch.get_num_threads() != count:
            torch.set_num_threads(count)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            torch_now, numba, numba_now = self.saved
            self.saved = None
            if numba is not None:
                numba.set_threads(numba_now)
            if torch.get_num_threads() != torch_now:
                torch.set_num_threads(torch_now)
        if self.token is not None:
            _CALLER.reset(self.token)
            self.token = None
        return False


def concurrent_numba_ok() -> bool:
    """Whether compiled kernels may run on several threads at once: yes without numba, and with
    its "omp" and "tbb" threading layers; not with "workqueue" (not thread-safe), nor before
    numba's first parallel loop has chosen its layer (that call runs on one thread)."""
    numba = _numba()
    if numba is None:
        return True
    try:
        return numba.numba.threading_layer() != "workqueue"
    except ValueError:  # no parallel loop has run yet
        return False


#: helper threads of :func:`for_each_block` (the calling thread is one more worker)
_HELPERS = max(1, (os.cpu_count() or 1) - 1)
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _forget_pool_in_child() -> None:
    """A forked child has none of the parent's threads: it starts a pool of its own when it needs one
    (the parent's would take work and never run it)."""
    global _POOL, _POOL_LOCK
    _POOL = None
    _POOL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=_HELPERS, thread_name_prefix="galinear-blocks")
        return _POOL


def for_each_block(blocks: int, work: Callable[[Callable[[], int | None]], None], workers: int) -> None:
    """Run ``work(next_block)`` on ``min(workers, blocks)`` threads, this one included.

    ``next_block()`` hands out the block indices 0 .. blocks - 1, each once, then None, so a
    thread that waits for its core takes fewer blocks and none waits for another at a barrier.
    ``work`` must use one intra-op thread per call (the caller's :class:`intra_op_threads`
    block sets torch's process-wide count; numba's count is per thread and set to 1 here). The
    first exception raised by any thread is raised here, after all threads have stopped; once a
    thread has raised, ``next_block()`` returns None to every thread.
    """
    workers = max(1, min(int(workers), blocks, _HELPERS + 1))
    if workers > 1 and not concurrent_numba_ok():
        workers = 1
    remaining = iter(range(blocks))
    lock = threading.Lock()
    stopped = False

    def next_block():
        with lock:
            return None if stopped else next(remaining, None)

    if workers == 1:
        work(next_block)
        return
    numba = _numba()

    def run(helper: bool):
        nonlocal stopped
        if helper and numba is not None:
            numba.set_threads(1)  # numba's count is per thread; pool threads start with its maximum
        try:
            work(next_block)
        except BaseException:
            with lock:  # no more blocks for anyone: the call fails
                stopped = True
            raise

    futures = [_pool().submit(run, True) for _ in range(workers - 1)]
    error = None
    try:
        run(False)
    except BaseException as exc:  # noqa: BLE001 - re-raised below, after the helpers stopped
        error = exc
    for future in futures:
        try:
            future.result()
        except BaseException as exc:  # noqa: BLE001
            error = error or exc
    if error is not None:
        raise error
