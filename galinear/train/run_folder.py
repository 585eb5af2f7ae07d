"""The run folder of ``galinear train-mlp`` and ``galinear train-lm``: check, resume, read back.

A run folder holds ``config.json`` (the run's settings), ``history.json`` (what the run recorded)
and ``checkpoint.pt`` (model, optimiser, scheduler and random-number states with the history and
the configuration: a safetensors file with a JSON header, read without unpickling anything,
:mod:`galinear._io`). Every file is written atomically.

One implementation serves both commands; a :class:`RunFormat` holds what differs between them
(the command's name, the keys a checkpoint holds, how a configuration is compared, how a history
is checked):

- :meth:`RunFormat.check_folder`, run before any training: the folder can be written, its files
  are regular readable files, the configuration saved in ``config.json`` and in the checkpoint
  is the one asked for, and the data fingerprints match (a run never resumes a checkpoint of
  another configuration or other data, even when ``config.json`` was deleted);
- :meth:`RunFormat.load_history`: ``history.json``, rewritten from the checkpoint when it is
  missing or damaged;
- :meth:`RunFormat.save`: the checkpoint and ``history.json`` after a finished step or epoch;
- :func:`restore_state`: a checkpoint's states loaded into the model, optimiser and scheduler.

A damaged file is reported with its path and the fix (:class:`galinear._io.CorruptFileError`,
a ValueError), never half-loaded.
"""
from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from galinear import _io

__all__ = ["RunFormat", "restore_state", "check_run_files", "check_same_data", "without_identity",
           "differences", "IDENTITY_FIELDS", "run_folder_name", "make_results_folder", "mean_std"]

#: Fingerprints of what a run learns from (its data, its tokenizer), kept in the configuration's "data" part.
IDENTITY_FIELDS = ("text_sha256", "data_sha256", "tokenizer_sha256")


_SEED_SUFFIX = re.compile(r"-seed(\d+)$")


def run_folder_name(kind: str, seed: int, tag: str = "") -> str:
    """The folder name of one run: ``rotor-seed0``, ``rotor-wide-seed0`` with ``tag`` "wide"."""
    return f"{kind}{'-' + tag if tag else ''}-seed{seed}"


def make_results_folder(root) -> Path:
    """Create the results folder ``root`` (and its parents); ValueError naming the fix when it cannot be."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cannot create the results folder {root} ({error.strerror or error}); choose another --out "
                         "folder you can write to") from None
    return root


def mean_std(values) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value) of ``values``: a report row over seeds."""
    values = list(values)
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _and_list(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def restore_state(state: dict, model, optimizer, scheduler, path, fix: str) -> None:
    """Load a checkpoint's model, optimiser, scheduler and torch RNG states; a checkpoint of
    another model is a CorruptFileError naming ``path`` and ``fix``."""
    import torch

    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
        raise _io.CorruptFileError(path, f"does not fit this run's model ({' '.join(str(error).split())})",
                                   fix) from None
    # load_state_dict takes optimiser moments of any shape; a wrong one would fail at the first step
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            for name, value in optimizer.state.get(parameter, {}).items():
                if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != parameter.shape:
                    raise _io.CorruptFileError(path, f"holds an optimiser {name} of shape {tuple(value.shape)} for a "
                                               f"parameter of shape {tuple(parameter.shape)}", fix)


def _first_nonfinite(tree, where: str):
    """The path (``model/layers.0.weight``) of the first floating-point tensor of ``tree`` (nested dicts
    and lists) that holds a NaN or an infinity, or None."""
    import torch

    if isinstance(tree, torch.Tensor):
        return where if tree.is_floating_point() and not bool(torch.isfinite(tree).all()) else None
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, (list, tuple)) else ()
    for key, value in items:
        found = _first_nonfinite(value, f"{where}/{key}")
        if found is not None:
            return found
    return None


def _check_regular(path: Path, fix: str) -> None:
    if os.path.lexists(path) and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file"
        raise _io.UnreadableFileError(path, f"is {kind}", fix)
    if path.is_file():
        try:
            with open(path, "rb") as handle:
                handle.read(1)
        except OSError as error:
            raise _io.UnreadableFileError(path, f"cannot be read ({error.strerror})", fix) from None


