"""The final joint stage: every replacement of a compressed model fine-tuned together by distillation.

After the layers are replaced one by one, their errors compound and no layer-wise fit corrects
them. This stage fits all replacement parameters at once to the ORIGINAL model's next-token
distribution on the calibration (training) windows:

    L = mean over windows w and positions t of KL(p_original(. | w_<=t) || p_compressed(. | w_<=t)),

the original distribution recomputed for every step (never stored: one window of logits at a
time). Adam at a constant rate (:func:`galinear.optim.loop.train`); the stopping rule of
:mod:`galinear.compress.fitting.converge` on the same KL over the validation windows (training-side windows not used for fitting, never held-out
ones): every ``eval_every`` steps, a decay of the rate after ``patience`` checks without a 0.1 %
improvement, the stop at the next plateau or ``max_steps``; the parameters of the best check
are kept.

At every check the whole state (parameters, the best ones, Adam's moments, the row order and
the random generator, the stopping rule's counters, the curve) is written atomically, so a
rerun resumes at the last check and ends with the same parameters, bit for bit, as a run that
was never interrupted. A finished stage is stored with its result and is not run again.
"""
from __future__ import annotations

import copy

from galinear.compress.fitting.seeds import DISTILL_SLOT, fit_seed
from galinear.compress.fitting.surgery import freeze, swapped
from galinear.compress.storage.checkpoints import atomic_save, load
from galinear.optim import loop as optimise

_FORMAT = "galinear-distill-v1"


def _key(key) -> str:
    return f"{key[0]}.{key[1]}"


def log_probs(logits):
    import torch

    return torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)


def kl_loss(model, modules: dict, ids):
    """Mean over tokens of KL(p_original || p_compressed) on the windows ``ids`` (windows, L); the
    compressed model is ``model`` with ``modules = {(layer, projection): module}`` installed."""
    import torch

    inputs = torch.as_tensor(ids)
    with torch.no_grad():
        target = log_probs(model(input_ids=inputs, use_cache=False).logits)
    with swapped(model, modules):
        logp = log_probs(model(input_ids=inputs, use_cache=False).logits)
    return (target.exp() * (target - logp)).sum(-1).mean()


def mean_kl(model, modules: dict, ids, window_batch: int = 1) -> float:
    """:func:`kl_loss` over all windows ``ids`` (no gradients), weighted by windows."""
    import torch

    total = 0.0
    with torch.no_grad():
        for i in range(0, len(ids), window_batch):
            part = ids[i:i + window_batch]
            total += float(kl_loss(model, modules, part)) * len(part)
    return total / max(len(ids), 1)


def _states(modules: dict) -> dict:
    return {_key(k): copy.deepcopy(m.state_dict()) for k, m in modules.items()}


