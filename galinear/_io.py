"""Atomic writes, and loaders that never run code found in a data file.

Every file galinear writes (checkpoints, caches, results, reports, generated kernels) goes
through :func:`atomic_write`: the content is written to a temporary file in the destination
folder, flushed to disk (``fsync``) and moved onto its name with ``os.replace``. A crash, a
``kill -9`` or Ctrl-C at any moment leaves the old file or the new one, never a half-written one,
and removes the temporary file whenever Python still runs.

Two formats, neither of which can carry code:

- JSON (:func:`save_json`, :func:`load_json`) for configurations, histories and results;
- state files (:func:`save_state`, :func:`load_state`) for checkpoints and caches: one
  `safetensors <https://huggingface.co/docs/safetensors>`_ file. A state is a nested structure
  of dicts, lists, tuples, numbers, strings, None, torch tensors and numpy arrays; its tensors
  are stored as raw safetensors data and everything else as JSON in the file header. Loading
  parses JSON and raw numbers only.

Caches (:func:`load_cache`) are read as state files only: a pickle there is removed unread.
:func:`load_state` reads a ``torch.save`` pickle (a training checkpoint in the 0.x format, a
compressed-model file of format v1) only through PyTorch's restricted loader
``torch.load(weights_only=True)`` (tensors and plain containers, no arbitrary objects) and only
with torch >= 2.6, whose restricted loader has no known escape; any other pickle is refused with
:class:`PickleRefusedError`, never unpickled.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import sys

__all__ = [
    "UnreadableFileError", "CorruptFileError", "PickleRefusedError",
    "atomic_write", "atomic_write_text", "atomic_folder", "save_json", "load_json", "parse_json", "read_regular_file",
    "save_state", "load_state", "load_cache", "STATE_FORMAT",
]

STATE_FORMAT = "galinear-state-v1"
_TENSOR, _ARRAY, _TUPLE, _DICT = "$tensor", "$ndarray", "$tuple", "$dict"


class UnreadableFileError(ValueError):
    """A file galinear wrote cannot be read back; the message names the file and what to do."""

    def __init__(self, path, reason: str, fix: str = ""):
        self.path = os.fspath(path)
        self.reason = reason
        self.fix = fix
        super().__init__(f"{self.path}: {reason}" + (f"; {fix}" if fix else ""))


class CorruptFileError(UnreadableFileError):
    """The file is truncated, damaged or not a galinear file."""


class PickleRefusedError(UnreadableFileError):
    """The file is a pickle that cannot be read without the risk of running code from it: it is
    refused, never unpickled."""


# ---------------------------------------------------------------------------------------- writing
def _temporary_name(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _fsync_folder(folder: str) -> None:
    """Make a rename durable (POSIX); silently skipped where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path, writer) -> None:
    """Create or replace ``path`` through ``writer(temporary_path)``, atomically.

    ``writer`` writes the whole content to the temporary path it is given (a new empty file in
    the same folder as ``path``). The file is then flushed to disk and renamed onto ``path``.
    On any exception, KeyboardInterrupt included, the temporary file is removed and ``path`` is
    left as it was.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = _temporary_name(path)
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # honours the umask
        writer(tmp)
        fd = os.open(tmp, os.O_RDWR)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    _fsync_folder(folder)


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)

    atomic_write(path, write)


@contextlib.contextmanager
def atomic_folder(target):
    """Fill a temporary folder next to ``target``; on success it replaces ``target``.

    ``with atomic_folder(target) as tmp: write files into tmp``. On an exception the temporary
    folder is removed and ``target`` is untouched. An existing ``target`` is removed just before
    the rename, so a crash in that instant leaves no ``target`` (a cache is then rebuilt) rather
    than a half-written one.
    """
    target = os.fspath(target)
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    tmp = _temporary_name(target)
    os.mkdir(tmp)
    try:
        yield tmp
        if os.path.exists(target):
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    _fsync_folder(parent)


def save_json(path, payload, **dump_options) -> None:
    """Write ``payload`` as JSON (indent 1 unless given) to ``path`` atomically."""
    dump_options.setdefault("indent", 1)
    atomic_write_text(path, json.dumps(payload, **dump_options))


def read_regular_file(path, max_bytes: int | None = None, fix: str = "") -> bytes:
    """The bytes of ``path``, which must be a regular file (symlinks followed) of at most ``max_bytes``.

    The file is opened without blocking and checked through its open descriptor before anything
    is read: a FIFO (which would wait for a writer forever), a device such as /dev/zero (endless),
    a folder or a file over ``max_bytes`` raises :class:`UnreadableFileError` naming it.
    """
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise UnreadableFileError(path, "is a folder, not a file", fix) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode)
                    else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "a socket"
                    if stat.S_ISSOCK(info.st_mode) else "not a regular file")
            raise UnreadableFileError(path, f"is {kind}, not a regular file", fix)
        if max_bytes is not None and info.st_size > max_bytes:
            raise UnreadableFileError(path, f"holds {info.st_size:,} bytes, more than the {max_bytes:,} such a file "
                                      "can hold", fix)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    finally:
        os.close(fd)


#: Deepest nesting of brackets a JSON document galinear reads may have: the files galinear writes nest a
#: few levels, and Python's JSON reader recurses once per level (a deep enough file would exhaust the stack).
MAX_JSON_DEPTH = 200
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in the JSON ``text`` (brackets inside strings not counted)."""
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_json(text, where, fix: str = "", hint: str = "the file is damaged or truncated"):
    """The value of the JSON document ``text`` (str or UTF-8 bytes), read by every JSON and JSON Lines
    loader of galinear; ``where`` (a path, or a path and line) names it in errors.

    A document that is not JSON (``hint`` says why that may be), or nests brackets deeper than
    :data:`MAX_JSON_DEPTH`, raises :class:`CorruptFileError` naming ``where`` with ``fix``, before
    Python's reader could run out of stack.
    """
    try:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")
        if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _json_depth(text) > MAX_JSON_DEPTH:
            raise CorruptFileError(where, f"nests brackets more than {MAX_JSON_DEPTH} deep, which no galinear file "
                                   "does; it is damaged or not the file expected", fix)
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptFileError(where, f"not valid JSON ({error})" + (f"; {hint}" if hint else ""), fix) from None
    except RecursionError:  # a nesting under the limit that still exhausts a small stack
        raise CorruptFileError(where, "nests brackets too deep to read; it is damaged or not the file expected",
                               fix) from None


