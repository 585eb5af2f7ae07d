"""Fitting the layers of one (method, seed, layer set): plain functions of a
:class:`~galinear.compress.study.context.Context` (model, settings, store, captures cache, log).

A layer set is fitted layer after layer, each on the network whose earlier layers of the set are
replaced. Within a layer the targets are fitted stage by stage in forward order
(:func:`galinear.compress.methods.targets.stages`): projection by projection by Adam
(:mod:`galinear.compress.fitting.projection`, :mod:`galinear.compress.fitting.converge`), from second
moments (:mod:`galinear.compress.fitting.closed_form`), or jointly to a block's output
(:mod:`galinear.compress.fitting.objective`); then, with ``--refit-o-proj``, a dense o_proj.

A layer's checkpoints are read once, when the layer starts (:meth:`Store.saved_unit
<galinear.compress.storage.store.Store.saved_unit>`): what they hold decides whether the layer was
loaded, whether a stage needs its inputs captured, and which units are fitted.
"""
from __future__ import annotations

import time

from galinear.compress.fitting import closed_form, converge, heldout_error, objective, projection, seeds
from galinear.compress.methods import catalogue as methods
from galinear.compress.methods import targets as targeting
from galinear.compress.fitting.surgery import install
from galinear.compress.study import sequential
from galinear.lm import models

__all__ = ["fit_layer_set", "fit_units", "unit_record"]


def fit_layer_set(ctx, spec, seed: int, layer_set) -> dict:
    """Fit (or load) every unit of ``layer_set`` for one method and seed, layer after layer, each on
    the network whose earlier layers of the set are replaced; returns ``{"replacements": {(layer,
    projection): module}, "stats": {(layer, projection): stats}}``.

    Every layer is checkpointed before the next starts (a rerun resumes at the first layer
    without its files); sets of several layers log one line per layer with the time left, and
    the in-memory captures of a layer are released once it is fitted
    (:meth:`galinear.compress.study.captures.Captures.release`).
    """
    replacements = {}
    info = {}
    label = f"{spec.tag()} s{seed} layers {sequential.compact(layer_set)}"
    progress = sequential.LayerProgress(label, layer_set, ctx.log, enabled=len(layer_set) > 1)
    expected = ctx.store.unit_projections()
    for i, layer in enumerate(layer_set):
        saved = ctx.store.saved_unit(spec, seed, tuple(layer_set[:i]), layer)
        progress.start()
        _fit_layer(ctx, spec, seed, layer_set, i, saved, replacements, info)
        progress.done(i, all(p in saved for p in expected))
        if len(layer_set) > 1:
            ctx.captures.release(layer)
    return {"replacements": replacements, "stats": info}


def _held(saved: dict, projections) -> dict | None:
    """``{projection: record}`` of ``projections`` when every one is among ``saved``, else None."""
    if not all(p in saved for p in projections):
        return None
    return {p: saved[p] for p in projections}


def _refit_unit(config, proj: str) -> bool:
    """Whether ``proj`` is the o_proj refit (``--refit-o-proj``) rather than a replaced target."""
    return proj == "o_proj" and "o_proj" not in config.targets


def _build(ctx, spec, layer: int, proj: str):
    import torch

    orig = models.projection(ctx.model, layer, proj)
    if _refit_unit(ctx.config, proj):
        module = torch.nn.Linear(orig.in_features, orig.out_features, bias=orig.bias is not None)
        module.load_state_dict(orig.state_dict())
        return module
    return methods.build_module(spec, orig.in_features, orig.out_features, bias=orig.bias is not None)


def _fit_layer(ctx, spec, seed: int, layer_set, i: int, saved: dict, replacements: dict, info: dict) -> None:
    """Fit (or load) the units of ``layer_set[i]`` and install them in ``replacements``: the
    targets stage by stage in forward order, each on the network with the earlier stages installed.
    ``saved``: the layer's readable checkpoints."""
    for projections, block in targeting.stages(ctx.config.targets, spec.objective):
        if spec.moment_fit:
            _fit_closed_form(ctx, spec, seed, layer_set, i, saved, replacements, info, projections)
        elif block is not None:  # fitted jointly (galinear.compress.fitting.objective)
            def fit_all(modules, block=block):
                return objective.fit_joint(modules, ctx.captures, ctx.model, spec, seed, layer_set, i, replacements,
                                           block, log=ctx.log, bars=ctx.bars)

            fit_units(ctx, spec, seed, layer_set, i, tuple(projections), fit_all, saved, replacements, info)
        else:
            _fit_projections(ctx, spec, seed, layer_set, i, saved, replacements, info, projections)
    if ctx.config.refit_o_proj:
        _refit_o_proj(ctx, spec, seed, layer_set, i, saved, replacements, info)