def check_run_files(run_dir, checkpoint_fix: str, command: str) -> None:
    """The run folder exists (or is created) and can be written; ``config.json``, ``history.json``
    and ``checkpoint.pt`` are regular readable files where they exist (not folders). Raises
    UnreadableFileError naming the path and the fix."""
    run_dir = Path(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise _io.UnreadableFileError(run_dir, "is a file, not a run folder", "choose another --out or remove the file") from None
    except OSError as error:
        raise _io.UnreadableFileError(run_dir, f"cannot be created ({error.strerror})",
                                      "choose another --out folder you can write to") from None
    try:
        tempfile.TemporaryFile(dir=run_dir).close()
    except OSError as error:
        raise _io.UnreadableFileError(run_dir, f"cannot be written ({error.strerror})",
                                      "choose another --out folder you can write to, or fix its permissions") from None
    checkpoint = run_dir / "checkpoint.pt"
    _check_regular(run_dir / "config.json", "remove it (the checkpoint keeps the configuration), or choose another "
                                            "--out (or --tag)")
    _check_regular(run_dir / "history.json", f"remove it; the next {command} run rewrites it from {checkpoint}")
    _check_regular(checkpoint, checkpoint_fix)


def check_same_data(run_dir, saved: dict, current: dict, where) -> None:
    """Refuse to resume a run on other data: a fingerprint recorded in ``saved["data"]`` must equal
    the one of ``current["data"]`` (a fingerprint absent from either side is not compared)."""
    old, new = saved.get("data") or {}, current.get("data") or {}
    if not isinstance(old, dict):
        return
    for name in IDENTITY_FIELDS:
        if old.get(name) and new.get(name) and old[name] != new[name]:
            what = {"text_sha256": "text", "data_sha256": "data", "tokenizer_sha256": "tokenizer"}[name]
            raise ValueError(f"{where} was trained on another {what} (SHA-256 {str(old[name])[:16]}... recorded, "
                             f"{new[name][:16]}... now): a resumed run would mix the two; give the {what} it was "
                             f"trained on, or choose another --out (or --tag), or delete the run folder {run_dir} to "
                             "start again")


def without_identity(config: dict) -> dict:
    """``config`` without the data fingerprints (compared by :func:`check_same_data`)."""
    data = config.get("data")
    if not isinstance(data, dict):
        return config
    return {**config, "data": {k: v for k, v in data.items() if k not in IDENTITY_FIELDS}}


def differences(saved: dict, current: dict) -> str:
    """``train.lr 0.007 -> 0.5, ...``: the fields in which two comparable configurations differ."""
    out = []
    for part in sorted(set(saved) | set(current)):
        old, new = saved.get(part), current.get(part)
        if isinstance(old, dict) and isinstance(new, dict):
            out += [f"{part}.{k} {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
                    if old.get(k) != new.get(k)]
        elif old != new:
            out.append(f"{part} {old!r} -> {new!r}")
    return ", ".join(out) or "other fields"


@dataclass(frozen=True)
class RunFormat:
    """What the run folders of one command hold.

    Parameters
    ----------
    command : str
        The command that writes them ("train-mlp"), named in messages.
    config_parts : tuple of str
        The parts (dicts) a run configuration must hold; a "data" part, where present, is a dict.
    checkpoint_keys : tuple of str
        The entries every checkpoint holds.
    comparable : callable
        ``comparable(config) -> dict``: the configuration as a rerun compares it (without the
        settings that change speed only, and without the data fingerprints).
    check_history : callable
        ``check_history(history, path, fix, config=None) -> history``: CorruptFileError naming
        ``path`` and ``fix`` unless ``history`` has the structure the command writes; with a run
        ``config``, also refuses a history longer than that run.
    restart : str
        How the checkpoint's fix says the run starts again ("train this run again from step 0").
    rebuild : str
        How the fix of a damaged history says the run folder goes ("delete the run folder {run_dir}").
    """

    command: str
    config_parts: tuple
    checkpoint_keys: tuple
    comparable: Callable
    check_history: Callable
    restart: str
    rebuild: str = "delete the run folder {run_dir}"

    def checkpoint_fix(self, path) -> str:
        return f"delete {path} to {self.restart}, or restore the file from a backup"

    def rebuild_fix(self, run_dir) -> str:
        return f"{self.rebuild.format(run_dir=run_dir)} and train this run again"

    def save(self, run_dir, model, optimizer, scheduler, history: dict, config: dict) -> None:
        """Write ``checkpoint.pt`` (the model, optimiser, scheduler and torch RNG states with
        ``history`` and ``config``), then ``history.json``, each atomically."""
        import torch

        run_dir = Path(run_dir)
        _io.save_state(run_dir / "checkpoint.pt", {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(), "history": history, "config": config})
        _io.save_json(run_dir / "history.json", history)

    def is_config(self, config) -> bool:
        return (isinstance(config, dict) and all(isinstance(config.get(part), dict) for part in self.config_parts)
                and isinstance(config.get("data", {}), dict))

    def load_checkpoint(self, path: Path) -> dict:
        """The state a checkpoint holds; a damaged or foreign file raises CorruptFileError."""
        state = _io.load_state(path, fix=self.checkpoint_fix(path))
        if not isinstance(state, dict) or any(key not in state for key in self.checkpoint_keys):
            raise _io.CorruptFileError(path, f"not a {self.command} checkpoint ({_and_list(self.checkpoint_keys)} "
                                       "expected)", self.checkpoint_fix(path))
        return state

    def check_folder(self, run_dir, config: dict) -> dict | None:
        """Every check of a run folder that can fail, before any training: raises ValueError naming
        the file and the fix; returns the checkpoint's state (None when there is none yet).

        The folder must be (or become) a writable folder; ``config.json``, ``history.json`` and
        ``checkpoint.pt`` regular readable files where they exist; the configuration saved in
        ``config.json`` and inside the checkpoint must be ``config`` and the data fingerprints
        the same; the checkpoint's history whole, no longer than the run, with an optimiser state and
        finite model and optimiser tensors.
        """
        run_dir = Path(run_dir)
        other = f"choose another --out (or --tag), or delete the run folder {run_dir} to start this run again"
        config_path, checkpoint = run_dir / "config.json", run_dir / "checkpoint.pt"
        fix = self.checkpoint_fix(checkpoint)
        check_run_files(run_dir, fix, self.command)
        current = self.comparable(json.loads(json.dumps(config)))
        if config_path.is_file():
            config_fix = f"delete {config_path} (the checkpoint keeps the configuration)"
            saved = _io.load_json(config_path, fix=config_fix)
            if not self.is_config(saved):
                raise _io.CorruptFileError(config_path, f"not a {self.command} configuration "
                                           f"({_and_list(self.config_parts)} settings expected)", config_fix)
            check_same_data(run_dir, saved, config, config_path)
            if self.comparable(saved) != current:
                raise ValueError(f"{run_dir} holds a run with another configuration "
                                 f"({differences(self.comparable(saved), current)}); {other}")
        if not checkpoint.is_file():
            return None
        state = self.load_checkpoint(checkpoint)
        saved = state.get("config") or (state["history"].get("config") if isinstance(state["history"], dict) else None)
        if not self.is_config(saved):
            raise _io.CorruptFileError(checkpoint, "holds no run configuration", fix)
        check_same_data(run_dir, saved, config, checkpoint)
        if self.comparable(saved) != current:
            raise ValueError(f"{checkpoint} was saved by a run with another configuration "
                             f"({differences(self.comparable(saved), current)}); {other}")
        self.check_history(state["history"], checkpoint, fix, config)
        if not isinstance(state["optimizer"], dict) or not isinstance(state["optimizer"].get("state"), dict):
            raise _io.CorruptFileError(checkpoint, "holds no optimiser state", fix)
        for part in ("model", "optimizer"):
            where = _first_nonfinite(state.get(part), part)
            if where is not None:  # a resumed run would only carry NaN or infinity on
                raise _io.CorruptFileError(checkpoint, f"holds non-finite values (NaN or infinity) in {where}", fix)
        return state

    def collect(self, root, finished, log=None) -> dict[str, dict[int, dict]]:
        """{group: {seed: history}} of every run folder under ``root`` (named ``<group>-seed<k>``)
        whose history passes ``finished(history)``; runs are grouped by their name without the
        ``-seed<k>`` suffix. Histories are read by :meth:`load_history` (``log`` is told of a
        rewritten one); a damaged run folder raises CorruptFileError naming it."""
        groups: dict[str, dict[int, dict]] = {}
        root = Path(root)
        for run_dir in sorted(root.iterdir()) if root.is_dir() else []:
            match = _SEED_SUFFIX.search(run_dir.name)
            if match is None or not run_dir.is_dir():
                continue
            history = self.load_history(run_dir, log)
            if history is None or not finished(history):
                continue
            groups.setdefault(run_dir.name[: match.start()], {})[int(match.group(1))] = history
        return groups

    def load_history(self, run_dir, log=None) -> dict | None:
        """The history of a run folder, or None when it has none yet.

        ``history.json`` is read when it is whole; when it is missing, damaged or unreadable and the
        folder holds a checkpoint, the history saved inside the checkpoint is used and
        ``history.json`` is rewritten from it (``log`` is told). Without a checkpoint a damaged
        ``history.json`` raises :class:`~galinear._io.CorruptFileError` naming the file and the fix.
        """
        run_dir = Path(run_dir)
        path, checkpoint = run_dir / "history.json", run_dir / "checkpoint.pt"
        fix = self.rebuild_fix(run_dir)
        problem = None
        if path.is_file():
            try:
                return self.check_history(_io.load_json(path, fix=fix), path, fix)
            except _io.UnreadableFileError as error:
                problem = error
            except OSError as error:
                problem = _io.UnreadableFileError(path, f"cannot be read ({error.strerror})", fix)
        elif os.path.lexists(path):
            problem = _io.UnreadableFileError(path, "is not a regular file (a folder or a special file)",
                                              f"remove it; the next {self.command} run rewrites it from {checkpoint}"
                                              if checkpoint.is_file() else f"remove it; {fix}")
        _check_regular(checkpoint, self.checkpoint_fix(checkpoint))
        if not checkpoint.is_file():
            if problem is not None:
                raise problem
            return None
        history = self.check_history(self.load_checkpoint(checkpoint)["history"], checkpoint,
                                     self.checkpoint_fix(checkpoint))
        if problem is not None and not path.is_file():
            raise problem  # a folder in the place of history.json is not removed
        _io.save_json(path, history)
        if log is not None:
            log(f"{path}: {'missing' if problem is None else problem.reason}; rewritten from {checkpoint}")
        return history
