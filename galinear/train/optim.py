"""The optimiser of ``galinear train-mlp`` and ``galinear train-lm``: AdamW under a warm-up and
cosine schedule (:func:`galinear._util.cosine_schedule`), and one optimiser step.

The schedule is a ``LambdaLR`` stepped once per optimiser step, so its state (and the
optimiser's) goes into a run's checkpoint (:meth:`galinear.train.run_folder.RunFormat.save`)
and a resumed run continues the same schedule.
"""
from __future__ import annotations

import torch
from torch import nn

from galinear._util import cosine_schedule

__all__ = ["cosine_adamw", "optimiser_step"]


def cosine_adamw(parameters, lr: float, total_steps: int, warmup_steps: int, **options):
    """(AdamW over ``parameters`` (tensors or parameter groups) at peak rate ``lr`` with the other
    AdamW ``options``, the LambdaLR scheduler of a linear warm-up over ``warmup_steps`` then a
    cosine to 0 at ``total_steps``)."""
    optimizer = torch.optim.AdamW(parameters, lr=lr, **options)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: cosine_schedule(step, total_steps, warmup_steps))
    return optimizer, scheduler


def optimiser_step(loss: torch.Tensor, optimizer, scheduler, clip_parameters=None, grad_clip: float = 0.0) -> None:
    """Backpropagate ``loss`` into fresh gradients, clip their global norm over ``clip_parameters``
    to ``grad_clip`` (when > 0), and step the optimiser and the schedule."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip > 0:
        nn.utils.clip_grad_norm_(clip_parameters, grad_clip)
    optimizer.step()
    scheduler.step()
