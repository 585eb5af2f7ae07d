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

import math
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from galinear import _io
from galinear.optim import loop as optimise
from galinear.train.config import MLPConfig, TrainConfig
from galinear.train.models import build_mlp, check_training_memory, count_parameters
from galinear.train.run_folder import RunFormat, restore_state, without_identity

__all__ = ["TrainConfig", "train_classifier", "load_history", "check_run_folder", "MLP_RUNS", "data_sha256",
           "atomic_write_json", "evaluate"]


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


def _check_history(history, path, fix: str, run: dict | None = None) -> dict:
    """``history`` if it has the structure train-mlp writes and, with a run configuration ``run``, no more
    epochs than that run; else CorruptFileError naming ``path`` and ``fix``."""
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
                                   "expected)", fix)
    epochs = run["train"]["epochs"] if isinstance(run, dict) and isinstance(run.get("train"), dict) else None
    if isinstance(epochs, int) and len(history["epochs"]) > epochs:
        raise _io.CorruptFileError(path, f"records {len(history['epochs'])} finished epochs of a run of {epochs}", fix)
    return history


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


#: The run folders of ``galinear train-mlp``.
MLP_RUNS = RunFormat(command="train-mlp", config_parts=("model", "train"),
                     checkpoint_keys=("model", "optimizer", "scheduler", "torch_rng", "history"),
                     comparable=_comparable, check_history=_check_history,
                     restart="retrain this run from its first epoch (its config.json may stay)")
check_run_folder = MLP_RUNS.check_folder
load_history = MLP_RUNS.load_history


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


#: A training loss above this many times that of a uniform guess (ln of the class count) stops the run as
#: diverged: no learning run passes it, while a diverging one gets there long before it overflows.
DIVERGED_FACTOR = 100


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
    steps_per_epoch = math.ceil(x_train.shape[0] / train_config.batch_size)
    optimizer = optimise.make_optimizer("adamw", model.parameters(), train_config.lr, train_config.weight_decay)
    scheduler = optimise.cosine_scheduler(optimizer, steps_per_epoch * train_config.epochs, train_config.warmup_steps)
    history = {"config": config, "parameters": parameters, "epochs": []}

    checkpoint_path = None
    if run_dir is not None:
        run_dir = Path(run_dir)
        state = check_run_folder(run_dir, config)
        checkpoint_path = run_dir / "checkpoint.pt"
        if not (run_dir / "config.json").is_file():
            atomic_write_json(run_dir / "config.json", config)
        if state is not None:
            restore_state(state, model, optimizer, scheduler, checkpoint_path, MLP_RUNS.checkpoint_fix(checkpoint_path))
            history = state["history"]
            atomic_write_json(run_dir / "history.json", history)  # whole again, if it was damaged or deleted
            log(f"{description}: resuming after epoch {len(history['epochs'])}")

    chunks = [int(m.chunk_size) for m in model.modules() if type(m).__name__ == "RotorLinear"]
    if chunks:  # what ran: each rotor map caps --chunk-size at the largest power of two <= both its widths
        history["rotor_chunk_sizes"] = chunks
    start_epoch = len(history["epochs"])
    ceiling = DIVERGED_FACTOR * max(1.0, math.log(model_config.num_classes))
    if progress:
        from tqdm.auto import tqdm
    for epoch in range(start_epoch, train_config.epochs):
        order = np.random.default_rng([train_config.seed, epoch]).permutation(x_train.shape[0])
        order = torch.from_numpy(order)
        started = time.perf_counter()
        model.train()
        sums = {"loss": 0.0, "seen": 0}
        bar = None
        if progress:
            bar = tqdm(total=steps_per_epoch, desc=f"{description} epoch {epoch + 1}/{train_config.epochs}", leave=False)

        def rows(step: int) -> torch.Tensor:  # the batch of the epoch's 1-based step
            return order[(step - 1) * train_config.batch_size:step * train_config.batch_size]

        def batch_loss(step: int) -> torch.Tensor:
            index = rows(step)
            return nn.functional.cross_entropy(model(x_train[index]), y_train[index])

        def diverged(step: int, value: float) -> str:
            _check_finite(model, epoch, step - 1)
            return (f"the training loss became {value:.4g} at epoch {epoch + 1}, step {step}" +
                    ("" if not math.isfinite(value) else f", above {ceiling:.4g} ({DIVERGED_FACTOR} times the loss of "
                     f"a uniform guess over {model_config.num_classes} classes): the run diverged") +
                    f"; lower --lr (now {train_config.lr:g})" +
                    (" or give --warmup-steps" if not train_config.warmup_steps else ""))

        def add(run) -> None:
            size = rows(run.step).shape[0]
            sums["loss"] += run.recent[-1] * size
            sums["seen"] += size
            if bar is not None:
                bar.update(1)
                if (run.step - 1) % 20 == 0:
                    bar.set_postfix(loss=f"{sums['loss'] / sums['seen']:.4f}")

        optimise.train(optimizer, batch_loss, steps=steps_per_epoch, scheduler=scheduler, nonfinite=diverged,
                       on_step=add, ceiling=ceiling)
        loss_sum, seen = sums["loss"], sums["seen"]
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
            MLP_RUNS.save(run_dir, model, optimizer, scheduler, history, config)
        log(
            f"{description} epoch {epoch + 1}/{train_config.epochs}: train loss {record['train_loss']:.4f}, "
            f"test loss {test_loss:.4f}, test accuracy {100 * test_accuracy:.2f}%, {record['seconds']:.1f} s"
        )
    history["model"] = model
    return history
