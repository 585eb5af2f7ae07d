"""Supervised training of a classifier with per-epoch, atomic, resumable checkpoints.

One run = one model, one seed. Its folder holds

- ``config.json``: the architecture and the optimiser settings (a rerun checks they match);
- ``history.json``: one record per finished epoch (train loss, test loss, test accuracy,
  wall-clock seconds of the epoch's training and evaluation);
- ``checkpoint.pt``: model, optimiser, scheduler and random-number states, the history and the
  configuration after the last finished epoch, as a safetensors file (tensors) with a JSON header (everything else); it is
  read without unpickling anything (:mod:`galinear._io`).

Every file is written to a temporary file and moved into place with ``os.replace``, so a run
killed at any moment resumes from its last finished epoch with the same result it would have had.
A damaged checkpoint is reported with its path and what to do, never half-loaded; a damaged or
deleted ``history.json`` is rewritten from the checkpoint; a checkpoint of another configuration
is refused even when ``config.json`` is gone (:func:`check_run_folder`, run before any training).
Shuffling uses a generator seeded by (seed, epoch), so a resumed run sees the same batches.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from galinear import _io
from galinear._util import cosine_schedule
from galinear.train.config import MLPConfig, TrainConfig
from galinear.train.models import build_mlp, check_training_memory, count_parameters

__all__ = ["TrainConfig", "train_classifier", "load_history", "check_run_folder", "check_run_files", "check_same_data",
           "data_sha256", "atomic_write_json", "evaluate"]


def data_sha256(tensors) -> str:
    """SHA-256 of the bytes of ``tensors`` (shapes and dtypes included): the fingerprint of a run's data."""
    import hashlib

    digest = hashlib.sha256()
    for tensor in tensors:
        array = tensor.detach().cpu().contiguous().numpy()
        digest.update(f"{array.dtype.str}{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def atomic_write_json(path, payload) -> None:
    """Write JSON to ``path`` through a temporary file and ``os.replace`` (never half-written)."""
    _io.save_json(path, payload)


_CHECKPOINT_KEYS = ("model", "optimizer", "scheduler", "torch_rng", "history")


def restore_state(state: dict, model, optimizer, scheduler, path, fix: str) -> None:
    """Load a checkpoint's model, optimiser, scheduler and torch RNG states; a checkpoint of
    another model is a CorruptFileError naming ``path`` and ``fix``."""
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


def _checkpoint_fix(path: Path) -> str:
    return (f"delete {path} to retrain this run from its first epoch (its config.json may stay), "
            "or restore the file from a backup")


def _load_checkpoint(path: Path) -> dict:
    """The state saved after the last finished epoch; a damaged or foreign file raises ValueError."""
    state = _io.load_state(path, fix=_checkpoint_fix(path))
    if not isinstance(state, dict) or any(key not in state for key in _CHECKPOINT_KEYS):
        raise _io.CorruptFileError(path, "not a train-mlp checkpoint (model, optimizer, scheduler, torch_rng "
                                   "and history expected)", _checkpoint_fix(path))
    return state


def _rebuild_fix(run_dir: Path) -> str:
    return f"delete the run folder {run_dir} and train this run again"


def _check_history(history, path) -> dict:
    """``history`` if it has the structure train-mlp writes, else CorruptFileError naming ``path``."""
    def fields(record, names, kinds):
        return isinstance(record, dict) and all(isinstance(record.get(n), kinds) and not isinstance(record.get(n), bool)
                                                for n in names)

    config = history.get("config") if isinstance(history, dict) else None
    good = (isinstance(history, dict) and isinstance(history.get("epochs"), list)
            and fields(history, ("parameters",), int) and isinstance(config, dict)
            and fields(config.get("model"), ("hidden", "depth"), int) and isinstance(config["model"].get("kind"), str)
            and fields(config.get("train"), ("epochs", "batch_size"), int)
            and fields(config["train"], ("lr",), (int, float))
            and all(fields(e, ("train_loss", "test_loss", "test_accuracy", "seconds"), (int, float))
                    for e in history["epochs"]))
    if not good:
        raise _io.CorruptFileError(path, "not a train-mlp history (config, parameters and per-epoch records "
                                   "expected)", _rebuild_fix(Path(path).parent))
    return history


def load_history(run_dir, log=None) -> dict | None:
    """The history of a run folder, or None when it has none yet.

    ``history.json`` is read when it is whole; when it is missing, damaged or unreadable and the
    folder holds a checkpoint, the history saved inside the checkpoint is used and
    ``history.json`` is rewritten from it (``log`` is told). Without a checkpoint a damaged
    ``history.json`` raises :class:`~galinear._io.CorruptFileError` naming the file and the fix.
    """
    run_dir = Path(run_dir)
    path, checkpoint = run_dir / "history.json", run_dir / "checkpoint.pt"
    problem = None
    if path.is_file():
        try:
            return _check_history(_io.load_json(path, fix=_rebuild_fix(run_dir)), path)
        except _io.UnreadableFileError as error:
            problem = error
        except OSError as error:
            problem = _io.UnreadableFileError(path, f"cannot be read ({error.strerror})", _rebuild_fix(run_dir))
    elif os.path.lexists(path):
        problem = _io.UnreadableFileError(path, "is not a regular file (a folder or a special file)",
                                          f"remove it; the next train-mlp run rewrites it from {checkpoint}")
    if not os.path.lexists(checkpoint):
        if problem is not None:
            raise problem
        return None
    history = _check_history(_load_checkpoint(checkpoint)["history"], checkpoint)
    if problem is not None and not path.is_file():
        raise problem  # a folder in the place of history.json is not removed
    atomic_write_json(path, history)
    if log is not None:
        log(f"{path}: {'missing' if problem is None else problem.reason}; rewritten from {checkpoint}")
    return history


def _differences(saved: dict, current: dict) -> str:
    """``train.lr 0.007 -> 0.5, ...``: the fields in which two comparable configurations differ."""
    out = []
    for part in ("model", "train"):
        old, new = saved.get(part, {}), current.get(part, {})
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                out.append(f"{part}.{name} {old.get(name)!r} -> {new.get(name)!r}")
    return ", ".join(out) or "other fields"


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
    import tempfile

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
    _check_regular(run_dir / "config.json", f"remove it (the checkpoint keeps the configuration), or choose another "
                                            f"--out (or --tag)")
    _check_regular(run_dir / "history.json", f"remove it; the next {command} run rewrites it from {checkpoint}")
    _check_regular(checkpoint, checkpoint_fix)


#: Fingerprints of what a run learns from (its data, its tokenizer), kept in the configuration's "data" part.
IDENTITY_FIELDS = ("text_sha256", "data_sha256", "tokenizer_sha256")


def check_same_data(run_dir, saved: dict, current: dict, where) -> None:
    """Refuse to resume a run on other data: a fingerprint recorded in ``saved["data"]`` must equal
    the one of ``current["data"]`` (a fingerprint absent from either side is not compared: runs
    saved before fingerprints were recorded)."""
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


def check_run_folder(run_dir, config: dict) -> dict | None:
    """Every check of a run folder that can fail, before any training: raises ValueError naming
    the file and the fix; returns the checkpoint's state (None when there is none yet).

    The folder must be (or become) a writable folder; ``config.json``, ``history.json`` and
    ``checkpoint.pt`` regular readable files where they exist; the configuration saved in
    ``config.json`` and inside the checkpoint must be ``config`` (a run never resumes a
    checkpoint of another configuration, even when ``config.json`` was deleted).
    """
    run_dir = Path(run_dir)
    other = f"choose another --out (or --tag), or delete the run folder {run_dir} to start this run again"
    config_path, checkpoint = run_dir / "config.json", run_dir / "checkpoint.pt"
    check_run_files(run_dir, _checkpoint_fix(checkpoint), "train-mlp")
    current = _comparable(json.loads(json.dumps(config)))
    if config_path.is_file():
        saved = _io.load_json(config_path, fix=f"delete {config_path} (the checkpoint keeps the configuration)")
        if not _is_mlp_config(saved):
            raise _io.CorruptFileError(config_path, "not a train-mlp configuration (model and train settings "
                                       "expected)", f"delete {config_path} (the checkpoint keeps the configuration)")
        check_same_data(run_dir, saved, config, config_path)
        if _comparable(saved) != current:
            raise ValueError(f"{run_dir} holds a run with another configuration "
                             f"({_differences(_comparable(saved), current)}); {other}")
    if not checkpoint.is_file():
        return None
    state = _load_checkpoint(checkpoint)
    saved = state.get("config") or (state["history"].get("config") if isinstance(state["history"], dict) else None)
    if not _is_mlp_config(saved):
        raise _io.CorruptFileError(checkpoint, "holds no run configuration", _checkpoint_fix(checkpoint))
    check_same_data(run_dir, saved, config, checkpoint)
    if _comparable(saved) != current:
        raise ValueError(f"{checkpoint} was saved by a run with another configuration "
                         f"({_differences(_comparable(saved), current)}); {other}")
    history = _check_history(state["history"], checkpoint)
    epochs = config["train"]["epochs"] if isinstance(config.get("train"), dict) else None
    if isinstance(epochs, int) and len(history["epochs"]) > epochs:
        raise _io.CorruptFileError(checkpoint, f"records {len(history['epochs'])} finished epochs of a run of {epochs}",
                                   _checkpoint_fix(checkpoint))
    return state


def _is_mlp_config(config) -> bool:
    return (isinstance(config, dict) and isinstance(config.get("model"), dict) and isinstance(config.get("train"), dict)
            and isinstance(config.get("data", {}), dict))


# MLPConfig fields added after runs were first saved, with the value the code before them used
_ADDED_MODEL_FIELDS = {"rotor_init_std": None, "dropout": 0.0, "rotor_gradient": "exact"}


def _comparable(config: dict) -> dict:
    """The run configuration as a rerun compares it: without the sandwich backend (it changes
    speed, not results).

    Fields missing from a saved configuration (added to MLPConfig/TrainConfig after that run
    was written) take the values that reproduce the behaviour of the older code.
    """
    model = {**asdict(MLPConfig()), **_ADDED_MODEL_FIELDS, **config.get("model", {})}
    model.pop("backend", None)
    train = {**asdict(TrainConfig()), **config.get("train", {})}
    out = without_identity({**config, "model": model, "train": train})
    out.pop("data", None)  # the data set's name is the run folder's parent; its fingerprint is compared on its own
    return out


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 2000) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on (x, y)."""
    model.eval()
    loss_sum, correct = 0.0, 0
    for start in range(0, x.shape[0], batch_size):
        logits = model(x[start:start + batch_size])
        target = y[start:start + batch_size]
        loss_sum += nn.functional.cross_entropy(logits, target, reduction="sum").item()
        correct += (logits.argmax(dim=1) == target).sum().item()
    model.train()
    return loss_sum / x.shape[0], correct / x.shape[0]


def _check_finite(model: nn.Module, epoch: int, step: int) -> None:
    for name, parameter in model.named_parameters():
        if not torch.isfinite(parameter).all():
            raise FloatingPointError(
                f"parameter {name} became non-finite at epoch {epoch + 1}, step {step}; lower the "
                "learning rate (--lr) or enable --layer-norm"
            )


def train_classifier(
    model_config: MLPConfig,
    train_config: TrainConfig,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    run_dir=None,
    progress: bool = True,
    description: str = "",
    log=print,
    data_identity: dict | None = None,
) -> dict:
    """Train the MLP of ``model_config`` on ``data`` and return its history.

    Parameters
    ----------
    model_config, train_config : MLPConfig, TrainConfig
    data : (x_train, y_train, x_test, y_test)
        Float inputs (N, features) and int64 labels.
    run_dir : path, optional
        Where config, history and checkpoint live; when it holds a checkpoint of the same
        configuration, training resumes after its last finished epoch. None: nothing is saved.
    progress : bool
        Show a tqdm bar over the batches of each epoch.
    data_identity : dict, optional
        ``{"name": ..., "data_sha256": ...}`` of the data (:func:`data_sha256`), recorded in the
        configuration: a run never resumes on other data.

    Returns
    -------
    dict
        ``{"config": ..., "parameters": int, "epochs": [{"epoch", "train_loss", "test_loss",
        "test_accuracy", "seconds"}, ...]}``
    """
    model_config.validate()
    train_config.validate()
    x_train, y_train, x_test, y_test = data
    if x_train.shape[0] != y_train.shape[0] or x_test.shape[0] != y_test.shape[0]:
        raise ValueError("inputs and labels differ in length; pass (x_train, y_train, x_test, y_test)")
    for split, labels in (("training", y_train), ("test", y_test)):
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= model_config.num_classes):
            raise ValueError(f"the {split} labels run from {int(labels.min())} to {int(labels.max())}, but the model "
                             f"has num_classes={model_config.num_classes} outputs (labels 0..{model_config.num_classes - 1})")

    check_training_memory(model_config, train_config.batch_size, train_config.eval_batch_size)
    torch.manual_seed(train_config.seed)
    model = build_mlp(model_config)
    parameters = count_parameters(model)
    config = {"model": model_config.to_dict(), "train": asdict(train_config)}
    if data_identity:
        config["data"] = dict(data_identity)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_config.lr, weight_decay=train_config.weight_decay)
    steps_per_epoch = math.ceil(x_train.shape[0] / train_config.batch_size)
    total_steps = steps_per_epoch * train_config.epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: cosine_schedule(step, total_steps, train_config.warmup_steps)
    )
    history = {"config": config, "parameters": parameters, "epochs": []}

    checkpoint_path = None
    if run_dir is not None:
        run_dir = Path(run_dir)
        state = check_run_folder(run_dir, config)
        checkpoint_path = run_dir / "checkpoint.pt"
        if not (run_dir / "config.json").is_file():
            atomic_write_json(run_dir / "config.json", config)
        if state is not None:
            restore_state(state, model, optimizer, scheduler, checkpoint_path, _checkpoint_fix(checkpoint_path))
            history = state["history"]
            atomic_write_json(run_dir / "history.json", history)  # whole again, if it was damaged or deleted
            log(f"{description}: resuming after epoch {len(history['epochs'])}")

    start_epoch = len(history["epochs"])
    if progress:
        from tqdm.auto import tqdm
    for epoch in range(start_epoch, train_config.epochs):
        order = np.random.default_rng([train_config.seed, epoch]).permutation(x_train.shape[0])
        order = torch.from_numpy(order)
        started = time.perf_counter()
        model.train()
        loss_sum, seen = 0.0, 0
        batches = range(steps_per_epoch)
        bar = None
        if progress:
            bar = tqdm(batches, desc=f"{description} epoch {epoch + 1}/{train_config.epochs}", leave=False)
            batches = bar
        for step in batches:
            index = order[step * train_config.batch_size:(step + 1) * train_config.batch_size]
            logits = model(x_train[index])
            loss = nn.functional.cross_entropy(logits, y_train[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            if not math.isfinite(loss.item()):
                _check_finite(model, epoch, step)
                raise FloatingPointError(
                    f"training loss became {loss.item()} at epoch {epoch + 1}, step {step}; lower --lr"
                )
            loss_sum += loss.item() * index.shape[0]
            seen += index.shape[0]
            if bar is not None and step % 20 == 0:
                bar.set_postfix(loss=f"{loss_sum / seen:.4f}")
        if bar is not None:
            bar.close()
        train_seconds = time.perf_counter() - started
        _check_finite(model, epoch, steps_per_epoch)
        test_loss, test_accuracy = evaluate(model, x_test, y_test, train_config.eval_batch_size)
        record = {
            "epoch": epoch + 1,
            "train_loss": loss_sum / seen,
            "test_loss": test_loss,
            "test_accuracy": test_accuracy,
            "train_seconds": train_seconds,
            "seconds": time.perf_counter() - started,
        }
        history["epochs"].append(record)
        if checkpoint_path is not None:
            _io.save_state(checkpoint_path, {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "history": history,
                "config": config,
            })
            atomic_write_json(run_dir / "history.json", history)
        log(
            f"{description} epoch {epoch + 1}/{train_config.epochs}: train loss {record['train_loss']:.4f}, "
            f"test loss {test_loss:.4f}, test accuracy {100 * test_accuracy:.2f}%, {record['seconds']:.1f} s"
        )
    history["model"] = model
    return history
