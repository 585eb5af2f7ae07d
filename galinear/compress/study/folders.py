"""One study per folder: the output folder (``out_dir``, ``--out``) and the ``--save`` folder each
hold the results or models of one study, recorded in their ``study.json``.

A study is named by its settings that change a result: every :class:`~galinear.compress.study.config.StudyConfig`
field except those saying where files go and how the work runs (:data:`NOT_RESULTS`). The record
holds those settings, a 16-hex-digit name of them (``study``) and the cache key of the model,
tokenizer and texts the study ran on (``cache_key``, :func:`galinear.compress.storage.store.fingerprint`).

- :func:`check`, before anything loads: a folder whose record names other settings and that holds
  results (``out_dir``) or models (``save_dir``) is refused, with the settings that differ, unless
  ``overwrite`` is set. The same settings resume the study as before.
- :func:`claim`, once the model is loaded and before any result is read: with ``overwrite`` the
  other study's results and models are removed (the cache of fits stays: it is keyed by content,
  so matching fits are reused); a ``save_dir`` whose models came from another model content
  (same settings, another cache key) is refused; then the record is written.

A folder with results but no record (written before studies were recorded) is taken as this
study's, as before. Settings added to StudyConfig later compare at their default value, so a
study recorded by an older galinear resumes.
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import shutil

from galinear import _io
from galinear.compress.storage.folder_format import CONFIG, INDEX
from galinear.compress.storage.store import MODELS

RECORD = "study.json"
FORMAT = 1
#: StudyConfig fields that change no result: where files go and how the work is run.
NOT_RESULTS = ("out_dir", "cache_dir", "save_dir", "threads", "progress", "verbose", "save_models", "shard_windows",
               "overwrite")
#: Files a study writes into its output folder (besides its model folders under ``models/``), removed by ``overwrite``.
OUTPUTS = ("results.json", "results-rank*.json", "summary.json", "results.md", "logppl_vs_params.png",
           "learning_curves.json", "learning_curves.png", os.path.join(MODELS, INDEX))
#: Largest study.json read (a record is a few kB).
_MAX_RECORD_BYTES = 1 << 20


def _plain(value):
    """``value`` as JSON gives it back (tuples become lists), for comparing with a record."""
    return json.loads(json.dumps(value, default=str))


def _where(path):
    """A local path as an absolute one (the same study run from another directory), else as given."""
    return os.path.abspath(path) if isinstance(path, str) and os.path.exists(path) else path


def settings(config) -> dict:
    """The settings of ``config`` that change a result, as plain JSON values (local paths absolute)."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in NOT_RESULTS}
    values["model"] = _where(values.get("model"))
    values["text_files"] = [(name, _where(path)) for name, path in values.get("text_files") or ()]
    return _plain(values)


def study_name(values: dict) -> str:
    """16 hex digits naming a study's settings (:func:`settings`)."""
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def _differences(recorded: dict, config) -> list:
    """'name X there, Y here' for every setting of ``config`` that differs from ``recorded`` (a
    setting missing on one side counts at its StudyConfig default)."""
    now = settings(config)
    defaults = {f.name: _plain(f.default) for f in dataclasses.fields(config)
                if f.default is not dataclasses.MISSING}
    out = []
    for name in sorted(set(recorded) | set(now)):
        if name in NOT_RESULTS:
            continue
        there, here = recorded.get(name, defaults.get(name)), now.get(name, defaults.get(name))
        if there != here:
            out.append(f"{name} {json.dumps(there)} there, {json.dumps(here)} here")
    return out


def _folders(config) -> list:
    """(option, folder, what it holds) of every folder ``config`` writes results or models into."""
    folders = [("--out", config.out_dir, _results)]
    if config.save_dir:
        folders.append(("--save", config.save_dir, _models))
    return folders


