"""Training a :class:`~galinear.train.lm.TransformerLM` from scratch, resumable bit for bit.

One run = one model, one seed. Its folder holds

- ``config.json``: model, optimiser and data settings (a rerun checks they match);
- ``history.json``: the loss of every step, the held-out ln PPL every ``eval_every`` steps (with
  the training seconds so far), tokens per second, peak memory, the parameter counts, what
  decays, and the parameter matching when one was asked for;
- ``checkpoint.pt``: model, optimiser, scheduler and random-number states with the history and
  the configuration, as one safetensors file with a JSON header (:func:`galinear._io.save_state`;
  nothing is unpickled when it is read), written every ``checkpoint_every`` steps and after the
  last.

Every file is written atomically. Batches are a function of (seed, step) only, so a run stopped
at any moment and started again resumes from its last checkpoint and reaches the same parameters
and losses, bit for bit, as one that never stopped (tested).

Data: :func:`prepare_windows` tokenises the text and splits it with the leak-free rule of
``galinear compress`` (:func:`galinear.lm.windows.split_windows`): windows of
``context + 1`` tokens every ``context`` tokens, held-out runs of consecutive windows, and no
training window that shares a token position with a held-out one. Held-out ln PPL is the mean
negative log-likelihood (natural log) of every held-out token, each scored once
(:meth:`~galinear.lm.windows.Windows.score_from`).

Distributed: when ``torch.distributed`` is initialised (``torchrun --nproc-per-node 2 -m
galinear train-lm ...``; gloo on CPU, nccl on GPU) the model is wrapped in
DistributedDataParallel and rank r takes rows [r B / W, (r + 1) B / W) of every global batch of
B windows; the averaged gradient is the gradient of the global mean loss, so W ranks follow the
single-process run (tested with 2 gloo ranks). Only rank 0 writes files.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from galinear import _io
from galinear.optim import loop as optimise
from galinear.train.lm import build_lm, is_rotor_module, projection_parameters
from galinear.train.lm_config import LMConfig, LMDataConfig, LMTrainConfig
from galinear.train.run_folder import RunFormat, restore_state, without_identity

__all__ = ["prepare_windows", "parameter_groups", "batch_starts", "heldout_ln_ppl", "train_lm", "LM_RUNS",
           "check_lm_run_folder", "check_lm_history", "load_lm_history", "peak_memory", "reset_peak_memory",
           "text_sha256", "check_device"]


# ----------------------------------------------------------------------------------------- data
def load_text_for(data: LMDataConfig) -> str:
    """The text of ``data``: a user file (``text_file``) or an offline corpus (``text``)."""
    from galinear.data import text as texts

    if data.text_file:
        return texts.load_text_file(data.text_file, data.text_field)
    return texts.load_text(data.text)


def prepare_windows(data: LMDataConfig, context: int, tokenizer=None, text: str | None = None):
    """(windows, tokenizer) of ``data`` for a model of ``context`` tokens.

    Windows hold ``context + 1`` tokens (inputs and the next-token targets) and start every
    ``context`` tokens; the split is :func:`~galinear.lm.windows.split_windows` with
    ``data``'s held-out fraction, group, seed and held-out cap.
    """
    from galinear.lm.windows import split_windows, tokenize
    from galinear.train.lm import load_tokenizer

    data.validate()
    tokenizer = tokenizer or load_tokenizer(data.tokenizer)
    text = load_text_for(data) if text is None else text
    tokens = tokenize(tokenizer, text, max_tokens=data.max_tokens)
    windows = split_windows(tokens, context + 1, context, data.heldout_fraction, data.split_seed, data.group,
                            max_heldout=data.eval_windows)
    return windows, tokenizer


def batch_starts(windows, seed: int, step: int, batch_size: int) -> np.ndarray:
    """Start positions of the ``batch_size`` training windows of ``step``: drawn with replacement
    by a generator seeded (seed, step), so that any step's batch is known without replaying."""
    rng = np.random.default_rng([seed, step])
    return windows.train[rng.integers(0, len(windows.train), size=batch_size)]


