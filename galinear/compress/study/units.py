"""A compression study under ``torchrun``: its work as the stages and units that
:func:`galinear.compress.study.distributed.run` spreads over the ranks.

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

Estimated costs (what the units are dealt out by): a rotor network fit 20, an evaluation 1 per
text, a residual stream 0.5, any other unit 1.
Rank r records its evaluations in ``results-rank<r>.json``; after the last barrier rank 0
merges them into ``results.json`` and writes the report. Units whose files are on disk are
skipped, so a run killed anywhere is resumed by running the same command again (with any number
of ranks). Across several machines the output folder must be one shared file system.
"""
from __future__ import annotations

from galinear.compress.study import distributed
from galinear.compress.study.distributed import Unit

ROTOR_COST = 20


def _fit_cost(spec) -> float:
    return ROTOR_COST if spec.name in ("rotor", "givens") else 1.0


def stages(study, plan) -> list:
    """[(stage name, [Unit, ...]), ...] of what is left of the (method, seed, layer set) runs of
    ``plan``, in order."""
    c = study.config
    store = study.store
    shared, depths, evaluations = {}, {}, []
    for name, seed, layer_set in plan:
        spec = c.method_spec(name)
        pending = study.pending(name, seed, layer_set)
        if pending:
            evaluations.append(Unit(f"evaluate {name} seed {seed} layers {layer_set}", float(len(study.eval_datasets)),
                                    lambda n=name, s=seed, ls=layer_set: study.run_one(n, s, ls)))
            first = layer_set[0]
            if study.skip_lower_layers and first > 0:
                for d in study.windows:
                    shared[("residual", d, first)] = (0.5, lambda d=d, L=first: study._start(d, L))
            if spec.moment_fit and c.until_converged:  # the closed-form fit's validation point
                shared[("valid", first)] = (1.0, lambda L=first: study.valid_capture(L, {}, None))
        for i, layer in enumerate(layer_set):
            prefix = tuple(layer_set[:i])
            unit = (spec.tag(), seed, prefix + (layer,))
            if unit in depths.get(i, {}) or store.unit_done(spec, seed, prefix, layer):
                continue
            pending = True
            depths.setdefault(i, {})[unit] = Unit(
                f"fit {name} seed {seed} layers {prefix + (layer,)}", _fit_cost(spec),
                lambda sp=spec, s=seed, ls=prefix + (layer,): study.fit_layer_set(sp, s, ls))
            if spec.moment_fit and not prefix:
                shared[("moments", layer)] = (1.0, lambda L=layer: study.moments(L, {}, f"original-attn_in-L{L}"))
            if spec.max_steps and not spec.moment_fit and not prefix:
                shared[("valid", layer)] = (1.0, lambda L=layer: study.valid_capture(L, {}, None))
            if c.refit_o_proj:
                shared[("o_in", layer)] = (1.0, lambda L=layer: study.original_capture(L, "o_in"))
        if pending and not spec.moment_fit:  # an Adam set reads the original capture of each of its layers
            for layer in layer_set:
                shared[("capture", layer)] = (1.0, lambda L=layer: study.original_capture(L))
    for d in study.eval_datasets:
        if not study._evaluated(f"original|{d}"):
            shared[("original", d)] = (1.0, lambda d=d: study.evaluate_original([d]))
    out = [("shared", [Unit(" ".join(map(str, key)), cost, work) for key, (cost, work) in shared.items()])]
    out += [(f"fits at depth {i}", list(depths[i].values())) for i in sorted(depths)]
    out.append(("evaluation", evaluations))
    return out


def run(study, report: bool = True) -> dict:
    """Do this rank's share of the study's stages; rank 0 then writes results.json and the report."""
    ranks = study.ranks

    def plan():  # between the first two barriers: every rank reads the same results
        study.results, study._own_results = study.store.load_results(study.log, ranks.rank)
        return stages(study, study.plan())

    distributed.run(ranks, plan, progress=study.config.progress)
    study.results, study._own_results = study.store.load_results(study.log, ranks.rank)
    if ranks.rank == 0:
        study.store.save_results(study.results)
        if report:
            study.write_report()
        study.store.write_index()
    return study.results


__all__ = ["ROTOR_COST", "run", "stages"]
