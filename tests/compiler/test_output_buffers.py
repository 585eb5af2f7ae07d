"""galinear._buffers: large outputs recycle the memory of dead arrays, never of live ones."""
from __future__ import annotations

import gc
import pickle
import threading

import numpy as np
import pytest

from galinear import _buffers

pytestmark = pytest.mark.core

SHAPE = (200_000, 5)  # 8 MB in float64: above MIN_BYTES
NBYTES = 200_000 * 5 * 8


@pytest.fixture(autouse=True)
def fresh_pool():
    previous = _buffers.set_pool_limit(64 << 20)
    _buffers.release()
    yield
    _buffers.release()
    _buffers.set_pool_limit(previous)


def test_small_outputs_are_plain_arrays():
    a = _buffers.empty((10, 4), np.float32)
    assert a.shape == (10, 4) and a.dtype == np.float32 and a.flags.owndata
    del a
    assert _buffers.pooled_bytes() == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_output_is_an_ordinary_writable_contiguous_array(dtype):
    a = _buffers.empty(SHAPE, dtype)
    assert type(a) is np.ndarray and a.shape == SHAPE and a.dtype == dtype
    assert a.flags.c_contiguous and a.flags.writeable
    a[:] = 2.5
    assert float(a.sum()) == pytest.approx(2.5 * a.size)
    b = pickle.loads(pickle.dumps(a[:3]))
    assert type(b) is np.ndarray and np.all(b == 2.5)


def test_memory_returns_only_when_every_view_is_gone():
    a = _buffers.empty(SHAPE)
    row, flat, part = a[7], a.reshape(-1), a[10:20, 1:3]
    address = a.ctypes.data
    del a
    gc.collect()
    assert _buffers.pooled_bytes() == 0
    other = _buffers.empty(SHAPE)  # the first block is still in use: a new one
    assert other.ctypes.data != address
    row[:] = 1.0
    flat[-1] = 4.0
    part[:] = 3.0
    assert flat[7 * 5] == 1.0 and part[0, 0] == 3.0 and flat[-1] == 4.0
    del row, flat
    gc.collect()
    assert _buffers.pooled_bytes() == 0
    del part
    assert _buffers.pooled_bytes() == NBYTES
    again = _buffers.empty(SHAPE)
    assert again.ctypes.data == address and _buffers.pooled_bytes() == 0
    del other, again


def test_a_recycled_block_serves_another_shape_of_the_same_size():
    a = _buffers.empty(SHAPE)
    address = a.ctypes.data
    del a
    b = _buffers.empty((SHAPE[0] * 10,), np.float32)  # same byte count
    assert b.ctypes.data == address and b.shape == (SHAPE[0] * 10,)


def test_the_limit_bounds_what_is_kept():
    _buffers.set_pool_limit(NBYTES + 1)
    a, b = _buffers.empty(SHAPE), _buffers.empty(SHAPE)
    del a, b
    assert _buffers.pooled_bytes() == NBYTES  # the second did not fit
    assert _buffers.set_pool_limit(0) == NBYTES + 1
    assert _buffers.pooled_bytes() == 0
    c = _buffers.empty(SHAPE)
    assert c.flags.owndata  # recycling off: plain numpy.empty
    del c
    assert _buffers.pooled_bytes() == 0
    with pytest.raises(ValueError, match="bytes >= 0"):
        _buffers.set_pool_limit(-1)


def test_release_empties_the_pool():
    del_me = _buffers.empty(SHAPE)
    del del_me
    assert _buffers.pooled_bytes() == NBYTES
    _buffers.release()
    assert _buffers.pooled_bytes() == 0


def test_threads_never_share_a_live_block():
    seen = []
    errors = []

    def work(value):
        try:
            for _ in range(30):
                a = _buffers.empty(SHAPE)
                a[:] = value
                if not np.all(a == value):
                    errors.append("overwritten while alive")
                seen.append(a.ctypes.data)
                del a
        except Exception as error:  # pragma: no cover - reported below
            errors.append(repr(error))

    threads = [threading.Thread(target=work, args=(float(v),)) for v in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _buffers.pooled_bytes() <= 64 << 20


def test_a_new_size_pushes_out_the_oldest_blocks():
    """Blocks of sizes no longer asked for do not keep the pool from serving the size in use."""
    _buffers.set_pool_limit(2 * NBYTES)
    old = [_buffers.empty((NBYTES // 8,)) for _ in range(2)]
    del old  # the pool is full of this size
    assert _buffers.pooled_bytes() == 2 * NBYTES
    wide = _buffers.empty((NBYTES // 4,))  # twice the size: a fresh block
    address = wide.ctypes.data
    del wide  # pushes both old blocks out
    assert _buffers.pooled_bytes() == 2 * NBYTES
    again = _buffers.empty((NBYTES // 4,))
    assert again.ctypes.data == address and _buffers.pooled_bytes() == 0
