"""Fitting the layers of one (method, seed, layer set): plain functions of a
:class:`~galinear.compress.study.values.Fitting` (model, settings, store, captures cache, log) and a
:class:`~galinear.compress.study.values.Unit` (method, seed, layer set, depth), each returning its
:class:`~galinear.compress.study.values.FitResult` values; nothing they are given is changed.

A layer set is fitted layer after layer (:func:`fit_layer_set`), each on the network whose earlier
layers of the set are replaced; one layer is one call of :func:`fit_layer` (a study's
:class:`~galinear.compress.study.units.Fit`), given the results of the layers before it. Within a
layer the targets are fitted stage by stage in forward order
(:func:`galinear.compress.methods.targets.stages`): projection by projection by Adam
(:mod:`galinear.compress.fitting.projection`, :mod:`galinear.compress.fitting.converge`), from
second moments (:mod:`galinear.compress.fitting.closed_form`), or jointly to a block's output
(:mod:`galinear.compress.fitting.objective`); then, with ``--refit-o-proj``, a dense o_proj.

A layer's checkpoints are read once, when the layer starts (:meth:`Store.saved_unit
<galinear.compress.storage.store.Store.saved_unit>`): what they hold decides whether the layer was
loaded, whether a stage needs its inputs captured, and which units are fitted.
"""
from __future__ import annotations

import time

from galinear.compress.fitting import closed_form, converge, heldout_error, objective, projection, seeds
from galinear.compress.fitting.surgery import freeze
from galinear.compress.methods import catalogue as methods
from galinear.compress.methods import targets as targeting
from galinear.compress.study import sequential
from galinear.compress.study.values import FitResult, FitStats, Fitting, LayerSetFit, Unit
from galinear.lm import models

__all__ = ["fit_layer", "fit_layer_set", "unit_record"]


def fit_layer_set(fitting: Fitting, spec, seed: int, layer_set) -> LayerSetFit:
    """Fit (or load) every unit of ``layer_set`` for one method and seed, layer after layer
    (:func:`fit_layer`), each on the network whose earlier layers of the set are replaced.

    Every layer is checkpointed before the next starts (a rerun resumes at the first layer
    without its files); sets of several layers log one line per layer with the time left, and
    the in-memory captures of a layer are released once it is fitted
    (:meth:`galinear.compress.study.captures.Captures.release`).
    """
    results: dict = {}
    progress = sequential.LayerProgress.of_run(spec.tag(), seed, layer_set, fitting.log)
    for depth in range(len(layer_set)):
        progress.start()
        results = fit_layer(fitting, Unit(spec, seed, tuple(layer_set), depth), results, progress,
                            release=len(layer_set) > 1).results
    return LayerSetFit(results)


def fit_layer(fitting: Fitting, unit: Unit, before: dict, progress: sequential.LayerProgress | None = None,
              release: bool = False) -> LayerSetFit:
    """Fit (or load) the units of one layer, ``unit.layer``, in the network whose earlier layers of
    the set are replaced by ``before`` (their ``{(layer, projection): FitResult}``): the targets
    stage by stage in forward order (:func:`galinear.compress.methods.targets.stages`), by Adam
    projection by projection, from second moments, or jointly to a block's output; then, with
    ``--refit-o-proj``, a dense o_proj. Returns ``before`` with this layer's results added.

    ``progress`` (:class:`galinear.compress.study.sequential.LayerProgress` of the set) logs the
    layer's line; ``release``: the layer's in-memory captures are released once it is fitted.
    """
    layer, results = unit.layer, dict(before)
    saved = fitting.store.saved_unit(unit.spec, unit.seed, unit.prefix, layer)
    for projections, block in targeting.stages(fitting.config.targets, unit.spec.objective):
        if unit.spec.moment_fit:
            fitted = _fit_closed_form(fitting, unit, saved, results, projections)
        elif block is not None:  # fitted jointly (galinear.compress.fitting.objective)
            fitted = _fit_joint(fitting, unit, saved, results, tuple(projections), block)
        else:
            fitted = _fit_projections(fitting, unit, saved, results, projections)
        results = {**results, **{(layer, p): r for p, r in fitted.items()}}
    if fitting.config.refit_o_proj:
        results = {**results, (layer, "o_proj"): _refit_o_proj(fitting, unit, saved, results)}
    if progress is not None:
        progress.done(unit.depth, all(p in saved for p in fitting.store.unit_projections()))
    if release:
        fitting.captures.release(layer)
    return LayerSetFit(results)


