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