def distill(model, replacements: dict, train_ids, valid_ids, *, lr: float = 1e-3, max_steps: int = 200,
            eval_every: int = 10, patience: int = 4, min_delta: float = 1e-3, decay: float = 0.3, decays: int = 1,
            window_batch: int = 1, seed: int = 0, checkpoint: str | None = None, progress: str | None = None):
    """Fine-tune copies of ``replacements`` jointly by distillation; returns (modules, stats).

    Parameters
    ----------
    model
        The original model (its own weights stay frozen; the replacements are installed per step).
    replacements : dict
        ``{(layer, projection): module}``, e.g. the result of a sequential fit. Not modified.
    train_ids, valid_ids : int arrays (windows, L)
        Calibration windows (steps take ``window_batch`` of them in a seeded random order) and
        validation windows (the stopping rule).
    checkpoint : str, optional
        State file; written at every check and at the end; an existing one is resumed (or, when
        finished, returned without running).

    Returns
    -------
    modules : dict
        The distilled copies (eval mode, no gradients), at the best validation check.
    stats : dict
        ``steps``, ``best_step``, ``stopped`` ("plateau" or "max_steps"), ``valid_kl_start``,
        ``valid_kl`` (best), ``curve`` ([step, validation KL] pairs), ``seconds``, ``lr``.
    """
    if len(valid_ids) == 0:
        raise ValueError("the distillation stage needs validation windows for its stopping rule; give longer texts "
                         "or fewer --train-windows")
    for name, value in (("max_steps", max_steps), ("eval_every", eval_every), ("patience", patience),
                        ("window_batch", window_batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"distillation {name} must be a positive integer, got {value!r}")
    if not lr > 0:
        raise ValueError(f"the distillation learning rate must be > 0, got {lr!r}")
    modules = {k: copy.deepcopy(m) for k, m in replacements.items()}
    params = []
    for m in modules.values():
        for p in m.parameters():
            p.requires_grad_(True)
            params.append(p)
    if not params:
        raise ValueError("the replacements have no parameters to distill (the zero baseline)")
    named = {_key(k): m for k, m in modules.items()}  # the names of the states in the checkpoint
    batches = optimise.Batches(len(train_ids), window_batch, seed)
    saved = load(checkpoint) if checkpoint else None
    resume = saved if saved is not None and saved.get("format") == _FORMAT else None
    if resume is not None:
        for name, m in named.items():
            m.load_state_dict(resume["best" if resume["finished"] else "modules"][name])
        if resume["finished"]:
            return {k: freeze(m) for k, m in modules.items()}, resume["stats"]
        batches.restore(resume)

    def save(run) -> None:  # the state at a check: a rerun resumes here with the same floats
        state = run.state()
        atomic_save({"format": _FORMAT, "finished": False, "modules": _states(modules), "best": state["best"],
                     "optimizer": state["optimizer"], **batches.state(), "recent": state["recent"],
                     "curve": state["curve"], "step": state["step"], "seconds": state["seconds"],
                     "plateau": state["plateau"]}, checkpoint)

    run = optimise.train(optimise.make_optimizer("adam", params, lr),
                         lambda step: kl_loss(model, modules, train_ids[batches.next().numpy()]),
                         steps=max_steps, modules=named, eval_every=eval_every,
                         validate=lambda: mean_kl(model, modules, valid_ids, window_batch),
                         plateau=optimise.Plateau(patience=patience, min_delta=min_delta, decay=decay, decays=decays),
                         resume=resume, on_check=save if checkpoint else None, name="KL",
                         nonfinite="non-finite distillation loss at step {step}; lower the learning rate "
                                   "(--distill-lr)", progress=progress)
    stats = {"steps": int(run.step), "best_step": int(run.plateau.best_step), "stopped": run.stopped,
             "valid_kl_start": float(run.curve[0][1]), "valid_kl": float(run.plateau.best), "curve": run.curve,
             "seconds": run.seconds, "lr": lr, "max_steps": max_steps, "eval_every": eval_every,
             "patience": patience, "window_batch": window_batch}
    if checkpoint:
        atomic_save({"format": _FORMAT, "finished": True, "best": run.best, "stats": stats}, checkpoint)
    return {k: freeze(m) for k, m in modules.items()}, stats


def settings_tag(config) -> str:
    """The distillation settings as they enter the method tag and the checkpoint's name."""
    return f"kd{config.distill_max_steps}-v{config.distill_eval_every}-p{config.patience}-lr{config.distill_lr:g}"


def distill_stage(model, replacements: dict, train_ids, valid_ids, config, store, spec, seed: int, layer_set, *,
                  log, bars: bool = False):
    """The distillation stage of one compressed model of a study; (modules, stats).

    ``train_ids`` / ``valid_ids``: the study's training and validation windows; ``config``: its
    StudyConfig (the distillation settings); ``store``: names the checkpoint
    (:meth:`galinear.compress.storage.store.Store.distill_path`); ``log`` takes one line."""
    from galinear.compress.storage.store import set_name

    path = store.distill_path(spec, seed, layer_set, settings_tag(config))
    label = f"distill {spec.name} s{seed} L{set_name(layer_set)}" if bars else None
    modules, stats = distill(model, replacements, train_ids, valid_ids,
                             lr=config.distill_lr, max_steps=config.distill_max_steps,
                             eval_every=config.distill_eval_every, patience=config.patience,
                             seed=fit_seed(seed, 0, DISTILL_SLOT), checkpoint=path, progress=label)
    log(f"distilled {spec.tag()} s{seed} L{set_name(layer_set)}: validation KL {stats['valid_kl_start']:.4g} -> "
        f"{stats['valid_kl']:.4g} (best at step {stats['best_step']} of {stats['steps']}, {stats['stopped']}), "
        f"{stats['seconds']:.1f} s")
    return modules, stats


__all__ = ["kl_loss", "mean_kl", "distill", "settings_tag", "distill_stage"]
