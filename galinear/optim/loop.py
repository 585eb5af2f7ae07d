"""The optimiser loop of galinear, its optimisers, learning-rate schedule, mini-batches and stopping rule.

Every gradient fit runs through :func:`train`: the five fits of :mod:`galinear.compress.fitting`
(one projection for fixed steps or until converged, a layer's q, k and v jointly, a linear rotor on
second moments, the distillation of a whole model) and the training runs of ``galinear train-lm``
(:func:`galinear.train.lm_loop.train_lm`) and ``galinear train-mlp``
(:func:`galinear.train.loop.train_classifier`, one call per epoch). What differs between them is an
argument of :func:`train`: the loss, the optimiser and its schedule, gradient clipping, how a step's
loss becomes a number (averaged over ranks in a distributed run), a stop rule, a callback after every
step, the stopping rule's validation with its checkpoint callback.

Step t = start + 1, ..., ``steps`` (t counts from 1):

1. ``stop(run)`` (if given) is asked first; True ends the run before the step;
2. the ``modules`` go to training mode (unless ``train_mode=False``);
3. ``loss(t)``: a differentiable scalar (a closure that draws its own rows, e.g. from :class:`Batches`);
4. zero_grad, backward, the global gradient norm over ``clip_params`` clipped to ``grad_clip`` (when
   > 0), the optimiser's step, the schedule's step;
5. the step's number ``loss_value(loss)`` (default ``loss.item()``); when it is not finite or above
   ``ceiling``, a FloatingPointError with the message ``nonfinite`` (after the step, so that every
   rank of a distributed run, which sees the same averaged number, stops at the same step);
6. ``on_step(run)`` (if given), with :attr:`Run.step`, the number in ``run.recent[-1]`` and the
   step's seconds (3 to 5) in :attr:`Run.step_seconds`.

With ``validate`` (the stopping rule): the modules in eval mode, ``validate()`` at step 0 (a run
that starts from its beginning) and after every ``eval_every``-th step and the last one, each value
given to a :class:`Plateau`; the parameters of the best check are kept and restored at the end,
the run stops at the plateau's end or after ``steps`` steps. Without it: ``steps`` steps, or fewer
when ``stop`` ends the run.

A run can be resumed in two ways. ``on_check(run)`` is called after every check that the run goes on
from; :meth:`Run.state` is what a resumed run needs besides the modules' parameters and the loss's own
state (its batch order), and ``train(..., resume=state)`` continues from it with the same floats as
a run that was never stopped. A caller that keeps its own checkpoint (optimiser and schedule states
restored before the call) passes the steps already taken as ``start``.
"""
from __future__ import annotations

import copy
import math
import time

from galinear import _util
from galinear._progress import progress_steps
from galinear.optim import threads as thread_policy

OPTIMIZERS = ("adam", "adamw")


class Plateau:
    """The stopping rule's bookkeeping: the best value so far, evaluations without improvement,
    learning-rate decays left.

    ``update(value, step)`` returns "better" (below (1 - min_delta) * best), "slight" (below the
    best, but not by min_delta: kept as the best, still counted as no improvement) or "worse".
    After ``patience`` evaluations in a row without improvement, :meth:`decay_now` is True once
    (if decays are left; the count restarts) or :attr:`stopped` becomes True.
    """

    FIELDS = ("best", "best_step", "since", "decays_left", "stopped")  # what a resumed rule needs

    def __init__(self, patience: int = 4, min_delta: float = 1e-3, decay: float = 0.3, decays: int = 1):
        self.patience, self.min_delta, self.decay, self.decays_left = patience, min_delta, decay, decays
        self.best, self.best_step, self.since = math.inf, 0, 0
        self.stopped, self._decay = False, False

    def update(self, value: float, step: int, optimizer=None) -> str:
        """Record the evaluation ``value`` at ``step``; a decay is applied to ``optimizer``'s rates."""
        verdict = self._update(value, step)
        if self._decay and optimizer is not None:
            for group in optimizer.param_groups:
                group["lr"] *= self.decay
        return verdict

    def _update(self, value: float, step: int) -> str:
        self._decay = False
        if value < self.best * (1.0 - self.min_delta) or self.best == math.inf:
            self.best, self.best_step, self.since = value, step, 0
            return "better"
        verdict = "worse"
        if value < self.best:
            self.best, self.best_step, verdict = value, step, "slight"
        self.since += 1
        if self.since >= self.patience:
            if self.decays_left > 0:
                self.decays_left -= 1
                self.since, self._decay = 0, True
            else:
                self.stopped = True
        return verdict

    def decay_now(self) -> bool:
        """True right after the update that asked for a learning-rate decay."""
        return self._decay

    def state(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS}

    def restore(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)