def _held(saved: dict, projections) -> dict | None:
    """``{projection: record}`` of ``projections`` when every one is among ``saved``, else None."""
    if not all(p in saved for p in projections):
        return None
    return {p: saved[p] for p in projections}


def _refit_unit(config, proj: str) -> bool:
    """Whether ``proj`` is the o_proj refit (``--refit-o-proj``) rather than a replaced target."""
    return proj == "o_proj" and "o_proj" not in config.targets


def _fresh(fitting: Fitting, unit: Unit, projections) -> dict:
    """``{projection: module}``: new replacements of ``projections`` at the unit's layer, each
    initialised under the seed :func:`galinear.compress.fitting.seeds.fit_seed` gives it
    (:func:`galinear.compress.methods.targets.slot`), the o_proj refit as the original o_proj."""
    import torch

    modules = {}
    for proj in projections:
        orig = models.projection(fitting.model, unit.layer, proj)
        if _refit_unit(fitting.config, proj):
            module = torch.nn.Linear(orig.in_features, orig.out_features, bias=orig.bias is not None)
            module.load_state_dict(orig.state_dict())
        else:
            torch.manual_seed(seeds.fit_seed(unit.seed, unit.layer, targeting.slot(proj)))
            module = methods.build_module(unit.spec, orig.in_features, orig.out_features, bias=orig.bias is not None)
        modules[proj] = module
    return modules


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


def _kept(fitting: Fitting, unit: Unit, modules: dict, saved: dict, stats: dict | None = None) -> dict:
    """``{projection: FitResult}`` of ``modules``: freshly fitted (``stats``: ``{projection: stats}``),
    each record saved atomically before anything uses it (one checkpoint a projection,
    :meth:`galinear.compress.storage.store.Store.save_unit`), so a run killed anywhere leaves whole
    records and a rerun resumes at the first unit without them; or (``stats`` None) given back
    their states from ``saved``."""
    held = _held(saved, modules)
    if stats is not None:  # o_proj's record names neither method nor seed
        held = {p: unit_record(m, stats[p], unit.layer, p,
                               *((None, None) if _refit_unit(fitting.config, p) else (unit.spec, unit.seed)))
                for p, m in modules.items()}
        fitting.store.save_unit(unit.spec, unit.seed, unit.prefix, unit.layer, held)
    else:
        for proj, module in modules.items():
            module.load_state_dict(held[proj]["state"])
    return {p: FitResult(freeze(m), FitStats.from_dict(held[p]["stats"])) for p, m in modules.items()}


def _each(fitting: Fitting, unit: Unit, saved: dict, projections):
    """For each of ``projections`` fitted on its own: (projection, fresh module, original projection,
    its FitResult when ``saved`` holds it, else None)."""
    for proj in projections:
        modules = _fresh(fitting, unit, (proj,))
        loaded = _kept(fitting, unit, modules, saved)[proj] if _held(saved, (proj,)) is not None else None
        yield proj, modules[proj], models.projection(fitting.model, unit.layer, proj), loaded


def _fit_joint(fitting: Fitting, unit: Unit, saved: dict, results: dict, projections: tuple, block: str) -> dict:
    """The replacements of ``projections`` fitted jointly to ``block``'s output
    (:func:`galinear.compress.fitting.objective.fit_joint`), or loaded."""
    modules = _fresh(fitting, unit, projections)
    if _held(saved, projections) is not None:
        return _kept(fitting, unit, modules, saved)
    replacements = {key: r.module for key, r in results.items()}
    stats = objective.fit_joint(modules, fitting.captures, fitting.model, unit.spec, unit.seed, unit.layer_set,
                                unit.depth, replacements, block, log=fitting.log, bars=fitting.bars)
    return _kept(fitting, unit, modules, saved, stats)


