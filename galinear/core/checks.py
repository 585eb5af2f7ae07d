"""Argument checks shared by the core: float coercion, finiteness, bivectors, unit rotors (numpy only).

Each check raises an error that names the problem and the fix.
"""
from __future__ import annotations

import numpy as np

from galinear import blades

__all__ = ["coerce_float", "bivector_part", "unit_rotor", "signature_counts"]


def coerce_float(x, name: str = "x") -> np.ndarray:
    """``x`` as a float32 or float64 array (integers and booleans become float64)."""
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind in "biu":
        return arr.astype(np.float64)
    if kind == "f":
        if arr.dtype == np.float16:
            return arr.astype(np.float32)
        if arr.dtype not in (np.float32, np.float64):
            return arr.astype(np.float64)
        return arr
    if kind == "c":
        raise TypeError(f"{name} is complex ({arr.dtype}); galinear works with real float32 or float64 arrays")
    raise TypeError(f"{name} has dtype {arr.dtype}; expected a real float32 or float64 array")


def _check_finite(arr: np.ndarray, name: str) -> None:
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinity; every coefficient must be finite")


def bivector_part(n: int, B: np.ndarray, name: str = "B") -> np.ndarray:
    """Compact coefficients (..., C(n,2)) of full multivectors B that must be bivectors."""
    m = n * (n - 1) // 2
    biv = B[..., 1 + n : 1 + n + m]
    other = np.concatenate([B[..., : 1 + n], B[..., 1 + n + m :]], axis=-1)
    peak = np.abs(B).max(axis=-1, keepdims=True, initial=0.0)
    peak = np.where(peak > 0, peak, 1).astype(B.dtype)  # 2-norms without overflow
    size = np.sqrt(np.sum((B / peak) ** 2, axis=-1)) * peak[..., 0]
    off = np.sqrt(np.sum((other / peak) ** 2, axis=-1)) * peak[..., 0]
    tol = 64 * np.finfo(B.dtype).eps * np.maximum(size, np.finfo(B.dtype).tiny)
    if np.any(off > tol):
        raise ValueError(
            f"{name} must be a bivector (only grade-2 coefficients non-zero); it has parts of other "
            f"grades (largest relative size {float(np.max(off / np.maximum(size, np.finfo(B.dtype).tiny))):.2g}). "
            f"Use alg.grade({name}, 2) to keep the bivector part, or alg.bivector(coefficients) to build one."
        )
    return np.ascontiguousarray(biv)


def unit_rotor(n: int, R: np.ndarray, R_reversed_product: np.ndarray, name: str = "R") -> np.ndarray:
    """R after checking it is even with R ~R = 1 (``R_reversed_product`` is R ~R)."""
    from galinear import blades

    odd = R * (blades.blade_grades(n) % 2 == 1)
    RR = np.array(R_reversed_product)
    RR[..., 0] -= 1
    err = np.sqrt(np.sum(RR * RR, axis=-1))
    odd_size = np.sqrt(np.sum(odd * odd, axis=-1))
    tol = 1e3 * np.finfo(R.dtype).eps * max(1, n)
    if np.any(err > tol) or np.any(odd_size > tol):
        raise ValueError(
            f"{name} must be a unit rotor (even, R ~R = 1); largest |R ~R - 1| = {float(np.max(err)):.3g}, "
            f"largest odd part {float(np.max(odd_size)):.3g}. Build rotors with alg.exp(B)."
        )
    return R


def signature_counts(p, q, r) -> None:
    """TypeError/ValueError unless p, q, r are non-negative integers (numpy ones too), p + q + r <= MAX_DIMENSION."""
    for name, value in (("p", p), ("q", q), ("r", r)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be a non-negative integer, got {value!r}")
        if value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    n = int(p) + int(q) + int(r)
    if n > blades.MAX_DIMENSION:
        raise ValueError(
            f"Algebra({p}, {q}, {r}) has dimension n = {n}, above the maximum n = {blades.MAX_DIMENSION} "
            f"that galinear supports (one multivector holds 2**n coefficients: 2**{blades.MAX_DIMENSION} "
            f"float64 take {8 * 2**blades.MAX_DIMENSION / 2**20:.0f} MiB; one of Cl({n}) would need 8 x 2**{n} bytes)"
        )
