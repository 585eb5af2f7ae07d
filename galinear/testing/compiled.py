"""Checks of compiled kernels (:func:`galinear.compile`): generated gradients against central
differences of the forward kernel they belong to, in float64; the six signatures (and a function
in each) that every target is checked in."""
from __future__ import annotations

import numpy as np

__all__ = ["kernel_gradient_error", "assert_kernel_gradient", "special_points", "SIGNATURE_CASES", "SIGNATURE_INPUTS"]


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


# ---------------------------------------------------------------------------- signatures
def _mixed(a, b):
    """Every product and involution on a vector a and an even multivector b."""
    return (a * b) + (a ^ b) - (a << b) + 0.5 * (b >> a) + (a | b) + ~b - b.conjugate() * 3 + a.involute()


def _with_dual(a, b):
    return _mixed(a, b) + (a ^ b).dual()


def _pga(a, b):
    """Degenerate metrics: the Hodge dual and the regressive product."""
    return (a * b) + (a & b.grade(2).dual()) + a.dual()


#: The six signatures every compiler target is checked in, each with a function of a vector ``a``
#: and an even multivector ``b`` (inputs ``SIGNATURE_INPUTS``) using every operator it offers.
SIGNATURE_CASES = {
    "euclidean": ((3, 0, 0), _with_dual),
    "pga": ((3, 0, 1), _pga),
    "cga": ((4, 1, 0), _with_dual),
    "sta": ((3, 1, 0), _with_dual),
    "cl22": ((2, 2, 0), _with_dual),
    "degenerate": ((2, 0, 1), _mixed),
}
SIGNATURE_INPUTS = {"a": 1, "b": "even"}