# ------------------------------------------------------------------------------------ optimiser
def parameter_groups(model: nn.Module, config: LMTrainConfig) -> tuple[list[dict], dict]:
    """AdamW parameter groups of ``model`` and the names in each.

    - ``decay`` (weight decay ``config.weight_decay``, rate ``lr``): every parameter with two or
      more dimensions outside the rotor modules: dense, low-rank and Monarch matrices, the token
      and position embeddings (and the tied head);
    - ``no_decay`` (rate ``lr``): biases and norm gains;
    - ``rotor`` (no decay, rate ``rotor_lr`` or ``lr``): every parameter of a RotorLinear or
      RotorNetwork: bivectors, gadget weights alpha, branch weights, the PReLU slope, biases.
      Decay of a bivector would pull the rotor towards the identity rather than the map towards
      zero, so it is off unless ``decay_bivectors``, which moves the bivectors to
      ``rotor_decay`` (weight decay ``weight_decay``, rate ``rotor_lr``).
    """
    rotor_ids = {id(p) for module in model.modules() if is_rotor_module(module) for p in module.parameters()}
    names = {"decay": [], "no_decay": [], "rotor": [], "rotor_decay": []}
    params = {key: [] for key in names}
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        if id(parameter) in rotor_ids:
            key = "rotor_decay" if config.decay_bivectors and name.endswith("bivectors") else "rotor"
        else:
            key = "decay" if parameter.dim() >= 2 else "no_decay"
        names[key].append(name)
        params[key].append(parameter)
    rotor_lr = config.rotor_lr or config.lr
    settings = {"decay": (config.weight_decay, config.lr), "no_decay": (0.0, config.lr),
                "rotor": (0.0, rotor_lr), "rotor_decay": (config.weight_decay, rotor_lr)}
    groups = [{"params": params[key], "weight_decay": settings[key][0], "lr": settings[key][1], "name": key}
              for key in names if params[key]]
    return groups, {key: value for key, value in names.items() if value}


def _autocast(config: LMTrainConfig, device: torch.device):
    enabled = config.precision == "bf16"
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak-memory measurement: CUDA's peak statistics, or on Linux the process's
    resident-set high-water mark (``/proc/self/clear_refs``), so that a run does not report the
    peak of an earlier run in the same process."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


