"""The one place galinear imports numba.

Sets the on-disk cache folder before numba loads (site-packages may be read-only) and offers
``jit``: ``numba.njit(cache=True)`` by default. Compilation happens on first call, never at import.
Kernel inputs go through ``readonly`` so that each kernel compiles once per dtype (numba gives
read-only and writable arrays different types).

What the disk cache trusts
--------------------------
numba's cache index files (``*.nbi``) are pickles, and numba unpickles them before it checks
whether they are stale; generated kernel modules (:mod:`galinear.core.graded`,
:func:`galinear.compile`) are Python files.
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

Generated files (the modules of :func:`galinear.compile` and of :mod:`galinear.core.graded`, and
the compiler's cache entries) have one name scheme and one layout: ``galinear_<kind>/<kind>_<digest>``
(:func:`generated_folder`, :func:`file_stem`: the digest is that of the key, what the text depends
on), and a first line naming the layout's version, the key's SHA-256 and the SHA-256 of the rest
(:func:`stamped`). A file is used only when that line checks (:func:`read_checked`); one that
fails (missing, truncated, edited, written by an older version under the same name) is written
again before anything of it runs, and files of older versions under other names are left unused.
Modules are imported by :func:`load_generated`, compiled from the checked text, never from a
``.pyc`` (none is read or written), so a planted ``__pycache__`` file never runs; a module whose
text the caller holds (:func:`galinear.compile`'s) is used only when the file holds exactly that
text, and one made from a key (the per-pattern kernels of :mod:`galinear.core.graded`) is read from
the file, so that a process finding it never builds its source.
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
           "disk_cache_folder", "generated_folder", "file_stem", "stamped", "read_checked", "write_checked",
           "load_generated", "FILE_FORMAT", "UntrustedCacheWarning"]


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


def generated_folder(kind: str) -> Path:
    """The folder of the generated files of ``kind`` (``"compiled"``: :func:`galinear.compile`'s
    modules and cache entries; ``"graded"``: the kernels of :mod:`galinear.core.graded`):
    ``galinear_<kind>`` in the trusted disk cache folder, else in a private temporary folder of
    this process (removed at exit)."""
    if not kind.isidentifier():
        raise ValueError(f"the kind of generated files must be an identifier, got {kind!r}")
    cache = disk_cache_folder()
    folder = (_private_folder() if cache is None else cache) / f"galinear_{kind}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


#: Version of the generated files' layout: the first line of every file :func:`write_checked`
#: writes. A file of another layout (the ``# sha256 of the lines below:`` line of earlier versions,
#: or none) never passes :func:`read_checked`: it is written again before anything of it is used.
FILE_FORMAT = 1
_STAMP = "# galinear generated file {format}; key sha256 {key}; sha256 of the lines below {text}"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_stem(kind: str, key: str) -> str:
    """The name of the generated file of ``kind`` for ``key`` (without its suffix), and of its
    module: ``<kind>_<the first 24 hex digits of the key's SHA-256>``. The key is what the file's
    text depends on (a source text, or a description of what a kernel computes); the file's first
    line holds the key's whole digest, so a file is never used for another key."""
    return f"{kind}_{_sha256(key)[:24]}"


def stamped(key: str, body: str) -> str:
    """The text of a generated file: the line naming its layout, its key's SHA-256 and that of
    ``body``, then ``body``."""
    return _STAMP.format(format=FILE_FORMAT, key=_sha256(key), text=_sha256(body)) + "\n" + body


def read_checked(path, key: str) -> str | None:
    """The body of the generated file ``path`` when its first line is this layout's and names
    ``key`` and the SHA-256 of the rest; None for a missing, truncated, edited, older or foreign file."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    first, newline, body = text.partition("\n")
    if newline and first == _STAMP.format(format=FILE_FORMAT, key=_sha256(key), text=_sha256(body)):
        return body
    return None


def write_checked(path, key: str, body: str) -> str:
    """Write ``body`` as the generated file ``path`` of ``key`` (:func:`stamped`, atomically) and
    check it once written; returns the file's text."""
    from galinear._io import atomic_write_text

    text = stamped(key, body)
    atomic_write_text(str(path), text)
    if read_checked(path, key) != body:
        raise RuntimeError(f"{path}: the generated file changed while it was written; "
                           "another process may be writing the same folder")
    return text


def load_generated(kind: str, key: str, source) -> types.ModuleType:
    """The generated module of ``kind`` for ``key``: the file ``<kind>_<digest>.py`` of
    :func:`file_stem` in :func:`generated_folder`, imported as ``galinear_<kind>_<digest>``.

    ``source`` is the module's text (a str: the caller holds it, and the file is used only when its
    body is exactly that text) or a function that makes it (called only when the file is missing or
    fails :func:`read_checked`, so that a process finding the file never builds the source). A file
    that fails is written again (:func:`write_checked`) before anything of it runs. The module is
    compiled from the checked text, the first line included so that line numbers are the file's,
    never from a ``.pyc``, and no ``.pyc`` is written; its ``__file__`` is the file, on which numba
    keys its disk cache. Only the folder's trust (:func:`cache_folder_problem`) lets a file that
    passes the check run, the trust numba's own cache index needs."""
    stem = file_stem(kind, key)
    name = f"galinear_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    path = generated_folder(kind) / f"{stem}.py"
    body = read_checked(path, key)
    if body is None or (isinstance(source, str) and body != source):
        body = source if isinstance(source, str) else source()
        write_checked(path, key, body)
    return _execute(name, path, stamped(key, body))


def _execute(name: str, path: Path, text: str) -> types.ModuleType:
    """The module ``name`` run from ``text`` (never a ``.pyc``), its ``__file__`` ``path``."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    code = compile(text, str(path), "exec", dont_inherit=True)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102  (the text galinear generated, or read and checked)
    except BaseException:
        del sys.modules[name]
        raise
    return module


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