def _fit_projections(fitting: Fitting, unit: Unit, saved: dict, results: dict,
                     projections=models.PROJECTIONS) -> dict:
    """Fit each replacement of ``projections`` (which read one input) at the unit's layer on its own
    by Adam (:mod:`galinear.compress.fitting.projection`, or until converged,
    :mod:`galinear.compress.fitting.converge`), or load it; ``{projection: FitResult}``."""
    captures, layer, spec = fitting.captures, unit.layer, unit.spec
    replacements = {key: r.module for key, r in results.items()}
    where = targeting.INPUTS[projections[0]]
    key = captures.stage_key(spec, unit.seed, unit.layer_set, unit.depth, where, replacements)
    x_orig, x_orig_test = captures.original(layer, where)
    x_in, x_in_test = x_orig, x_orig_test
    if not key.startswith("original-") and _held(saved, projections) is None:
        x_in, x_in_test = captures.pair(layer, where, replacements, key)
    out = {}
    for proj, module, orig, loaded in _each(fitting, unit, saved, projections):
        if loaded is not None:
            out[proj] = loaded
            continue
        label, seed = fitting.label(f"fit {spec.name} s{unit.seed} L{layer} {proj}"), seeds.fit_seed(
            unit.seed, layer, targeting.slot(proj))
        t0 = time.perf_counter()
        if spec.max_steps:
            xv_in, xv_orig = captures.valid(layer, replacements, key, where)
            stats = converge.fit_until_converged(
                module, x_in, x_orig, orig.weight, valid_inputs=xv_in, valid_target_inputs=xv_orig,
                lr=spec.learning_rate, bias=orig.bias, batch_size=spec.batch_size, seed=seed,
                max_steps=spec.max_steps, eval_every=spec.eval_every, patience=spec.patience, progress=label)
        else:
            stats = projection.fit_projection(module, x_in, x_orig, orig.weight, lr=spec.learning_rate,
                                              epochs=spec.epochs, batch_size=spec.batch_size, seed=seed,
                                              bias=orig.bias, progress=label)
        stats["seconds"] = time.perf_counter() - t0
        fitting.log(projection.summary(f"{unit.name} {proj}", stats))
        stats = dict(stats, **heldout_error.test_stats(module, orig, x_in_test, x_orig_test))
        out.update(_kept(fitting, unit, {proj: module}, saved, {proj: stats}))
    return out


def _fit_closed_form(fitting: Fitting, unit: Unit, saved: dict, results: dict,
                     projections=models.PROJECTIONS) -> dict:
    """Set each replacement of ``projections`` (which read one input) at the unit's layer from the
    second moments of all training rows: the exact optimum (LR*, BH*), or Adam on the exact all-row
    MSE (rotorlin-m); or load it. ``{projection: FitResult}``."""
    layer, spec = unit.layer, unit.spec
    where = targeting.INPUTS[projections[0]]
    if _held(saved, projections) is None:
        replacements = {key: r.module for key, r in results.items()}
        key = fitting.captures.stage_key(spec, unit.seed, unit.layer_set, unit.depth, where, replacements)
        train_m, test_m = fitting.captures.moments(layer, replacements, key, where)
    out = {}
    for proj, module, orig, loaded in _each(fitting, unit, saved, projections):
        if loaded is not None:
            out[proj] = loaded
            continue
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
        fitting.log(f"{'closed-form' if spec.closed_form else 'moment-fitted'} {spec.tag()} L{layer} {proj}: "
                    f"train MSE {stats['train_mse']:.4g}, test MSE {stats['test_mse']:.4g}"
                    + (f" ({stats['steps']} steps, best at {stats['best_step']})" if stats["steps"] else "")
                    + (f", ridge {stats['ridge']:.3g}" if stats["ridge"] else ""))
        out.update(_kept(fitting, unit, {proj: module}, saved, {proj: stats}))
    return out


def _refit_o_proj(fitting: Fitting, unit: Unit, saved: dict, results: dict) -> FitResult:
    """Refit a dense o_proj, started from the original one, to the original o_proj outputs (AdamW);
    or load it."""
    import torch

    layer, spec = unit.layer, unit.spec
    modules = _fresh(fitting, unit, ("o_proj",))
    if _held(saved, ("o_proj",)) is not None:
        return _kept(fitting, unit, modules, saved)["o_proj"]
    module, orig = modules["o_proj"], models.projection(fitting.model, layer, "o_proj")
    replacements = {key: r.module for key, r in results.items()}
    x_orig, x_orig_test = fitting.captures.original(layer, "o_in")
    x_in, x_in_test = fitting.captures.pair(layer, "o_in", replacements,
                                            fitting.store.o_input_key(spec, unit.seed, unit.layer_set[:unit.depth + 1]))
    label = fitting.label(f"refit o_proj {spec.name} s{unit.seed} L{layer}")
    torch.manual_seed(unit.seed)
    stats = projection.fit_projection(module, x_in, x_orig, orig.weight, lr=1e-4, epochs=fitting.config.o_epochs,
                                      batch_size=256, seed=seeds.fit_seed(unit.seed, layer, seeds.O_PROJ_SLOT),
                                      bias=orig.bias, weight_decay=1e-2, optimizer="adamw", progress=label)
    stats["test_mse"] = heldout_error.mse(module, x_in_test, heldout_error.projection_target(x_orig_test, orig))
    stats["params"] = methods.count_parameters(module)
    stats["dense_params"] = stats["params"]
    return _kept(fitting, unit, modules, saved, {"o_proj": stats})["o_proj"]
