"""The one place galinear imports numba.

Sets the on-disk cache folder before numba loads (site-packages may be read-only) and offers
``jit``: ``numba.njit(cache=True)`` by default. Compilation happens on first call, never at import.
Kernel inputs go through ``readonly`` so that each kernel compiles once per dtype (numba gives
read-only and writable arrays different types).

What the disk cache trusts
--------------------------
numba's cache index files (``*.nbi``) are pickles, and numba unpickles them before it checks
whether they are stale; generated kernel modules (:mod:`galinear.core.graded`) are Python files.
Whoever can write the cache folder can therefore run code in every galinear process. So the
folder is used only when nobody but the current user can write it (:func:`cache_folder_problem`):

- it is a real folder, not a symbolic link, owned by the current user, and neither its group
  nor others may write it (it is created with mode 0700);
- every folder above it (after resolving links) belongs to the current user or to root, and
  is not writable by group or others unless it has the sticky bit (``/tmp``): otherwise its
  owner or writers could rename the cache folder away and put another in its place.

Otherwise galinear warns once (:class:`UntrustedCacheWarning`, naming the folder and the
reason) and runs without the disk cache: kernels are compiled in each process, and generated
kernel modules go to a private temporary folder removed at exit.

Generated kernel modules are imported by :func:`load_generated` from the source galinear has
just generated, held in memory: the file on disk is checked against its SHA-256 (rewritten when
it differs) and only serves numba as the place its cache is keyed on. No ``.pyc`` is read or
written for them, so a planted ``__pycache__`` file never runs. Modules named by a key of what
they compute (:func:`load_keyed`, the per-pattern kernels of :mod:`galinear.core.graded`) are
compiled from the file's text once its first line, the SHA-256 of the rest, matches, so that a
process finding one never builds its source; a file that does not match is regenerated first.
"""
import atexit
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import types
import warnings
from functools import lru_cache
from pathlib import Path

__all__ = ["jit", "prange", "readonly", "set_threads", "default_cache_dir", "cache_folder_problem",
           "disk_cache_folder", "generated_folder", "load_generated", "load_keyed", "UntrustedCacheWarning"]


class UntrustedCacheWarning(UserWarning):
    """The numba cache folder could be written by another user; galinear runs without it."""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "galinear" / "numba"


if not os.environ.get("NUMBA_CACHE_DIR"):
    os.environ["NUMBA_CACHE_DIR"] = str(default_cache_dir())

import numba  # noqa: E402


def _writable_by_others(mode: int) -> bool:
    return bool(mode & (stat.S_IWGRP | stat.S_IWOTH))


def cache_folder_problem(folder) -> str | None:
    """Why ``folder`` cannot be trusted as a code cache, or None when only the current user (and
    root) can change what it holds. The folder is created (mode 0700) when missing."""
    folder = os.path.abspath(os.fspath(folder))
    uid = os.getuid() if hasattr(os, "getuid") else None
    if uid is None:  # no POSIX owners (Windows): the user profile's permissions apply
        return None
    try:
        if not os.path.lexists(folder):
            os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as error:
        return f"it cannot be created or read ({error.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link (whoever controls the link's target controls the cache)"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if info.st_uid != uid:
        return f"it belongs to user id {info.st_uid}, not to the current user ({uid})"
    if _writable_by_others(info.st_mode):
        return (f"its group or other users may write it (mode {stat.S_IMODE(info.st_mode):04o}); "
                f"`chmod 700 {folder}` makes it private")
    parent = os.path.dirname(os.path.realpath(folder))
    while True:
        try:
            above = os.stat(parent)
        except OSError as error:
            return f"the folder {parent} above it cannot be read ({error.strerror})"
        if above.st_uid not in (uid, 0):
            return f"the folder {parent} above it belongs to user id {above.st_uid}, who could replace the cache"
        if _writable_by_others(above.st_mode) and not above.st_mode & stat.S_ISVTX:
            return (f"the folder {parent} above it may be written by its group or other users "
                    f"(mode {stat.S_IMODE(above.st_mode):04o}), who could replace the cache")
        if parent == os.path.dirname(parent):
            return None
        parent = os.path.dirname(parent)


@lru_cache(maxsize=None)
def _checked(folder: str) -> bool:
    problem = cache_folder_problem(folder)
    if problem is None:
        return True
    warnings.warn(f"galinear runs without numba's disk cache, because the cache folder {folder} {problem}; "
                  "kernels are compiled in every process instead (set NUMBA_CACHE_DIR to a folder only you "
                  "can write to keep the cache)", UntrustedCacheWarning, stacklevel=3)
    return False


