"""Recycled memory for large kernel outputs.

A fresh array of tens of megabytes costs more than the kernel that fills it: the C allocator maps
blocks above its threshold (32 MiB at most in glibc) straight from the operating system and gives
them back on ``free``, so every call page-faults and zeroes its whole output again. A compiled
kernel called in a loop on a batch of a million rows spent more time in those faults than in its
arithmetic.

:func:`empty` is ``numpy.empty`` for outputs of at least :data:`MIN_BYTES`, with one difference:
when the array it returned (and every view of it) is garbage, its memory goes back to a small
pool instead of the operating system, and the next request of the same size takes it from there.
The pool holds at most :func:`pool_limit` bytes of free blocks (64 MiB by default, changed with
:func:`set_pool_limit`; 0 turns recycling off), the oldest leaving first when a newer one needs
the room; :func:`release` empties it. Smaller outputs are
plain ``numpy.empty`` arrays. Like ``numpy.empty``, a recycled array holds arbitrary values until
the kernel writes every element of it.

The arrays returned are ordinary ``numpy.ndarray`` objects; their ``base`` is the pooled block.
"""
from __future__ import annotations

import threading
from math import prod

import numpy as np

__all__ = ["MIN_BYTES", "empty", "pool_limit", "pooled_bytes", "release", "set_pool_limit"]

MIN_BYTES = 4 << 20
_lock = threading.Lock()
_free: list[np.ndarray] = []  # free blocks, oldest first (a few: each is at least MIN_BYTES)
_state = {"limit": 64 << 20, "held": 0}


class _Raw(np.ndarray):
    """The bytes of one pooled block (a type of its own: see :func:`empty`)."""


class _Block(np.ndarray):
    """A pooled block of raw bytes; when the last array viewing it goes, its memory is recycled."""

    def __del__(self):
        raw = self.base
        if not isinstance(raw, _Raw) or _state is None:  # shutdown: module globals cleared
            return
        nbytes = raw.nbytes
        if nbytes > _state["limit"]:
            return
        with _lock:
            _free.append(raw)
            _state["held"] += nbytes
            while _state["held"] > _state["limit"]:  # the oldest free blocks go first
                _state["held"] -= _free.pop(0).nbytes


def empty(shape, dtype=np.float64) -> np.ndarray:
    """An uninitialised C-contiguous array, as ``numpy.empty(shape, dtype)``; large ones recycle
    the memory of earlier arrays of the same size that are gone."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or _state["limit"] <= 0:
        return np.empty(shape, dtype)
    raw = None
    with _lock:
        for i in range(len(_free) - 1, -1, -1):  # the newest block of this size
            if _free[i].nbytes == nbytes:
                raw = _free.pop(i)
                _state["held"] -= nbytes
                break
    if raw is None:
        raw = np.empty(nbytes, np.uint8).view(_Raw)
    # numpy shortens a view's chain of bases, but only through arrays of the view's own type: with
    # three types (ndarray -> _Block -> _Raw) every array made from the block keeps the block
    # alive, and the block goes (recycling ``raw``) only with the last of them.
    block = raw.view(_Block)
    return np.ndarray.view(block, dtype=dtype, type=np.ndarray).reshape(shape)


def pool_limit() -> int:
    """The most bytes of free blocks the pool keeps."""
    return _state["limit"]


def set_pool_limit(nbytes: int) -> int:
    """Keep at most ``nbytes`` of free blocks (0: recycle nothing); returns the previous limit.
    Blocks beyond the new limit are released at once."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"the pool limit is a number of bytes >= 0, got {nbytes}")
    with _lock:
        previous = _state["limit"]
        _state["limit"] = nbytes
    if pooled_bytes() > nbytes:
        release()
    return previous


def pooled_bytes() -> int:
    """Bytes held in free blocks now."""
    return _state["held"]


def release() -> None:
    """Give every free block back to the operating system."""
    with _lock:
        _free.clear()
        _state["held"] = 0