def peak_memory(device: torch.device) -> tuple[int, str]:
    """(bytes, what): CUDA's peak allocated memory; else the peak resident set size since
    :func:`reset_peak_memory` (Linux ``VmHWM``), or of the whole process (``ru_maxrss``)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda max_memory_allocated"
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024, "peak resident set size of the run (VmHWM)"
    except (OSError, ValueError, IndexError):
        pass
    import resource
    import sys

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024), "peak resident set size of the process (ru_maxrss)"


# ----------------------------------------------------------------------------------- evaluation
@torch.no_grad()
def heldout_ln_ppl(model: nn.Module, windows, batch_size: int = 16, config: LMTrainConfig | None = None,
                   device=None, rank: int = 0, world: int = 1) -> float:
    """Mean natural-log NLL of every held-out token, each scored once (strided perplexity).

    Under DDP each rank scores the held-out windows ``rank, rank + W, ...`` and the sums are
    added across ranks. ``model`` is put in eval mode (no warm-start update) and back.
    """
    device = torch.device(device or next(model.parameters()).device)
    config = config or LMTrainConfig()
    was_training = model.training
    model.eval()
    mine = list(range(rank, len(windows.heldout), world))
    total = torch.zeros(2, dtype=torch.float64, device=device)
    for begin in range(0, len(mine), batch_size):
        rows = mine[begin:begin + batch_size]
        ids = torch.from_numpy(windows.batch(windows.heldout[rows])).to(device)
        with _autocast(config, device):
            logits = model(ids[:, :-1])
        nll = nn.functional.cross_entropy(logits.float().transpose(1, 2), ids[:, 1:], reduction="none")
        labels = torch.arange(1, ids.shape[1], device=device)
        first = torch.tensor([windows.score_from(i) for i in rows], device=device)
        mask = labels[None, :] >= first[:, None]
        total[0] += nll.double()[mask].sum()
        total[1] += mask.sum()
    if world > 1:
        torch.distributed.all_reduce(total)
    model.train(was_training)
    return float(total[0] / total[1])


# ---------------------------------------------------------------------------------- run folders
_NOT_COMPARED = {"model": ("backend", "recompute"), "train": ("checkpoint_every", "max_seconds", "compile_backend")}


def _comparable(config: dict) -> dict:
    """The configuration as a rerun compares it: without the settings that change speed, memory or
    the run's cadence, not its result (the sandwich backend, recomputation, checkpoint cadence,
    time budget), and
    without the data fingerprints (compared by :func:`~galinear.train.run_folder.check_same_data`).
    A model field a saved configuration lacks takes its :class:`LMConfig` default."""
    out = without_identity(json.loads(json.dumps(config)))
    if isinstance(out.get("model"), dict):
        out["model"] = {**LMConfig().to_dict(), **out["model"]}
    for part, names in _NOT_COMPARED.items():
        for name in names:
            out.get(part, {}).pop(name, None)
    return out


def _number(value, low=None) -> bool:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return ok and (low is None or value >= low)


def _integer(value, low=0, high=None) -> bool:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    return ok and (high is None or value <= high)


def check_lm_history(history, path, fix: str, run: dict | None = None) -> dict:
    """``history`` if it has the structure train-lm writes, else CorruptFileError naming ``path`` and ``fix``.

    Checked: the configuration (model, train and data settings with the fields the report reads),
    the step (an integer in [0, steps], the steps of the run configuration ``run``, else of the
    history's own configuration), one finite loss
    per step, every evaluation (a step in [0, step], a finite ln PPL, training seconds), the
    parameter counts, seconds and speed."""
    def bad(reason):
        return _io.CorruptFileError(path, f"not a train-lm history ({reason})", fix)

    if not isinstance(history, dict):
        raise bad("a JSON object expected")
    config = history.get("config")
    if not LM_RUNS.is_config(config):
        raise bad("no model, train and data settings under config")
    model, train = config["model"], config["train"]
    if not (isinstance(model.get("projection"), str)
            and all(_integer(model.get(name), 1) for name in ("width", "layers", "context"))
            and _integer(train.get("steps"), 1) and isinstance(train.get("precision"), str)
            and _number(train.get("lr"), 0)):
        raise bad("config lacks the projection, width, layers, context, steps, precision or lr")
    steps = train["steps"] if run is None else run["train"]["steps"]
    step = history.get("step")
    if not _integer(step, 0, steps):
        raise bad(f"step {step!r} is not an integer in [0, {steps}]")
    losses = history.get("losses")
    if not isinstance(losses, list) or len(losses) != step or not all(_number(v) for v in losses):
        raise bad(f"losses must hold one finite number per step ({step})")
    evals = history.get("evals")
    if not isinstance(evals, list) or not all(
            isinstance(e, dict) and _integer(e.get("step"), 0, step) and _number(e.get("heldout_ln_ppl"))
            and _number(e.get("train_seconds"), 0) for e in evals):
        raise bad("every evaluation needs a step in [0, step], a finite heldout_ln_ppl and train_seconds")
    if not (_integer(history.get("parameters"), 1) and _integer(history.get("projection_parameters"), 0)
            and _number(history.get("train_seconds"), 0)):
        raise bad("parameters, projection_parameters or train_seconds missing or of the wrong type")
    for name in ("tokens_per_second", "peak_memory_bytes"):
        if history.get(name) is not None and not _number(history[name], 0):
            raise bad(f"{name} is {history[name]!r}, not a number >= 0")
    if history.get("stopped") not in (None, "steps", "time"):
        raise bad(f"stopped is {history.get('stopped')!r}")
    return history


#: The run folders of ``galinear train-lm``.
LM_RUNS = RunFormat(command="train-lm", config_parts=("model", "train", "data"),
                    checkpoint_keys=("model", "optimizer", "scheduler", "torch_rng", "history", "config"),
                    comparable=_comparable, check_history=check_lm_history, restart="train this run again from step 0",
                    rebuild="delete the run folder {run_dir} (or move it out of the results folder)")
check_lm_run_folder = LM_RUNS.check_folder
load_lm_history = LM_RUNS.load_history


# ------------------------------------------------------------------------------------- training
def _distributed() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _dtype(config: LMTrainConfig) -> torch.dtype:
    return torch.float64 if config.precision == "float64" else torch.float32


def train_lm(model_config: LMConfig, train_config: LMTrainConfig, windows, run_dir=None, *,
             data: dict | None = None, matching: dict | None = None, device=None, progress: bool = False,
             description: str = "", log=print) -> dict:
    """Train the transformer of ``model_config`` on ``windows`` and return its history.

    Parameters
    ----------
    windows : galinear.lm.windows.Windows
        Windows of ``context + 1`` tokens (:func:`prepare_windows`).
    run_dir : path, optional
        Config, history and checkpoint; a checkpoint of the same configuration is resumed.
        None: nothing is written.
    data : dict, optional
        The data settings (saved in the configuration and compared on resume).
    matching : dict, optional
        The record of :func:`galinear.train.lm.match_parameters`, saved in the history.
    device : torch.device or str, optional
        Default: CUDA (rank's local device) when available, else the CPU.

    Returns
    -------
    dict
        The history (see the module docstring) with the trained (unwrapped) model under "model".
    """
    model_config.validate()
    train_config.validate()
    if windows.window != model_config.context + 1:
        raise ValueError(f"the windows hold {windows.window} tokens; a model of context {model_config.context} "
                         f"trains on windows of {model_config.context + 1}")
    top = int(windows.tokens.max()) if len(windows.tokens) else 0
    if top >= model_config.vocab_size:
        raise ValueError(f"the tokens run up to id {top}, but the model's vocabulary has {model_config.vocab_size} "
                         "entries; build it with the tokenizer's vocabulary size")
    rank, world = _distributed()
    if train_config.batch_size % world:
        raise ValueError(f"--batch-size {train_config.batch_size} is not divisible by the {world} ranks; use a "
                         f"multiple of {world}")
    if len(windows.train) < train_config.batch_size:
        raise ValueError(f"--batch-size {train_config.batch_size} is more than the {len(windows.train):,} training "
                         f"windows of the text: every batch would repeat windows; use --batch-size "
                         f"{max(1, len(windows.train))} or less, a longer text, or a smaller --context")
    if device is None:
        device = (torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available()
                  else torch.device("cpu"))
    device = check_device(device)
    if train_config.precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError("this GPU does not support bfloat16; use --precision float32")
    reset_peak_memory(device)

    config = {"model": model_config.to_dict(), "train": train_config.to_dict(), "data": data or {}}
    torch.manual_seed(train_config.seed)
    model = build_lm(model_config).to(device=device, dtype=_dtype(train_config))
    groups, group_names = parameter_groups(model, train_config)
    optimizer = optimise.make_optimizer("adamw", groups, train_config.lr, betas=(train_config.beta1, train_config.beta2))
    scheduler = optimise.cosine_scheduler(optimizer, train_config.steps, train_config.warmup_steps)
    history = {
        "config": config, "parameters": sum(p.numel() for p in model.parameters()),
        "projection_parameters": projection_parameters(model_config), "matching": matching,
        "parameter_groups": group_names, "world_size": world, "device": str(device),
        "step": 0, "train_seconds": 0.0, "losses": [], "evals": [], "stopped": None,
    }

    checkpoint = None
    if run_dir is not None:
        run_dir = Path(run_dir)
        state = check_lm_run_folder(run_dir, config)
        checkpoint = run_dir / "checkpoint.pt"
        if rank == 0 and not (run_dir / "config.json").is_file():
            _io.save_json(run_dir / "config.json", config)
        if state is not None:
            restore_state(state, model, optimizer, scheduler, checkpoint, LM_RUNS.checkpoint_fix(checkpoint))
            history = state["history"]
            history["world_size"], history["device"] = world, str(device)
            log(f"{description}: resuming after step {history['step']}")

    net = model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if train_config.compile:
        net = torch.compile(net, backend=train_config.compile_backend)

    def evaluate_and_record(step):
        ln_ppl = heldout_ln_ppl(model, windows, train_config.eval_batch_size, train_config, device, rank, world)
        recent = history["losses"][-train_config.eval_every:]
        history["evals"].append({"step": step, "train_seconds": history["train_seconds"], "heldout_ln_ppl": ln_ppl,
                                 "train_loss": float(np.mean(recent)) if recent else None})
        return ln_ppl

    def save():
        peak, what = peak_memory(device)
        history["peak_memory_bytes"], history["peak_memory"] = max(peak, history.get("peak_memory_bytes", 0)), what
        steps_done = history["step"]
        tokens = steps_done * train_config.batch_size * model_config.context
        history["tokens_per_second"] = tokens / history["train_seconds"] if history["train_seconds"] else None
        if checkpoint is not None and rank == 0:
            LM_RUNS.save(checkpoint.parent, model, optimizer, scheduler, history, config)

    share = train_config.batch_size // world
    steps = train_config.steps
    bar = None
    if progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, initial=history["step"], desc=description, leave=False)
    def out_of_time(run) -> bool:  # the stop rule: the time budget
        if train_config.max_seconds is not None and history["train_seconds"] >= train_config.max_seconds:
            history["stopped"] = "time"
            return True
        return False

    def batch_loss(step: int) -> torch.Tensor:  # this rank's share of the global batch of the 1-based step
        starts = batch_starts(windows, train_config.seed, step - 1, train_config.batch_size)
        ids = torch.from_numpy(windows.batch(starts[rank * share:(rank + 1) * share])).to(device)
        with _autocast(train_config, device):
            logits = net(ids[:, :-1])
        return nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

    def mean_over_ranks(loss: torch.Tensor) -> float:  # the same number on every rank
        value = loss.detach().double()
        if world > 1:
            torch.distributed.all_reduce(value)
            value /= world
        value = float(value)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return value

    def record(run) -> None:  # the history, the bar, the evaluations and the checkpoints
        step, value = run.step, run.recent[-1]
        history["train_seconds"] += run.step_seconds
        history["losses"].append(value)
        history["step"] = step
        if bar is not None:
            bar.update(1)
            if (step - 1) % 10 == 0:
                bar.set_postfix(loss=f"{value:.3f}")
        last = step == steps
        if step % train_config.eval_every == 0 or last:
            ln_ppl = evaluate_and_record(step)
            log(f"{description} step {step}/{steps}: train loss {history['evals'][-1]['train_loss']:.4f}, "
                f"held-out ln PPL {ln_ppl:.4f}, {history['train_seconds']:.1f} s")
        if step % train_config.checkpoint_every == 0 or last:
            save()
            log(f"{description}: checkpoint after step {step}")

    model.train()
    if history["step"] == 0 and not history["evals"]:  # the curves start at the initialisation
        evaluate_and_record(0)
    optimise.train(optimizer, batch_loss, steps=steps, scheduler=scheduler, start=history["step"],
                   grad_clip=train_config.grad_clip, clip_params=list(model.parameters()), loss_value=mean_over_ranks,
                   stop=out_of_time, on_step=record,
                   nonfinite=lambda step, value: (f"{description}: the training loss became {value} at step {step}; "
                                                  "lower --lr (or --rotor-lr), or keep --grad-clip on"))
    if history["stopped"] == "time" or (history["step"] == steps and history["stopped"] is None):
        if history["stopped"] is None:
            history["stopped"] = "steps"
        if not history["evals"] or history["evals"][-1]["step"] != history["step"]:
            evaluate_and_record(history["step"])
        save()
    if bar is not None:
        bar.close()
    history["model"] = model
    return history


def run_config(model_config: LMConfig, train_config: LMTrainConfig, data: LMDataConfig,
               identity: dict | None = None) -> dict:
    """The configuration a run folder records (for checks before any training); ``identity``: the
    data fingerprints (``text_sha256``, ``tokenizer_sha256``), kept in the data part."""
    return {"model": model_config.to_dict(), "train": asdict(train_config), "data": {**data.to_dict(), **(identity or {})}}


def text_sha256(text: str) -> str:
    """SHA-256 of the UTF-8 bytes of a text: the fingerprint a run folder records."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def check_device(name) -> torch.device:
    """The torch device ``name`` names, if this machine has it; ValueError naming the fix otherwise."""
    if name is None:
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"--device {name!r} is not a device torch knows; use cpu or cuda (cuda:N for GPU N), or "
                         "leave --device out") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {name}: torch sees no CUDA GPU here (torch.cuda.is_available() is False); use "
                             "--device cpu or leave --device out")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA GPU(s), "
                             f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    elif device.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"--device {name}: torch sees no MPS device here; use --device cpu")
    elif device.type != "cpu":
        raise ValueError(f"--device {name}: train-lm runs on cpu, cuda or mps, not on {device.type}")
    return device