def disk_cache_folder() -> Path | None:
    """The numba cache folder (``NUMBA_CACHE_DIR``) when it can be trusted, else None (warned once)."""
    folder = os.path.abspath(numba.config.CACHE_DIR or os.environ["NUMBA_CACHE_DIR"])
    return Path(folder) if _checked(folder) else None


@lru_cache(maxsize=None)
def _private_folder() -> Path:
    folder = tempfile.mkdtemp(prefix="galinear-kernels-")  # mode 0700, a fresh name
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return Path(folder)


def generated_folder() -> Path:
    """Where generated kernel modules are written: ``galinear_graded`` in the trusted disk cache
    folder, else a private temporary folder of this process."""
    cache = disk_cache_folder()
    if cache is None:
        return _private_folder()
    folder = cache / "galinear_graded"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def load_generated(name: str, path, source: str) -> types.ModuleType:
    """Import the module ``name`` from ``source`` (just generated), kept as the file ``path``.

    The file is rewritten when its SHA-256 differs from that of ``source`` and checked again
    after writing. The module is compiled from ``source`` itself, never from a ``.pyc``, and no
    ``.pyc`` is written. Its ``__file__`` is ``path``: numba keys its disk cache on that file.
    """
    from galinear._io import atomic_write_text

    if name in sys.modules:
        return sys.modules[name]
    path = Path(path)
    expected = hashlib.sha256(source.encode("utf-8")).hexdigest()

    def digest():
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return None

    if digest() != expected:
        atomic_write_text(str(path), source)
        if digest() != expected:
            raise RuntimeError(f"{path}: the generated kernel changed while it was written; "
                               "another process may be writing the same folder")
    return _execute(name, path, source)


def _execute(name: str, path: Path, source: str) -> types.ModuleType:
    """The module ``name`` run from the text ``source`` (never a ``.pyc``), its ``__file__`` ``path``."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    code = compile(source, str(path), "exec", dont_inherit=True)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102  (the source galinear generated or wrote and checked)
    except BaseException:
        del sys.modules[name]
        raise
    return module


_STAMP = "# sha256 of the lines below: "


def load_keyed(name: str, path, make_source) -> types.ModuleType:
    """The module ``name``, kept as ``path`` and named by a key of what it computes rather than by
    its text, so that a process finding it on disk never builds the source.

    The file's first line holds the SHA-256 of the rest. When the file is there and its text
    matches that line, the module is compiled from the text read (never from a ``.pyc``; the
    folder is one only the current user can write, :func:`generated_folder`, the trust numba's
    own cache index needs). Otherwise ``make_source()`` is called and the module is written and
    loaded as :func:`load_generated` does (a truncated or edited file is replaced before anything
    of it runs)."""
    if name in sys.modules:
        return sys.modules[name]
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    first, newline, rest = text.partition("\n")
    if newline and first == _STAMP + hashlib.sha256(rest.encode("utf-8")).hexdigest():
        return _execute(name, path, text)
    source = make_source()
    return load_generated(name, path, f"{_STAMP}{hashlib.sha256(source.encode('utf-8')).hexdigest()}\n{source}")


def jit(func=None, **options):
    """``numba.njit`` with ``cache=True`` unless told otherwise.

    Use as ``@jit`` or ``@jit(parallel=True, fastmath=False)``. The disk cache is used only in a
    folder only the current user can write (see the module's notes); otherwise ``cache=False``.
    """
    options.setdefault("cache", True)
    if options["cache"] and disk_cache_folder() is None:
        options["cache"] = False
    if func is None:
        return lambda f: numba.njit(**options)(f)
    return numba.njit(**options)(func)


prange = numba.prange


def readonly(arr):
    """``arr`` itself when it is read-only, else a read-only view of it (no copy).

    numba types a read-only array differently from a writable one (``readonly array(float64,
    2d, C)`` vs ``array(float64, 2d, C)``) and compiles a kernel once per combination it meets.
    Kernels take their *inputs* through this function and write only to arrays they allocate
    or are handed as ``out``, so each kernel compiles once per dtype whatever its callers pass.
    """
    if not arr.flags.writeable:
        return arr
    view = arr.view()
    view.setflags(write=False)  # a third of the time of `view.flags.writeable = False`
    return view


def set_threads(count: int) -> int:
    """Use ``count`` threads in numba's parallel loops (at most the NUMBA_NUM_THREADS it started
    with); returns the count set."""
    count = max(1, min(int(count), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(count)
    return count