def unit_record(module, stats: dict, layer: int, projection: str, spec=None, seed=None) -> dict:
    """The checkpoint of one fitted projection: its state, stats and place, and (q, k, v) the method
    (a MethodSpec) and seed that made it."""
    record = {"state": module.state_dict(), "stats": stats}
    if spec is not None:
        record["spec"] = spec.to_dict()
    record.update(layer=layer, projection=projection)
    if seed is not None:
        record["seed"] = seed
    return record


def fit_units(ctx, spec, seed: int, layer_set, i: int, projections, fit_all, saved: dict, replacements: dict,
              info: dict) -> None:
    """Fit (or take back from ``saved``) the replacements of ``projections`` at ``layer_set[i]`` as
    one unit (one checkpoint a projection, :meth:`galinear.compress.storage.store.Store.save_unit`)
    and install them.

    When ``saved`` holds every projection's record the modules take their saved states; otherwise
    ``fit_all`` fits them all and each record is saved atomically before anything uses it, so a
    run killed anywhere leaves whole records and a rerun resumes at the first unit without them.

    Targets are initialised under the seed :func:`galinear.compress.fitting.seeds.fit_seed` gives
    them (:func:`galinear.compress.methods.targets.slot`), the o_proj refit as the original o_proj.
    ``fit_all(modules)`` fits ``{projection: module}`` and returns ``{projection: stats}``.
    """
    import torch

    layer, prefix = layer_set[i], tuple(layer_set[:i])
    modules = {}
    for proj in projections:
        if not _refit_unit(ctx.config, proj):
            torch.manual_seed(seeds.fit_seed(seed, layer, targeting.slot(proj)))
        modules[proj] = _build(ctx, spec, layer, proj)

    held = _held(saved, projections)
    if held is None:  # o_proj's record names neither method nor seed
        stats = fit_all(modules)
        held = {p: unit_record(m, stats[p], layer, p,
                               *((None, None) if _refit_unit(ctx.config, p) else (spec, seed)))
                for p, m in modules.items()}
        ctx.store.save_unit(spec, seed, prefix, layer, held)
    else:
        for proj, module in modules.items():
            module.load_state_dict(held[proj]["state"])
    for proj, module in modules.items():
        install(module, (layer, proj), held[proj]["stats"], replacements, info)


def _fit_projections(ctx, spec, seed, layer_set, i, saved, replacements, info, projections=models.PROJECTIONS) -> None:
    """Fit each replacement of ``projections`` (which read one input) at ``layer_set[i]`` on its own by
    Adam (:mod:`galinear.compress.fitting.projection`, or until converged,
    :mod:`galinear.compress.fitting.converge`)."""
    captures, layer = ctx.captures, layer_set[i]
    where = targeting.INPUTS[projections[0]]
    key = captures.stage_key(spec, seed, layer_set, i, where, replacements)
    x_orig, x_orig_test = captures.original(layer, where)
    x_in, x_in_test = x_orig, x_orig_test
    if not key.startswith("original-") and _held(saved, projections) is None:
        x_in, x_in_test = captures.pair(layer, where, replacements, key)

    def fit_one(proj, j, module):
        orig = models.projection(ctx.model, layer, proj)
        label = ctx.label(f"fit {spec.name} s{seed} L{layer} {proj}")
        t0 = time.perf_counter()
        if spec.max_steps:
            xv_in, xv_orig = captures.valid(layer, replacements, key, where)
            stats = converge.fit_until_converged(
                module, x_in, x_orig, orig.weight, valid_inputs=xv_in, valid_target_inputs=xv_orig,
                lr=spec.learning_rate, bias=orig.bias, batch_size=spec.batch_size, seed=seeds.fit_seed(seed, layer, j),
                max_steps=spec.max_steps, eval_every=spec.eval_every, patience=spec.patience, progress=label)
        else:
            stats = projection.fit_projection(module, x_in, x_orig, orig.weight, lr=spec.learning_rate,
                                              epochs=spec.epochs, batch_size=spec.batch_size,
                                              seed=seeds.fit_seed(seed, layer, j), bias=orig.bias, progress=label)
        stats["seconds"] = time.perf_counter() - t0
        ctx.log(projection.summary(f"{spec.tag()} s{seed} L{layer} {proj}", stats))
        return dict(stats, **heldout_error.test_stats(module, orig, x_in_test, x_orig_test))

    for proj in projections:
        fit_units(ctx, spec, seed, layer_set, i, (proj,),
                  lambda mods, proj=proj: {proj: fit_one(proj, targeting.slot(proj), mods[proj])},
                  saved, replacements, info)


