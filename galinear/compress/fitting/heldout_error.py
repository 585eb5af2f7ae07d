"""Regression error of a replacement projection on held-out rows: its mean squared error against
the original projection's output, and the numbers a study records beside it. ln PPL is
:mod:`galinear.lm.perplexity`'s.
"""
from __future__ import annotations


def mse(module, inputs, targets, batch_size: int = 4096) -> float:
    """Mean squared error of ``module(inputs)`` against ``targets`` over all entries."""
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(inputs), batch_size):
            diff = module(inputs[i:i + batch_size]) - targets[i:i + batch_size]
            total += float(diff.double().pow(2).sum())
            count += diff.numel()
    return total / max(count, 1)


def projection_target(inputs, projection):
    """What the (original) ``projection`` (an nn.Linear) gives on ``inputs``: x W^T (+ b)."""
    return inputs @ projection.weight.T + (0 if projection.bias is None else projection.bias)


def test_stats(module, original, inputs, original_inputs) -> dict:
    """The held-out numbers of a replacement ``module`` of the projection ``original``: ``test_mse``
    (``module(inputs)`` against the original on ``original_inputs``), ``target_mean_square`` (of
    that target: the MSE of predicting 0), ``params`` and ``dense_params`` (the original's)."""
    from galinear.compress.methods.catalogue import count_parameters

    target = projection_target(original_inputs, original)
    return {"test_mse": mse(module, inputs, target), "target_mean_square": float(target.double().pow(2).mean()),
            "params": count_parameters(module), "dense_params": count_parameters(original)}


__all__ = ["mse", "projection_target", "test_stats"]
