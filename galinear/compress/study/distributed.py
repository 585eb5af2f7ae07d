"""Work spread over the ranks of ``torchrun`` (torch.distributed; gloo on CPU, nccl on GPU).

Plain values and rules, no loop of its own: :class:`Ranks` (this process's rank, the number of
processes, the barrier), the threads a rank takes (:func:`default_threads`), and the share of one
stage's units a rank does (:func:`share`): the units, anything with an estimated ``cost``, dealt
out longest first to the least loaded rank (:func:`deal`), a rule every rank computes alike, so
no two ranks ever do one unit. The caller computes the same stages on every rank, does its share
of each and passes a barrier after it, so a stage may read what any rank wrote in the stages
before it. What the units of a compression study are, and what they cost, is
:mod:`galinear.compress.study.units`' business; nothing here knows the study.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

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


def share(ranks: Ranks, units: list) -> list:
    """This rank's units of one stage, in the stage's order: ``units`` (each with a ``cost``, an
    estimate in any unit common to the stage) dealt out by :func:`deal`."""
    owners = deal([unit.cost for unit in units], ranks.size)
    return [unit for unit, owner in zip(units, owners) if owner == ranks.rank]


__all__ = ["BARRIER_TIMEOUT_HOURS", "Ranks", "current", "deal", "default_threads", "init_from_env", "share"]
