"""Checks of compiled kernels (:func:`galinear.compile`): generated gradients against central
differences of the forward kernel they belong to, in float64."""
from __future__ import annotations

import numpy as np

__all__ = ["kernel_gradient_error", "assert_kernel_gradient", "special_points"]


def _forward_sum(forward, arrays, weight) -> float:
    out = forward(*arrays)
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    return float(np.sum(np.asarray(out, np.float64) * weight))


def kernel_gradient_error(pair, arrays, weight=None, step: float = 1e-5, seed: int = 0) -> float:
    """Largest error of the backward kernel of ``pair`` at ``arrays`` (float64, shape (N, k) each)
    against fourth-order central differences of ``sum(weight * forward(*arrays))``, relative to
    ``max(1, |gradient|)`` per input."""
    forward, backward = pair
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    rows = arrays[0].shape[0]
    if weight is None:
        weight = np.random.default_rng(seed).standard_normal((rows, len(forward.output_blades)))
    grads = backward(*arrays, weight)
    if not isinstance(grads, tuple):
        grads = (grads,)
    worst = 0.0
    for i, (a, g) in enumerate(zip(arrays, grads)):
        g = np.asarray(g.detach().cpu().numpy() if hasattr(g, "detach") else g, np.float64)
        fd = np.zeros_like(a)
        for index in np.ndindex(a.shape):
            values = []
            for offset in (-2, -1, 1, 2):
                shifted = [b.copy() for b in arrays]
                shifted[i][index] += offset * step
                values.append(_forward_sum(forward, shifted, weight))
            fd[index] = (values[0] - 8 * values[1] + 8 * values[2] - values[3]) / (12 * step)
        scale = max(1.0, float(np.max(np.abs(fd))))
        worst = max(worst, float(np.max(np.abs(fd - g))) / scale)
    return worst


def assert_kernel_gradient(pair, arrays, rtol: float = 1e-7, **options) -> float:
    """Assert :func:`kernel_gradient_error` is at most ``rtol``; returns the error."""
    error = kernel_gradient_error(pair, arrays, **options)
    if not error <= rtol:
        raise AssertionError(f"the generated backward differs from central differences of the forward "
                             f"kernel: relative error {error:.3g} > {rtol:.3g}")
    return error


def special_points(widths, rng, rows: int = 2) -> dict:
    """Inputs at the special points: random, zero, tiny (1e-6) and large (30) magnitudes."""
    random = [rng.standard_normal((rows, w)) for w in widths]
    return {
        "random": random,
        "zero": [np.zeros((rows, w)) for w in widths],
        "tiny": [1e-6 * r for r in random],
        "large": [30.0 * r / max(1.0, float(np.abs(r).max())) for r in random],
    }
