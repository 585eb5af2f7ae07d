"""The plain values a study passes around: a unit of fitting (:class:`Unit`), what a fit returns
(:class:`FitResult` with its :class:`FitStats`, and :class:`LayerSetFit` for a whole layer set),
what the fits read (:class:`Fitting`: the model, the settings, the store, the captures cache, the
log), and the log itself (:class:`Log`).

The orchestrator (:class:`galinear.compress.orchestrator.Study`) builds a :class:`Fitting` once and
passes it in; fits return their results, nothing they are given is changed, and nothing here
calls back into the orchestrator.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # annotations only: the values are built by the orchestrator
    import torch

    from galinear.compress.methods.catalogue import MethodSpec
    from galinear.compress.storage.store import Store
    from galinear.compress.study.captures import Captures
    from galinear.compress.study.config import StudyConfig

__all__ = ["Fitting", "FitResult", "FitStats", "LayerSetFit", "Log", "Unit", "show_bars"]


class Log:
    """One line on stderr with the time since the study started (when ``verbose``), prefixed by the
    rank under torchrun (``rank``: None for a single process). ``echo``, when set, receives every
    message as well (a list's ``append`` collects them)."""

    def __init__(self, verbose: bool, rank: int | None = None):
        self.verbose, self.rank = verbose, rank
        self.t0 = time.perf_counter()
        self.echo: Callable[[str], object] | None = None

    def __call__(self, message: str) -> None:
        if self.echo is not None:
            self.echo(message)
        if self.verbose:
            who = f"rank {self.rank}: " if self.rank is not None else ""
            print(f"[{time.perf_counter() - self.t0:7.1f} s] {who}{message}", file=sys.stderr, flush=True)


def show_bars(progress: bool) -> bool:
    """tqdm bars only on a terminal (``progress`` on and stderr a tty); in a log, one line per unit instead."""
    return bool(progress and sys.stderr.isatty())


@dataclass(frozen=True)
class Fitting:
    """What the fits of a study read: the original ``model`` (replacements installed per call), the
    study's ``config``, its ``store`` and ``captures`` cache, ``log`` (takes one line) and ``bars``
    (whether fits show tqdm bars)."""

    model: torch.nn.Module
    config: StudyConfig
    store: Store
    captures: Captures
    log: Callable[[str], None]
    bars: bool

    def label(self, text: str) -> str | None:
        """``text`` as the label of a progress bar when bars are shown, else None (silent)."""
        return text if self.bars else None


@dataclass(frozen=True)
class Unit:
    """One unit of fitting: the layer ``layer_set[depth]`` of method ``spec`` (its record is
    ``spec.method``) and ``seed``, fitted in the network whose earlier layers of the set are replaced."""

    spec: MethodSpec
    seed: int
    layer_set: tuple
    depth: int

    @property
    def layer(self) -> int:
        return self.layer_set[self.depth]

    @property
    def prefix(self) -> tuple:
        """The layers of the set replaced before this one."""
        return tuple(self.layer_set[:self.depth])

    @property
    def name(self) -> str:
        return f"{self.spec.tag()} s{self.seed} L{self.layer}"


@dataclass(frozen=True)
class FitStats:
    """The numbers of one fitted replacement: its parameters and the original's, its held-out MSE
    and the mean square of that target (None for the o_proj refit), seconds, Adam steps, the best
    step and the learning curve of a converged fit; ``extra`` holds the rest a fit reports
    (``final_loss``, ``train_mse``, ``ridge``, ...). :meth:`to_dict` / :meth:`from_dict` are the
    form a checkpoint keeps."""

    params: int
    dense_params: int
    test_mse: float
    target_mean_square: float | None = None
    seconds: float = 0.0
    steps: int = 0
    best_step: int | None = None
    curve: list | None = None
    valid_target_mean_square: float | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, stats: dict) -> FitStats:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: v for k, v in stats.items() if k in names}
        return cls(**known, extra={k: v for k, v in stats.items() if k not in names})

    def to_dict(self) -> dict:
        out = dict(self.extra)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and (value is not None or f.name in ("test_mse",)):
                out[f.name] = value
        return out


@dataclass(frozen=True)
class FitResult:
    """A fitted (or loaded) replacement, frozen, and its statistics."""

    module: torch.nn.Module
    stats: FitStats


@dataclass(frozen=True)
class LayerSetFit:
    """Every replacement of one (method, seed, layer set): ``{(layer, projection): FitResult}``."""

    results: dict

    @property
    def replacements(self) -> dict:
        """``{(layer, projection): module}``."""
        return {key: r.module for key, r in self.results.items()}

    @property
    def stats(self) -> dict:
        """``{(layer, projection): FitStats}``."""
        return {key: r.stats for key, r in self.results.items()}
