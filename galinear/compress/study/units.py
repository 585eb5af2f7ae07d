"""A compression study under ``torchrun``: its work as the stages and units that
:func:`galinear.compress.study.distributed.run` spreads over the ranks (the orchestrator,
:meth:`galinear.compress.orchestrator.Study.run`, passes the plan in).

Every rank loads the model and the texts and computes the same plan; the work is then done in
stages separated by barriers, each stage's units shared out by a fixed rule, so no two ranks
ever write one file:

1. **shared**: the files that units of several ranks read, each made by one rank: the original
   network's captures at every layer an Adam fit needs (training, test and validation rows),
   the original second moments for closed-form fits of a set's first layer, the o_proj inputs
   (``--refit-o-proj``), the residual stream entering each set's first layer (evaluation), and
   the original model's ln PPL per text;
2. **fits, depth d = 0, 1, ...**: the fit of the d-th layer of every (method, seed, layer set)
   (the q/k/v of one layer in the network whose earlier layers of the set are replaced, the
   unit of the single-process study); it reads the checkpoints of depth d - 1, finished in the
   previous stage. Units shared by several sets (the pair {16, 17} reuses {16}'s fit of 16)
   are one unit;
3. **evaluation**: ln PPL of every (method, seed, layer set) on every text, from the checkpoints.

The plan is plain values: the captures and fits are calls on the captures cache and the fits of
:mod:`galinear.compress.study.layers`; the evaluations are :class:`Evaluate` and
:class:`EvaluateOriginal` values, which the orchestrator does itself. Nothing here calls back into
it: what it knows of the results so far comes in as values (the runs still pending, the
evaluations already recorded).

Estimated costs (what the units are dealt out by): a fit its method record's ``cost`` (a network
fit 20, others 1), an evaluation 1 per text, a residual stream 0.5, any other unit 1.
Rank r records its evaluations in ``results-rank<r>.json``; after the last barrier rank 0
merges them into ``results.json`` and writes the report. Units whose files are on disk are
skipped, so a run killed anywhere is resumed by running the same command again (with any number
of ranks). Across several machines the output folder must be one shared file system.
"""
from __future__ import annotations

from dataclasses import dataclass

from galinear.compress.study import layers
from galinear.compress.study.distributed import Unit
from galinear.compress.study.values import Fitting

EVALUATION_COST = 1.0  # a text


@dataclass(frozen=True)
class Evaluate:
    """The evaluation stage's unit of one (method, seed, layer set) run: its fits read back from their
    checkpoints, kept and scored on every text (the orchestrator's ``run_one``)."""

    name: str
    seed: int
    layer_set: tuple


@dataclass(frozen=True)
class EvaluateOriginal:
    """ln PPL of the original model on one text (the orchestrator's ``evaluate_original``)."""

    dataset: str


def stages(plan, fitting: Fitting, datasets: list, pending: set, evaluated: set) -> list:
    """[(stage name, [Unit, Evaluate or EvaluateOriginal, ...]), ...] of what is left of the
    (method, seed, layer set) runs of ``plan``, in order. ``fitting``: the study's values (settings,
    store, captures cache); ``datasets``: what ln PPL is measured on; ``pending``: the runs of
    ``plan`` with a row not evaluated yet or a model not kept; ``evaluated``: the keys
    (``original|<text>``) results.json holds."""
    c, store, captures = fitting.config, fitting.store, fitting.captures
    shared, depths, evaluations = {}, {}, []
    for name, seed, layer_set in plan:
        spec = c.method_spec(name)
        waiting = (name, seed, layer_set) in pending
        if waiting:
            evaluations.append(Evaluate(name, seed, tuple(layer_set)))
            first = layer_set[0]
            if captures.skip_lower_layers and first > 0:
                for d in captures.windows:
                    shared[("residual", d, first)] = (0.5, lambda d=d, L=first: captures.start(d, L))
            if spec.moment_fit and c.until_converged:  # the closed-form fit's validation point
                shared[("valid", first)] = (1.0, lambda L=first: captures.valid(L, {}, None))
        for i, layer in enumerate(layer_set):
            prefix = tuple(layer_set[:i])
            unit = (spec.tag(), seed, prefix + (layer,))
            if unit in depths.get(i, {}) or store.unit_done(spec, seed, prefix, layer):
                continue
            waiting = True
            depths.setdefault(i, {})[unit] = Unit(
                f"fit {name} seed {seed} layers {prefix + (layer,)}", spec.method.cost,
                lambda sp=spec, s=seed, ls=prefix + (layer,): layers.fit_layer_set(fitting, sp, s, ls))
            if spec.moment_fit and not prefix:
                shared[("moments", layer)] = (1.0, lambda L=layer: captures.moments(L, {}, f"original-attn_in-L{L}"))
            if spec.max_steps and not spec.moment_fit and not prefix:
                shared[("valid", layer)] = (1.0, lambda L=layer: captures.valid(L, {}, None))
            if c.refit_o_proj:
                shared[("o_in", layer)] = (1.0, lambda L=layer: captures.original(L, "o_in"))
        if waiting and not spec.moment_fit:  # an Adam set reads the original capture of each of its layers
            for layer in layer_set:
                shared[("capture", layer)] = (1.0, lambda L=layer: captures.original(L))
    out = [("shared", [Unit(" ".join(map(str, key)), cost, work) for key, (cost, work) in shared.items()]
            + [EvaluateOriginal(d) for d in datasets if f"original|{d}" not in evaluated])]
    out += [(f"fits at depth {i}", list(depths[i].values())) for i in sorted(depths)]
    out.append(("evaluation", evaluations))
    return out


__all__ = ["EVALUATION_COST", "Evaluate", "EvaluateOriginal", "stages"]