def load_json(path, fix: str = "", max_bytes: int | None = None):
    """Parse the JSON file ``path``; a damaged file raises :class:`CorruptFileError` naming it.

    With ``max_bytes`` the file must be a regular file of at most that size
    (:func:`read_regular_file`), checked before it is read.
    """
    if max_bytes is None:
        with open(path, "rb") as handle:
            raw = handle.read()
    else:
        raw = read_regular_file(path, max_bytes, fix)
    return parse_json(raw, path, fix)


# ---------------------------------------------------------------------------------------- packing
def _pack(obj, where: str, tensors: dict):
    """JSON-able image of ``obj`` with tensors and arrays moved into ``tensors``."""
    import numpy as np

    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, float)):
        return obj if type(obj) in (int, float) else (int(obj) if isinstance(obj, int) else float(obj))
    if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
        return obj.item()
    if isinstance(obj, np.ndarray):
        import torch

        return {_ARRAY: _store(torch.from_numpy(np.ascontiguousarray(obj)), where, tensors)}
    if _is_tensor(obj):
        return {_TENSOR: _store(obj, where, tensors)}
    if isinstance(obj, tuple):
        return {_TUPLE: [_pack(v, f"{where}/{i}", tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_pack(v, f"{where}/{i}", tensors) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: _pack(v, f"{where}/{k}", tensors) for k, v in obj.items()}
        return {_DICT: [[_pack(k, f"{where}/key{i}", tensors), _pack(v, f"{where}/{k}", tensors)]
                        for i, (k, v) in enumerate(obj.items())]}
    raise TypeError(f"cannot store a {type(obj).__name__} at {where or '/'} in a state file; "
                    "use tensors, arrays, numbers, strings, None, lists, tuples and dicts")


def _is_tensor(obj) -> bool:
    torch = _torch_if_loaded()
    return torch is not None and isinstance(obj, torch.Tensor)


def _torch_if_loaded():
    import sys

    return sys.modules.get("torch")


def _store(tensor, where: str, tensors: dict) -> str:
    tensor = tensor.detach().cpu()
    if tensor.layout is not _torch_if_loaded().strided:
        raise TypeError(f"cannot store the {tensor.layout} tensor at {where} in a state file; make it dense first")
    name = where.lstrip("/") or "tensor"
    while name in tensors:
        name += "+"
    tensors[name] = tensor.contiguous()
    return name


def _unpack(obj, tensors: dict):
    if isinstance(obj, list):
        return [_unpack(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if len(obj) == 1:
            (key, value), = obj.items()
            if key == _TENSOR:
                return tensors[value]
            if key == _ARRAY:
                return tensors[value].numpy()
            if key == _TUPLE:
                return tuple(_unpack(v, tensors) for v in value)
            if key == _DICT:
                return {_hashable(_unpack(k, tensors)): _unpack(v, tensors) for k, v in value}
        if any(k.startswith("$") for k in obj):
            raise ValueError(f"unknown entry {sorted(obj)}")
        return {k: _unpack(v, tensors) for k, v in obj.items()}
    return obj


def _hashable(key):
    if isinstance(key, list):
        raise ValueError("a list cannot be a dict key")
    return key


def _unshared(tensors: dict) -> dict:
    """Copies of tensors that share memory with an earlier one (safetensors stores each once)."""
    seen, out = set(), {}
    for name, tensor in tensors.items():
        pointer = (tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
        if tensor.numel() and pointer in seen:
            tensor = tensor.clone()
        elif tensor.numel():
            seen.add(pointer)
        out[name] = tensor
    return out


# ---------------------------------------------------------------------------------------- states
def save_state(path, state) -> None:
    """Write ``state`` (nested dicts/lists/tuples of tensors, arrays and JSON values) atomically.

    The file is a safetensors file: tensors as raw data, the rest of the structure as JSON in its
    header under ``"galinear"``. Read it back with :func:`load_state`.
    """
    import torch  # noqa: F401  (tensors are recognised once torch is imported)

    save_file = _safetensors().torch.save_file

    tensors: dict = {}
    tree = _pack(state, "", tensors)
    header = {"format": STATE_FORMAT, "galinear": json.dumps(tree, allow_nan=True)}
    tensors = _unshared(tensors)
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=header))


def _safetensors():
    try:
        import safetensors
        import safetensors.torch
    except ImportError:
        raise ImportError("galinear stores checkpoints and caches with the safetensors package, which is "
                          "missing; install it with `pip install safetensors` (or reinstall galinear)") from None
    return safetensors


def _kind(path) -> str:
    with open(path, "rb") as handle:
        head = handle.read(16)
    if head.startswith(b"PK\x03\x04"):
        return "torch-zip"
    if head[8:9] == b"{":  # an 8-byte header length, then the JSON header
        return "safetensors"
    if head[:1] == b"\x80":  # a raw pickle, protocol 2 or later (torch.save without its zip container)
        return "pickle"
    return "safetensors"  # anything else is reported as damaged by the safetensors reader


def load_state(path, fix: str = "", *, pickles: bool = True):
    """Read a file written by :func:`save_state` (or, with ``pickles``, a ``torch.save`` pickle of
    tensors and plain containers, through the restricted loader, torch >= 2.6).

    With ``pickles=False`` a pickle is refused as :class:`CorruptFileError` without being read
    by any loader, the restricted one included.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    CorruptFileError
        The file is truncated, damaged or not a galinear state; ``fix`` (what to do) ends the message.
    PickleRefusedError
        A pickle that holds more than tensors and plain containers (or any pickle under
        torch < 2.6): it is refused, never unpickled.
    """
    kind = _kind(path)
    if kind != "safetensors" and not pickles:
        raise CorruptFileError(path, "a pickle, not a safetensors state file; it is not read", fix)
    if kind != "safetensors":
        return _load_pickle(path, fix)
    SafetensorError, safe_open = _safetensors().SafetensorError, _safetensors().safe_open

    try:
        with safe_open(os.fspath(path), framework="pt", device="cpu") as handle:
            header = handle.metadata() or {}
            # copies, not views of the file mapping: a later change to the file cannot touch them
            tensors = {name: handle.get_tensor(name).clone() for name in handle.keys()}
    except (SafetensorError, OSError, RuntimeError) as error:
        raise CorruptFileError(path, f"damaged or truncated ({error})", fix) from None
    if header.get("format") != STATE_FORMAT or "galinear" not in header:
        raise CorruptFileError(path, f"not a galinear state file (format {header.get('format')!r})", fix)
    tree = parse_json(header["galinear"], path, fix)
    try:
        return _unpack(tree, tensors)
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise CorruptFileError(path, f"damaged state structure ({error})", fix) from None


def load_cache(path):
    """What the state file ``path`` holds (:func:`load_state`), or None when there is none to use.

    A cache that cannot be read (truncated, damaged, or not a safetensors file: a pickle is
    never read, not even by the restricted loader) is removed with a message on stderr and None
    is returned, so the caller computes its content again.
    """
    if not os.path.exists(path):
        return None
    try:
        return load_state(path, pickles=False)
    except UnreadableFileError as error:
        print(f"galinear: {error}; removing it and recomputing this unit", file=sys.stderr, flush=True)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return None


def _load_pickle(path, fix: str):
    import pickle
    import warnings

    import torch

    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 6):
        raise PickleRefusedError(
            path, f"a pickle; with torch {torch.__version__} (< 2.6) it cannot be "
            "read without the risk of running code from it, so it is refused", fix)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # notes about pickle protocols: the outcome is what matters
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise PickleRefusedError(
            path, "a pickle that holds objects other than tensors and plain "
            "containers; it is refused because unpickling it could run code", fix) from None
    except Exception as error:  # noqa: BLE001  (a damaged zip or pickle: torch raises many kinds)
        first = str(error).split(". ")[0].strip() or type(error).__name__
        raise CorruptFileError(path, f"damaged or truncated ({first})", fix) from None
