"""A study's checkpoints and caches on disk: written atomically, read back by a rerun.

Each is a safetensors file with a JSON header (:mod:`galinear._io`): nested dicts and lists of
tensors and JSON values. Loading one never unpickles anything; a killed run leaves a file whole or
absent; a damaged cache is removed and recomputed. The :class:`galinear.compress.storage.store.Store`
names the files.
"""
from __future__ import annotations

import os

from galinear import _io


def atomic_save(obj, path: str) -> None:
    """Save ``obj`` (nested dicts/lists of tensors and JSON values) to ``path`` atomically."""
    _io.save_state(path, obj)


def load(path: str, *, recompute: bool = True):
    """Load a file written by :func:`atomic_save`, or None when it does not exist.

    A cache that cannot be read (truncated, damaged, or not a safetensors file: a pickle is never
    read) is removed with a message on stderr and None is returned, so the caller recomputes that
    unit. With ``recompute=False`` such a file raises :class:`galinear._io.UnreadableFileError`
    instead (for files that cannot be recomputed).
    """
    if recompute:
        return _io.load_cache(path)
    if not os.path.exists(path):
        return None
    return _io.load_state(path, fix="delete it and rerun the command that wrote it", pickles=False)


def cached(path: str, make):
    """What ``path`` holds (:func:`load`), or else ``make()``, saved there atomically first: a
    killed run leaves the file whole or absent, and a rerun reads it instead of computing it."""
    value = load(path)
    if value is None:
        value = make()
        atomic_save(value, path)
    return value


__all__ = ["atomic_save", "cached", "load"]