def _fit_closed_form(ctx, spec, seed, layer_set, i, saved, replacements, info, projections=models.PROJECTIONS) -> None:
    """Set each replacement of ``projections`` (which read one input) at ``layer_set[i]`` from the second
    moments of all training rows: the exact optimum (LR*, BH*), or Adam on the exact all-row MSE (rotorlin-m)."""
    layer = layer_set[i]
    where = targeting.INPUTS[projections[0]]
    if _held(saved, projections) is None:
        key = ctx.captures.stage_key(spec, seed, layer_set, i, where, replacements)
        train_m, test_m = ctx.captures.moments(layer, replacements, key, where)

    def fit_one(proj, module):
        orig = models.projection(ctx.model, layer, proj)
        t0 = time.perf_counter()
        reg = train_m.regression(orig.weight, orig.bias)
        if spec.closed_form:
            stats = closed_form.fit_module(module, reg)
        else:  # rotorlin-m: Adam on the exact all-row loss, the study's stopping settings
            stats = closed_form.fit_on_moments(module, reg, lr=spec.learning_rate, max_steps=spec.max_steps,
                                               eval_every=spec.eval_every, patience=spec.patience)
        stats["seconds"] = time.perf_counter() - t0
        test_reg = test_m.regression(orig.weight, orig.bias)
        stats["test_mse"] = closed_form.module_mse(module, test_reg)
        stats["target_mean_square"] = test_reg.target_mean_square()
        stats["params"] = methods.count_parameters(module)
        stats["dense_params"] = methods.count_parameters(orig)
        stats["final_loss"] = stats["train_mse"]
        ctx.log(f"{'closed-form' if spec.closed_form else 'moment-fitted'} {spec.tag()} L{layer} {proj}: "
                f"train MSE {stats['train_mse']:.4g}, test MSE {stats['test_mse']:.4g}"
                + (f" ({stats['steps']} steps, best at {stats['best_step']})" if stats["steps"] else "")
                + (f", ridge {stats['ridge']:.3g}" if stats["ridge"] else ""))
        return stats

    for proj in projections:
        fit_units(ctx, spec, seed, layer_set, i, (proj,), lambda mods, proj=proj: {proj: fit_one(proj, mods[proj])},
                  saved, replacements, info)


def _refit_o_proj(ctx, spec, seed, layer_set, i, saved, replacements, info):
    """Refit a dense o_proj, started from the original one, to the original o_proj outputs (AdamW)."""
    import torch

    layer = layer_set[i]

    def fit_o(mods):
        module, orig = mods["o_proj"], models.projection(ctx.model, layer, "o_proj")
        x_orig, x_orig_test = ctx.captures.original(layer, "o_in")
        x_in, x_in_test = ctx.captures.pair(layer, "o_in", replacements,
                                            ctx.store.o_input_key(spec, seed, layer_set[:i + 1]))
        label = ctx.label(f"refit o_proj {spec.name} s{seed} L{layer}")
        torch.manual_seed(seed)
        stats = projection.fit_projection(module, x_in, x_orig, orig.weight, lr=1e-4, epochs=ctx.config.o_epochs,
                                          batch_size=256, seed=seeds.fit_seed(seed, layer, seeds.O_PROJ_SLOT),
                                          bias=orig.bias, weight_decay=1e-2, optimizer="adamw", progress=label)
        stats["test_mse"] = heldout_error.mse(module, x_in_test, heldout_error.projection_target(x_orig_test, orig))
        stats["params"] = methods.count_parameters(module)
        stats["dense_params"] = stats["params"]
        return {"o_proj": stats}

    fit_units(ctx, spec, seed, layer_set, i, ("o_proj",), fit_o, saved, replacements, info)