def _results(folder: str) -> list:
    """The result files of a study in ``folder`` (results.json with entries, the ranks' files, the
    compressed-model folders under models/)."""
    found = sorted(glob.glob(os.path.join(folder, "results-rank*.json")) + _models(os.path.join(folder, MODELS)))
    path = os.path.join(folder, "results.json")
    if os.path.isfile(path):
        try:
            entries = _io.load_json(path).get("entries")
        except (ValueError, AttributeError):
            entries = True  # a damaged file still counts as a study's
        if entries:
            found.insert(0, path)
    return found


def _models(folder: str) -> list:
    """The kept-model folders under ``folder`` (those holding galinear_compressed.json)."""
    return sorted(p for p in glob.glob(os.path.join(folder, "*")) if os.path.isfile(os.path.join(p, CONFIG)))


def _read(option: str, folder: str):
    """The record of ``folder`` (None when it has none); a damaged one is refused with the fix."""
    path = os.path.join(folder, RECORD)
    if not os.path.exists(path):
        return None
    fix = f"remove it, or pass --overwrite to let this study replace what {option} {folder} holds"
    record = _io.load_json(path, fix=fix, max_bytes=_MAX_RECORD_BYTES)
    if not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
        raise _io.CorruptFileError(f"{path} is not a study record (no settings in it); {fix}")
    return record


def check(config) -> None:
    """Refuse (ValueError) a folder of ``config`` that holds another study's results or models,
    unless ``config.overwrite``; nothing is read but the folders' records and file names."""
    if config.overwrite:
        return
    for option, folder, held in _folders(config):
        record = _read(option, folder)
        if record is None or not held(folder):
            continue
        changed = _differences(record["settings"], config)
        if changed:
            what = "results" if option == "--out" else "compressed models"
            raise ValueError(f"{option} {folder} holds the {what} of another study (study {record.get('study')}: "
                             f"{'; '.join(changed[:4])}{'; ...' if len(changed) > 4 else ''}); give another "
                             f"{option} folder, or --overwrite to replace them with this study's")


def claim(config, cache_key: str, log) -> None:
    """Make the folders of ``config`` this study's (module docstring): remove another study's results
    and models (``overwrite``), refuse a ``save_dir`` of another model content, write the records."""
    check(config)
    values = settings(config)
    for option, folder, held in _folders(config):
        try:
            record = _read(option, folder)
        except ValueError:
            if not config.overwrite:
                raise
            record = None  # a damaged record is replaced
        same = record is not None and not _differences(record["settings"], config)
        same_content = same and record.get("cache_key") in (None, str(cache_key))
        if option == "--save" and same and not same_content and held(folder) and not config.overwrite:
            raise ValueError(f"--save {folder} holds compressed models of the same settings made from another model, "
                             f"tokenizer or texts (cache key {record.get('cache_key')} there, {cache_key} here); give "
                             "another --save folder, or --overwrite to replace them")
        if config.overwrite and not same_content:
            removed = _clear(folder, held)
            if removed:
                log(f"--overwrite: removed {len(removed)} file(s) or folder(s) of another study from {folder} "
                    "(the cache of fits is kept)")
        elif record is None and held(folder):
            log(f"{option} {folder} holds results or models written before galinear recorded its studies: they are "
                "taken as this study's")
        os.makedirs(folder, exist_ok=True)
        _io.save_json(os.path.join(folder, RECORD), {"format": FORMAT, "study": study_name(values),
                                                     "cache_key": str(cache_key), "settings": values})


def _clear(folder: str, held) -> list:
    """Remove what a study wrote into ``folder``: its results and reports, or its model folders."""
    removed = held(folder)
    if held is _results:
        removed = sorted(set(removed) | {p for pattern in OUTPUTS for p in glob.glob(os.path.join(folder, pattern))})
    else:
        removed += [p for p in (os.path.join(folder, INDEX),) if os.path.isfile(p)]
    for path in removed:
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    return removed


__all__ = ["RECORD", "NOT_RESULTS", "settings", "study_name", "check", "claim"]
