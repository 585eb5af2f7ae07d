"""A compression study spread over the ranks of ``torchrun`` (torch.distributed; gloo on CPU, nccl on GPU).

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

Within a stage the units are dealt out longest first to the least loaded rank (estimated
costs: a rotor network fit 20, an evaluation 1 per text, a residual stream 0.5, any other
unit 1) - a rule every rank computes alike.
Rank r records its evaluations in ``results-rank<r>.json``; after the last barrier rank 0
merges them into ``results.json`` and writes the report. Units whose files are on disk are
skipped, so a run killed anywhere is resumed by running the same command again (with any number
of ranks). Across several machines the output folder must be one shared file system.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from galinear.compress.store import set_name

ROTOR_COST = 20
BARRIER_TIMEOUT_HOURS = 72  # a stage waits this long for its slowest rank


@dataclass(frozen=True)
class Ranks:
    """This process's rank and the number of processes (1: no torch.distributed)."""

    rank: int = 0
    size: int = 1

    def barrier(self) -> None:
        if self.size > 1:
            import torch.distributed as dist

            dist.barrier()


def current() -> Ranks:
    """The ranks of the initialised default process group, or a single process."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return Ranks(dist.get_rank(), dist.get_world_size())
    return Ranks()


def init_from_env() -> Ranks:
    """Join the process group that ``torchrun`` describes (WORLD_SIZE, RANK, MASTER_ADDR, ...).

    nccl when CUDA is available (each rank on GPU LOCAL_RANK), gloo otherwise. Without torchrun
    (WORLD_SIZE unset or 1) nothing happens and a single process is returned.
    """
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return current()
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, timeout=timedelta(hours=BARRIER_TIMEOUT_HOURS))
    return current()


def default_threads(ranks: Ranks) -> int | None:
    """Threads per rank when several ranks share a machine and ``--threads`` is not given: the
    machine's cores divided among its local ranks (torchrun's LOCAL_WORLD_SIZE); None (the
    libraries' own default) for a single process."""
    if ranks.size <= 1:
        return None
    local = int(os.environ.get("LOCAL_WORLD_SIZE", ranks.size))
    return max(1, (os.cpu_count() or 1) // max(1, local))


def deal(costs: list, size: int) -> list:
    """The rank of each unit: longest first, each to the least loaded rank (ties: lower rank)."""
    load = [0.0] * size
    owner = [0] * len(costs)
    for index in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        rank = min(range(size), key=lambda r: (load[r], r))
        owner[index] = rank
        load[rank] += costs[index]
    return owner


def _fit_cost(spec) -> float:
    return ROTOR_COST if spec.name in ("rotor", "givens") else 1.0


def stages(study, plan) -> list:
    """[(stage name, [(label, cost, work), ...]), ...] of what is left to do, in order."""
    c = study.config
    store = study.store
    shared, depths, evaluations = {}, {}, []
    for name, seed, layer_set in plan:
        spec = c.method_spec(name)
        keys = [f"{spec.tag()}|s{seed}|{set_name(layer_set)}|{d}" for d in study.eval_datasets]
        pending = not all(study._evaluated(k) for k in keys)
        if pending:
            evaluations.append((f"evaluate {name} seed {seed} layers {layer_set}", float(len(keys)),
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
            depths.setdefault(i, {})[unit] = (f"fit {name} seed {seed} layers {prefix + (layer,)}", _fit_cost(spec),
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
    out = [("shared", [(" ".join(map(str, key)), cost, work) for key, (cost, work) in shared.items()])]
    out += [(f"fits at depth {i}", list(depths[i].values())) for i in sorted(depths)]
    out.append(("evaluation", evaluations))
    return out


def run(study, report: bool = True) -> dict:
    """Do this rank's share of every stage; rank 0 then writes results.json and the report."""
    ranks = study.ranks
    ranks.barrier()  # every rank has loaded; nothing is written before the plan is read alike
    study.results, study._own_results = study.store.load_results(study.log, ranks.rank)
    todo = stages(study, study.plan())
    ranks.barrier()
    for stage, units in todo:
        owners = deal([cost for _, cost, _ in units], ranks.size)
        mine = [(label, work) for (label, _, work), r in zip(units, owners) if r == ranks.rank]
        for number, (label, work) in enumerate(mine, 1):
            if study.config.progress:
                print(f"[rank {ranks.rank}] {stage} [{number}/{len(mine)}] {label}", flush=True)
            work()
        ranks.barrier()
    study.results, study._own_results = study.store.load_results(study.log, ranks.rank)
    if ranks.rank == 0:
        study.store.save_results(study.results)
        if report:
            study.write_report()
        if study.config.save_dir:
            study.write_index()
    return study.results
