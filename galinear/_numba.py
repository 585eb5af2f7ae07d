"""The one place galinear imports numba.

Sets a writable on-disk cache before numba loads (site-packages may be read-only) and offers
``jit``: ``numba.njit(cache=True)`` by default. Compilation happens on first call, never at import.
"""
import os
from pathlib import Path


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "galinear" / "numba"


if not os.environ.get("NUMBA_CACHE_DIR"):
    os.environ["NUMBA_CACHE_DIR"] = str(default_cache_dir())

import numba  # noqa: E402

def jit(func=None, **options):
    """``numba.njit`` with ``cache=True`` unless told otherwise.

    Use as ``@jit`` or ``@jit(parallel=True, fastmath=False)``.
    """
    options.setdefault("cache", True)
    if func is None:
        return lambda f: numba.njit(**options)(f)
    return numba.njit(**options)(func)


prange = numba.prange


def set_threads(count: int) -> int:
    """Use ``count`` threads in numba's parallel loops (at most the NUMBA_NUM_THREADS it started
    with); returns the count set."""
    count = max(1, min(int(count), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(count)
    return count
