"""The final joint stage: every replacement of a compressed model fine-tuned together by distillation.

After the layers are replaced one by one, their errors compound and no layer-wise fit corrects
them. This stage fits all replacement parameters at once to the ORIGINAL model's next-token
distribution on the calibration (training) windows:

    L = mean over windows w and positions t of KL(p_original(. | w_<=t) || p_compressed(. | w_<=t)),

the original distribution recomputed for every step (never stored: one window of logits at a
time). Adam at a constant rate; the stopping rule of :mod:`galinear.compress.converge` on the
same KL over the validation windows (training-side windows not used for fitting, never held-out
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
import os
import time

from galinear.compress import activations
from galinear.compress.converge import Plateau
from galinear.compress.fit import atomic_save, load, progress_steps

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
    with activations.swapped(model, modules):
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


def _mode(modules: dict, train: bool) -> None:
    for m in modules.values():
        m.train(train)


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
    import torch

    from galinear.compress.store import freeze

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
    opt = torch.optim.Adam(params, lr=lr)
    generator = torch.Generator().manual_seed(seed)
    plateau = Plateau(patience=patience, min_delta=min_delta, decay=decay, decays=decays)
    order, pos, recent, curve, step, seconds = torch.empty(0, dtype=torch.long), 0, [], [], 0, 0.0
    saved = load(checkpoint) if checkpoint else None
    if saved is not None and saved.get("format") == _FORMAT:
        for k, m in modules.items():
            m.load_state_dict(saved["best" if saved["finished"] else "modules"][_key(k)])
        if saved["finished"]:
            return {k: freeze(m) for k, m in modules.items()}, saved["stats"]
        opt.load_state_dict(saved["optimizer"])
        generator.set_state(saved["generator"])
        order, pos, recent, curve, step = saved["order"], saved["pos"], list(saved["recent"]), saved["curve"], saved["step"]
        seconds = saved["seconds"]
        for name, value in saved["plateau"].items():
            setattr(plateau, name, value)
        best_state = saved["best"]
    else:
        _mode(modules, train=False)
        first = mean_kl(model, modules, valid_ids, window_batch)
        plateau.update(first, 0)
        curve = [[0, first]]
        best_state = _states(modules)
    stopped = "plateau" if plateau.stopped else "max_steps"
    t0 = time.perf_counter()
    bar = progress_steps(max_steps, progress)
    while step < max_steps and not plateau.stopped:
        step += 1
        _mode(modules, train=True)
        if pos >= len(order):
            order, pos = torch.randperm(len(train_ids), generator=generator), 0
        idx = order[pos:pos + window_batch].numpy()
        pos += window_batch
        loss = kl_loss(model, modules, train_ids[idx])
        if not torch.isfinite(loss.detach()):
            raise FloatingPointError(f"non-finite distillation loss at step {step}; lower the learning rate "
                                     "(--distill-lr)")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        recent = (recent + [loss.item()])[-10:]
        if step % eval_every and step != max_steps:
            bar.step(step, f"KL {recent[-1]:.4g}")
            continue
        _mode(modules, train=False)
        value = mean_kl(model, modules, valid_ids, window_batch)
        curve.append([step, value])
        if plateau.update(value, step, opt) != "worse":
            best_state = _states(modules)
        bar.step(step, f"validation KL {value:.4g}")
        if checkpoint and step < max_steps and not plateau.stopped:
            atomic_save({"format": _FORMAT, "finished": False, "modules": _states(modules), "best": best_state,
                         "optimizer": opt.state_dict(), "generator": generator.get_state(), "order": order,
                         "pos": pos, "recent": recent, "curve": curve, "step": step,
                         "seconds": seconds + time.perf_counter() - t0,
                         "plateau": {k: getattr(plateau, k) for k in ("best", "best_step", "since", "decays_left",
                                                                      "stopped")}}, checkpoint)
    if plateau.stopped:
        stopped = "plateau"
    bar.close(f"{step} steps, best validation KL {plateau.best:.4g} at step {plateau.best_step}")
    for k, m in modules.items():
        m.load_state_dict(best_state[_key(k)])
    stats = {"steps": int(step), "best_step": int(plateau.best_step), "stopped": stopped,
             "valid_kl_start": float(curve[0][1]), "valid_kl": float(plateau.best), "curve": curve,
             "seconds": seconds + time.perf_counter() - t0, "lr": lr, "max_steps": max_steps,
             "eval_every": eval_every, "patience": patience, "window_batch": window_batch}
    if checkpoint:
        atomic_save({"format": _FORMAT, "finished": True, "best": best_state, "stats": stats}, checkpoint)
    return {k: freeze(m) for k, m in modules.items()}, stats


def settings_tag(config) -> str:
    """The distillation settings as they enter the method tag and the checkpoint's name."""
    return f"kd{config.distill_max_steps}-v{config.distill_eval_every}-p{config.patience}-lr{config.distill_lr:g}"


def run_in_study(study, spec, seed: int, layer_set, replacements: dict):
    """The distillation stage of one compressed model of a :class:`galinear.compress.Study`; (modules, stats)."""
    from galinear.compress.store import set_name

    config = study.config
    path = os.path.join(study.store.work, "distill",
                        f"{spec.tag()}-s{seed}-L{set_name(layer_set)}-{settings_tag(config)}.pt")
    label = f"distill {spec.name} s{seed} L{set_name(layer_set)}" if study._bars else None
    modules, stats = distill(study.model, replacements, study._train_ids(), study._valid_ids(),
                             lr=config.distill_lr, max_steps=config.distill_max_steps,
                             eval_every=config.distill_eval_every, patience=config.patience,
                             seed=1_000_003 * seed + 17, checkpoint=path, progress=label)
    study.log(f"distilled {spec.tag()} s{seed} L{set_name(layer_set)}: validation KL {stats['valid_kl_start']:.4g} -> "
              f"{stats['valid_kl']:.4g} (best at step {stats['best_step']} of {stats['steps']}, {stats['stopped']}), "
              f"{stats['seconds']:.1f} s")
    return modules, stats


__all__ = ["kl_loss", "mean_kl", "distill", "settings_tag", "run_in_study"]
