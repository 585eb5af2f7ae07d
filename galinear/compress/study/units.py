"""The work of a compression study as one graph of units (:func:`plan`), run in order by a single
process and dealt out stage by stage over the ranks of ``torchrun``; the orchestrator
(:class:`galinear.compress.orchestrator.Study`) does both from the same :class:`Graph`.

The units are plain values, each with the units it reads (:attr:`Graph.needs`):

* :class:`Capture`: a file that fits of several methods, or the evaluations, read, made once: the
  original network's rows at a layer (the input of every stage a fit by Adam or jointly takes,
  and of o_proj with ``--refit-o-proj``), their second moments (a fit from second moments, closed
  form or rotorlin-m, of a set's first layer), the validation rows (the stopping rule of a set's first layer; the curve of a
  closed-form row with ``--until-converged``), the residual stream of the training and test
  windows a capture behind a replaced projection of a set's first layer starts from, and the
  residual stream of each text's held-out windows entering a set's first layer (evaluation);
* :class:`Fit`: the d-th layer of one (method, seed, layer set), fitted in the network whose
  earlier layers of the set are replaced (:func:`galinear.compress.study.layers.fit_layer`). It
  reads the last fit of an earlier layer of its set still to do (the layers on disk are read back
  from their checkpoints, which takes their original rows when a stage is fitted by Adam
  projection by projection) and the captures of its layer. A fit shared by several sets (the pair {16, 17} reuses {16}'s fit of 16) is one unit;
* :class:`Evaluate`: ln PPL of one (method, seed, layer set) run on every text, from its fits
  (the orchestrator's ``run_one``; fits not at hand are read back, as a fit reads its earlier
  layers), and :class:`EvaluateOriginal`, the original model's on one text.

Units whose results are on disk are left out (fits whose checkpoints are readable, runs whose rows
are evaluated and models kept, original evaluations recorded), and so is every capture and fit no
unit left in reads: a run killed anywhere is resumed by running the same command again, with
any number of ranks.

Orders of one graph:

* a single process (:attr:`Graph.runs`): run after run in the order of the study's plan, each
  run's units depth first (its fits layer after layer, then its evaluation), a unit shared with a
  later run done with the first run that needs it, and a capture just before the first unit that
  reads it; the original evaluations first. The report is written after each run;
* ``torchrun`` (:meth:`Graph.stages`): stage k holds the units whose longest chain of units they
  read is k long (the captures and the original evaluations first, then the fits depth by depth,
  the evaluations after the last fit of their run), so every unit reads only what earlier stages
  made. Each stage's units are dealt out by their estimated cost
  (:func:`galinear.compress.study.distributed.share`), and a barrier ends it: no two ranks ever
  write one file. Rank r records its evaluations in ``results-rank<r>.json``; after the last
  barrier rank 0 merges them into ``results.json`` and writes the report. Across several machines
  the output folder must be one shared file system.

Estimated costs: a fit its method record's ``cost`` (a network fit 20, others 1), an evaluation 1
per text, a held-out residual stream 0.5, any other capture 1.

The planner reads the settings, the store and the captures cache (:class:`Fitting`) and what the
orchestrator knows of the results so far, as values (the runs still pending, the original
evaluations recorded); nothing here calls back into it.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from galinear.compress.methods import targets as targeting
from galinear.compress.study.values import Fitting, Unit

EVALUATION_COST = 1.0  # a text
RESIDUAL_COST = 0.5  # the residual stream of one text's held-out windows

#: What a :class:`Capture` makes: the original rows of ``where`` at the layer (training and test),
#: their second moments, the validation rows, the residual stream of the training and test windows
#: entering the layer, and that of one text's held-out windows.
CAPTURE_KINDS = ("capture", "moments", "valid", "split residual", "residual")


@dataclass(frozen=True)
class Capture:
    """One shared capture: ``kind`` (one of :data:`CAPTURE_KINDS`) at ``layer`` of the original
    network, of the rows ``where`` reads (``residual``: of the held-out windows of ``dataset``)."""

    kind: str
    layer: int
    where: str = "attn_in"
    dataset: str | None = None

    @property
    def cost(self) -> float:
        return RESIDUAL_COST if self.kind == "residual" else 1.0

    @property
    def label(self) -> str:
        if self.kind == "residual":
            return f"residual {self.dataset} L{self.layer}"
        return f"{self.kind} L{self.layer}" + (f" {self.where}" if self.kind in ("capture", "moments", "valid") else "")

    def make(self, captures) -> None:
        """Make it (or read it back) through the study's captures cache
        (:class:`galinear.compress.study.captures.Captures`)."""
        if self.kind == "capture":
            captures.original(self.layer, self.where)
        elif self.kind == "moments":
            captures.moments(self.layer, {}, f"original-{self.where}-L{self.layer}", self.where)
        elif self.kind == "valid":
            captures.valid(self.layer, {}, None, self.where)
        elif self.kind == "split residual":
            captures.split_residuals(self.layer)
        else:
            captures.start(self.dataset, self.layer)


@dataclass(frozen=True)
class Fit:
    """The fit of ``layers[-1]`` for one method (its ``tag``) and seed, in the network whose
    ``layers[:-1]`` (the layers of the set before it) are replaced. ``spec``: the method;
    ``layer_set``: the set of the first run that needs it (its progress lines; a layer of a set of
    several has its in-memory captures released once fitted); ``cost``: its estimate."""

    tag: str
    seed: int
    layers: tuple
    spec: object = field(default=None, compare=False)
    layer_set: tuple = field(default=(), compare=False)
    cost: float = field(default=1.0, compare=False)

    @property
    def depth(self) -> int:
        return len(self.layers) - 1

    @property
    def unit(self) -> Unit:
        """The unit of fitting it is (:class:`galinear.compress.study.values.Unit`)."""
        return Unit(self.spec, self.seed, self.layers, self.depth)

    @property
    def before(self) -> Fit | None:
        """The fit of the layer before it in the set (None at depth 0)."""
        return Fit(self.tag, self.seed, self.layers[:-1]) if self.depth else None

    @property
    def label(self) -> str:
        return f"fit {self.spec.name} seed {self.seed} layers {self.layers}"


@dataclass(frozen=True)
class Evaluate:
    """One (method, seed, layer set) run's fits read back (or taken from the fit just done), its
    models kept and scored on every text (the orchestrator's ``run_one``); ``cost``: its estimate."""

    name: str
    seed: int
    layer_set: tuple
    cost: float = field(default=EVALUATION_COST, compare=False)

    @property
    def label(self) -> str:
        return f"evaluate {self.name} seed {self.seed} layers {self.layer_set}"


@dataclass(frozen=True)
class EvaluateOriginal:
    """ln PPL of the original model on one text (the orchestrator's ``evaluate_original``)."""

    dataset: str

    cost = EVALUATION_COST

    @property
    def label(self) -> str:
        return f"original {self.dataset}"


def _stage(unit) -> str:
    if isinstance(unit, Fit):
        return f"fits at depth {unit.depth}"
    return "evaluations" if isinstance(unit, Evaluate) else "shared"


@dataclass(frozen=True)
class Graph:
    """The units of a study and what each reads.

    ``needs``: ``{unit: (units it reads, ...)}``, every unit in the single-process order (a
    topological order); ``runs``: ``((run, (unit, ...)), ...)``, that order cut by run: the original
    evaluations first (run None), then every (method, seed, layer set) run of the plan with the
    units first needed by it (none for a run already done)."""

    needs: dict
    runs: tuple

    def order(self) -> list:
        """Every unit in the single-process order."""
        return [unit for _, units in self.runs for unit in units]

    def stages(self) -> list:
        """``[(stage name, [unit, ...]), ...]``: the units by the length of the longest chain of
        units they read, each stage in the single-process order; named by what it holds."""
        level = {}
        for unit in self.order():
            level[unit] = 1 + max((level[d] for d in self.needs[unit]), default=-1)
        out = []
        for k in range(1 + max(level.values(), default=-1)):
            units = [u for u in self.order() if level[u] == k]
            names = list(dict.fromkeys(_stage(u) for u in units))
            out.append((" and ".join(names), units))
        return out

    def consumers(self) -> Counter:
        """``{unit: how many units read it}``."""
        return Counter(d for deps in self.needs.values() for d in deps)


def _inputs(spec, targets) -> list:
    """The rows of the original network each stage of a layer's fit by Adam or jointly reads
    (:func:`galinear.compress.methods.targets.stages`), in forward order."""
    out = []
    for projections, block in targeting.stages(targets, spec.objective):
        where = targeting.INPUTS[projections[0]] if block is None else ("mlp_in" if block == "mlp" else "attn_in")
        out.append(where)
    return list(dict.fromkeys(out))


def _read_back(fitting: Fitting, spec, layers) -> list:
    """The shared captures that reading the fits of ``layers`` back from their checkpoints reads:
    a stage fitted by Adam projection by projection takes its original rows even when its units
    are on disk (:func:`galinear.compress.study.layers.fit_layer`)."""
    if spec.moment_fit:
        return []
    wheres = [targeting.INPUTS[projections[0]]
              for projections, block in targeting.stages(fitting.config.targets, spec.objective) if block is None]
    return [Capture("capture", layer, where) for layer in layers for where in dict.fromkeys(wheres)]


def _fit_captures(fitting: Fitting, spec, layer: int, depth: int) -> list:
    """The shared captures a fit of ``layer`` at ``depth`` reads."""
    c, captures = fitting.config, fitting.captures
    stages = targeting.stages(c.targets, spec.objective)
    out = []
    if spec.moment_fit:  # from second moments (galinear.compress.study.layers._fit_closed_form)
        if not depth:
            where = targeting.INPUTS[stages[0][0][0]]
            out.append(Capture("moments", layer, where))
    else:
        wheres = _inputs(spec, c.targets)
        out += [Capture("capture", layer, where) for where in wheres]
        if spec.max_steps and not depth:
            out.append(Capture("valid", layer, wheres[0]))
    if c.refit_o_proj:
        out.append(Capture("capture", layer, "o_in"))
    behind = c.refit_o_proj or (not spec.moment_fit and len(stages) > 1)  # a capture behind this layer's own fits
    if behind and not depth and layer > 0 and captures.skip_lower_layers and captures.shard_windows is None:
        out.append(Capture("split residual", layer))
    return out


def plan(runs, fitting: Fitting, datasets: list, pending: set, evaluated: set) -> Graph:
    """The :class:`Graph` of what is left of the (method, seed, layer set) ``runs`` (the study's
    plan, in order). ``fitting``: the study's values (settings, store, captures cache);
    ``datasets``: what ln PPL is measured on; ``pending``: the runs with a row not evaluated yet or
    a model not kept; ``evaluated``: the keys (``original|<text>``) results.json holds."""
    c, store, captures = fitting.config, fitting.store, fitting.captures
    needs, done = {}, set()

    def fit(spec, seed, layer_set, depth, before):
        unit = Fit(spec.tag(), seed, tuple(layer_set[:depth + 1]), spec, tuple(layer_set), spec.method.cost)
        if unit in needs:
            return unit
        if unit in done or store.unit_done(spec, seed, unit.layers[:-1], unit.layers[-1]):
            done.add(unit)
            return before  # on disk: what comes after it reads the last fit still to do
        reads = [before] if before is not None else []  # and the layers before it, read back when not at hand
        reads += _read_back(fitting, spec, unit.layers[:-1]) + _fit_captures(fitting, spec, unit.layers[-1], depth)
        needs[unit] = tuple(dict.fromkeys(reads))
        return unit

    original = [EvaluateOriginal(d) for d in datasets if f"original|{d}" not in evaluated]
    needs.update({unit: () for unit in original})
    tops = [(None, original)]
    for name, seed, layer_set in runs:
        layer_set = tuple(layer_set)
        if (name, seed, layer_set) not in pending:
            tops.append(((name, seed, layer_set), []))
            continue
        spec = c.method_spec(name)
        last = None
        for depth in range(len(layer_set)):
            last = fit(spec, seed, layer_set, depth, last)
        reads = ([last] if last is not None else []) + _read_back(fitting, spec, layer_set)
        first = layer_set[0]
        if captures.skip_lower_layers and first > 0:
            reads += [Capture("residual", first, dataset=d) for d in captures.windows]
        if spec.moment_fit and c.until_converged:  # the closed-form row's validation point
            reads.append(Capture("valid", first))
        evaluation = Evaluate(name, seed, layer_set, EVALUATION_COST * len(datasets))
        needs[evaluation] = tuple(dict.fromkeys(reads))
        tops.append(((name, seed, layer_set), [evaluation]))
    for unit in [d for deps in list(needs.values()) for d in deps]:
        needs.setdefault(unit, ())
    placed: dict = {}

    def place(unit, into: list) -> None:  # depth first: what a unit reads just before it
        for dep in needs[unit]:
            if dep not in placed:
                place(dep, into)
        placed[unit] = True
        into.append(unit)

    out = []
    for run, units in tops:
        group: list = []
        for unit in units:
            place(unit, group)
        out.append((run, tuple(group)))
    return Graph({unit: needs[unit] for unit in placed}, tuple(out))


__all__ = ["CAPTURE_KINDS", "EVALUATION_COST", "RESIDUAL_COST", "Capture", "Evaluate", "EvaluateOriginal", "Fit",
           "Graph", "plan"]