class Batches:
    """Mini-batches of ``size`` indices out of ``n``: a permutation drawn from a generator seeded
    with ``seed``, taken in order, and a fresh one each time it runs out (the last batch of a pass
    may be shorter)."""

    def __init__(self, n: int, size: int, seed: int):
        import torch

        self.n, self.size = int(n), int(size)
        self.generator = torch.Generator().manual_seed(seed)
        self.order, self.pos = torch.empty(0, dtype=torch.long), 0

    def next(self):
        """The indices of the next batch (a LongTensor)."""
        import torch

        if self.pos >= len(self.order):
            self.order, self.pos = torch.randperm(self.n, generator=self.generator), 0
        idx = self.order[self.pos:self.pos + self.size]
        self.pos += self.size
        return idx

    def state(self) -> dict:
        return {"generator": self.generator.get_state(), "order": self.order, "pos": self.pos}

    def restore(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self.order, self.pos = state["order"], state["pos"]


class Run:
    """One run of :func:`train`: its optimiser, stopping rule and progress, then its result.

    ``step`` (steps taken), ``recent`` (the last 10 step losses), ``step_seconds`` (the last step's
    loss, backward, optimiser step and loss number), ``curve`` ([step, validation value] of every
    check), ``best`` (the modules' states at the best check), ``lr_used`` (the rate of the last step
    taken), ``seconds`` (spent in steps and checks, over every resumed part).
    """

    def __init__(self, optimizer, plateau: Plateau | None, step: int = 0):
        self.optimizer, self.plateau = optimizer, plateau
        self.step, self.recent, self.curve, self.best = step, [], [], None
        self.step_seconds = 0.0
        self.lr_used = optimizer.param_groups[0]["lr"]
        self.seconds, self._t0 = 0.0, time.perf_counter()

    @property
    def final_loss(self) -> float:
        """Mean of the last 10 step losses (nan before any step)."""
        return sum(self.recent) / len(self.recent) if self.recent else float("nan")

    @property
    def lr(self) -> float:
        """The optimiser's rate now (after the schedule and any decay)."""
        return self.optimizer.param_groups[0]["lr"]

    @property
    def stopped(self) -> str:
        """"plateau" when the stopping rule ended the run, else "max_steps"."""
        return "plateau" if self.plateau is not None and self.plateau.stopped else "max_steps"

    def elapsed(self) -> float:
        return self.seconds + time.perf_counter() - self._t0

    def state(self) -> dict:
        """What :func:`train` needs to resume this run (with the modules' parameters and the loss's state)."""
        return {"best": self.best, "optimizer": self.optimizer.state_dict(), "recent": self.recent,
                "curve": self.curve, "step": self.step, "seconds": self.elapsed(),
                "plateau": self.plateau.state() if self.plateau is not None else None}

    def _resume(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.recent, self.curve, self.step = list(state["recent"]), list(state["curve"]), state["step"]
        self.seconds, self.best = state["seconds"], state["best"]
        if self.plateau is not None:
            self.plateau.restore(state["plateau"])


def make_optimizer(name: str, params, lr: float, weight_decay: float | None = None, **options):
    """torch.optim.Adam (``name="adam"``) or AdamW (``"adamw"``) over ``params`` (tensors or
    parameter groups) at rate ``lr`` with the other ``options`` (e.g. ``betas``); ``weight_decay``
    None: torch's default."""
    import torch

    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be 'adam' or 'adamw', got {name!r}")
    decay = {} if weight_decay is None else {"weight_decay": weight_decay}
    return (torch.optim.Adam if name == "adam" else torch.optim.AdamW)(params, lr=lr, **decay, **options)


def cosine_scheduler(optimizer, total_steps: int, warmup_steps: int = 0):
    """The ``LambdaLR`` of :func:`galinear._util.cosine_schedule`: a linear warm-up over
    ``warmup_steps``, then a cosine from each group's rate to 0 at ``total_steps``, held there.

    It is stepped once per optimiser step; its state goes into a checkpoint beside the
    optimiser's, so a resumed run continues the same schedule."""
    import torch

    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: _util.cosine_schedule(step, total_steps, warmup_steps))


def train(optimizer, loss, *, steps: int, scheduler=None, modules: dict | None = None, train_mode: bool = True,
          start: int = 0, grad_clip: float = 0.0, clip_params=None, loss_value=None, stop=None, on_step=None,
          validate=None, eval_every: int = 25, plateau: Plateau | None = None, resume: dict | None = None,
          on_check=None, nonfinite="non-finite loss at step {step}; lower the learning rate", name: str = "loss",
          progress: str | None = None, threads=None, ceiling: float | None = None) -> Run:
    """Minimise ``loss`` with ``optimizer``; returns the :class:`Run` (see the module's text for the loop).

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        What moves the parameters (:func:`make_optimizer`).
    loss : callable
        ``loss(step)`` -> a differentiable scalar for step ``step`` (1-based).
    steps : int
        The step budget: the last step (fixed steps, or the most a run until converged takes).
    scheduler : torch.optim.lr_scheduler.LRScheduler, optional
        Stepped after every optimiser step (:func:`cosine_scheduler`); None: the rates stay.
    modules : dict, optional
        ``{name: module}``: switched to training mode for steps (``train_mode``), to eval mode for
        checks and at the end; with ``validate``, their states at the best check are restored.
        None: the caller keeps the modes.
    start : int
        Steps already taken by a caller that restored the optimiser and schedule itself.
    grad_clip, clip_params :
        The global gradient norm over the tensors ``clip_params`` is clipped to ``grad_clip`` (when > 0).
    loss_value : callable, optional
        ``loss_value(loss)`` -> the float recorded for the step (default ``loss.item()``).
    stop : callable, optional
        ``stop(run)`` -> True to end the run before its next step (e.g. a time budget).
    on_step : callable, optional
        ``on_step(run)`` after every step (records, evaluations and checkpoints of the caller).
    validate : callable, optional
        ``validate()`` -> the stopping rule's value (a float, in eval mode), every ``eval_every``
        steps, with ``plateau`` (default :class:`Plateau()`) deciding decays and the stop.
    resume : dict, optional
        A :meth:`Run.state`; the run goes on from it (no check at step 0).
    on_check : callable, optional
        ``on_check(run)`` after every check that the run goes on from (to save a checkpoint).
    nonfinite : str or callable
        The message of the FloatingPointError for a non-finite loss: a str with ``{step}`` and
        ``{value}`` filled in, or ``nonfinite(step, value)`` -> the message.
    ceiling : float, optional
        A step's number above it ends the run as a non-finite one does (the same message): a loss
        out of all bounds (a diverged run) stops it before it reaches infinity.
    name, progress : str
        What the loss is called in the progress notes, and the :class:`galinear._progress.Progress`
        label (None: silent).
    threads : galinear.optim.threads.ThreadGovernor, optional
        Chooses each step's thread count from the step times (``--threads auto``); default: the
        one installed by :func:`galinear.optim.threads.use`, if any; else the count stays.
    """
    import torch

    if validate is not None and plateau is None:
        plateau = Plateau()
    run = Run(optimizer, plateau if validate is not None else None, start)
    modules = modules or {}

    def mode(training: bool) -> None:
        for m in modules.values():
            m.train(training)

    def check(step: int) -> None:
        mode(False)
        value = validate()
        run.curve.append([step, value])
        if run.plateau.update(value, step, optimizer) != "worse":
            run.best = {k: copy.deepcopy(m.state_dict()) for k, m in modules.items()}

    if resume is not None:
        run._resume(resume)
    elif validate is not None and start == 0:
        check(0)
    run._t0 = time.perf_counter()
    governor = threads if threads is not None else thread_policy.active()
    if governor is not None:
        governor.start_loop()
    bar = progress_steps(steps, progress)
    while run.step < steps and not (run.plateau is not None and run.plateau.stopped):
        if stop is not None and stop(run):
            break
        step = run.step + 1
        if governor is not None:
            governor.before_step()
        started = time.perf_counter()
        if train_mode:
            mode(True)
        value = loss(step)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(clip_params, grad_clip)
        run.lr_used = optimizer.param_groups[0]["lr"]
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        number = value.item() if loss_value is None else loss_value(value)
        run.step_seconds = time.perf_counter() - started
        if governor is not None:
            governor.after_step(run.step_seconds)
        if not math.isfinite(number) or ceiling is not None and number > ceiling:
            raise FloatingPointError(nonfinite(step, number) if callable(nonfinite)
                                     else nonfinite.format(step=step, value=number))
        run.recent = (run.recent + [number])[-10:]
        run.step = step
        if on_step is not None:
            on_step(run)
        note = f"{name} {run.recent[-1]:.4g}"
        if validate is not None and (step % eval_every == 0 or step == steps):
            check(step)
            note += f", validation {run.curve[-1][1]:.4g}"
            if on_check is not None and step < steps and not run.plateau.stopped:
                on_check(run)
        bar.step(step, note)
    run.seconds = run.elapsed()
    run._t0 = time.perf_counter()
    summary = f"{run.step} steps, final {name} {run.final_loss:.4g}"
    if run.plateau is not None:
        summary += f", best validation {run.plateau.best:.4g} at step {run.plateau.best_step}"
    bar.close(summary)
    if run.best is not None:
        for k, m in modules.items():
            m.load_state_dict(run.best[k])
    mode(False)
    return run


__all__ = ["Batches", "OPTIMIZERS", "Plateau", "Run", "cosine_scheduler", "make_optimizer", "train"]
