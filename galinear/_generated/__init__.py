r"""Everything derived from the symbolic specification and used at run time; do not edit by hand.

Every file here is produced by :mod:`galinear.symbolic.codegen` (``galinear codegen --all``, or
``make codegen``); its header names the spec and the command that regenerates it, and the tests
check that regenerating gives the same bytes.

Layout
------
``rotor_spec.py``  constants and formulas of the rotor maths (series, switch points, error
                   bounds, power-method contract) from :mod:`galinear.symbolic.rotor_maths`,
                   read by numpy, numba and torch alike
``numba_kernels/<op>_<metric code>.py``  numba kernels (found by :func:`find_kernel`); shipped:
                   gp for Euclidean n = 1..6, which ``Algebra.gp(method="auto")`` uses up to n = 5. Other ops
                   (below) and a torch target are generated on demand with
                   ``galinear codegen --op OP --n N [--target torch] --out DIR``.

The metric code has one letter per basis vector: ``p`` for :math:`e_i^2 = +1`, ``m`` for
:math:`-1`, ``z`` for :math:`0`; Euclidean Cl(3) is ``ppp``.

Kernel signatures (numba; arrays C-contiguous, 2-D, one float dtype, float32 or float64)
------------------------------------------------------------------------------------
``op="gp"``:        ``kernel(a, b, out)``; a, b, out of shape (batch, 2**n);
                    ``out[i] = a[i] b[i]`` (geometric product, shortlex order).
``op="op"``, ``"lc"``, ``"rc"``: same signature; outer product, left and right contraction.
``op="sandwich"``:  ``kernel(r, x, out)``; r of shape (batch, 1 + C(n, 2)) holds a *simple*
                    (scalar + bivector) rotor :math:`R = r_0 + \sum_{i<j} r_{ij} e_{ij}`, the
                    bivector part in :func:`galinear.blades.bivector_pairs` order; x, out of
                    shape (batch, 2**n); ``out[i] = R_i x_i \tilde R_i``. The kernel does not
                    normalise R: for a unit rotor (:math:`R \tilde R = 1`) the map is a rotation.
``op="sandwich2"``: ``kernel(r, s, x, out)``; r, s as above; ``out[i] = R_i x_i \tilde S_i``
                    (the paper's double-rotor map for one pair of simple factors).

Every numba kernel returns True when all its input entries are finite and False otherwise
(checked on the fly while it reads them), so a caller can skip a separate finiteness pass.
``out`` may be one of the inputs (in place: each block of 64 rows is read before it is
written); other partial overlaps are not supported.

Torch kernels (generated on demand) take and return tensors: ``kernel(a, b) -> out`` for the
products, ``kernel(r, x)`` and ``kernel(r, s, x)`` for the sandwiches, with any leading batch
shape; they are differentiable by autograd.
"""
from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache

__all__ = ["find_kernel", "metric_code", "module_name", "available"]

_LETTER = {1: "p", -1: "m", 0: "z"}
OPS = ("gp", "op", "lc", "rc", "sandwich", "sandwich2")


def _normalise_metric(metric) -> tuple[int, ...]:
    if isinstance(metric, bool):
        raise TypeError(f"metric must be a tuple of +1/-1/0 or an int n, got {metric!r}")
    if isinstance(metric, int) or type(metric).__name__.startswith("int"):
        try:
            n = int(metric)
        except TypeError:
            raise TypeError(f"metric must be a tuple of +1/-1/0 or an int n, got {metric!r}") from None
        if n < 0:
            raise ValueError(f"dimension n must be >= 0, got {n}")
        return (1,) * n
    if isinstance(metric, (str, bytes)):
        raise TypeError(f"metric must be a tuple of +1/-1/0 or an int n, got {metric!r}")
    try:
        out = tuple(int(m) for m in metric)
    except TypeError:
        raise TypeError(f"metric must be a tuple of +1/-1/0 or an int n, got {metric!r}") from None
    if any(m not in _LETTER for m in out):
        raise ValueError(f"metric entries must be +1, -1 or 0, got {out}")
    return out


def metric_code(metric) -> str:
    """One letter per basis vector: ``p`` (+1), ``m`` (-1), ``z`` (0); e.g. ``(1, 1, 1) -> 'ppp'``."""
    return "".join(_LETTER[m] for m in _normalise_metric(metric))


def module_name(op: str, metric) -> str:
    """Module base name of the kernel for (op, metric), e.g. ``'gp_ppp'``."""
    if op not in OPS:
        raise ValueError(f"unknown kernel op {op!r}; choose one of {', '.join(OPS)}")
    code = metric_code(metric)
    if not code:
        raise ValueError("no kernels for n = 0 (the algebra is the real numbers)")
    return f"{op}_{code}"


@lru_cache(maxsize=None)
def _load(package: str, name: str):
    full = f"{__name__}.{package}.{name}"
    if importlib.util.find_spec(full) is None:
        return None
    return importlib.import_module(full).kernel


def find_kernel(op: str, metric):
    """The generated numba kernel for ``op`` over ``metric``, or None if none was generated.

    Parameters
    ----------
    op : str
        One of ``"gp"``, ``"op"``, ``"lc"``, ``"rc"``, ``"sandwich"``, ``"sandwich2"``.
    metric : tuple of int, or int
        Squares of the basis vectors (an int n means Euclidean Cl(n)).

    Returns
    -------
    callable or None
        A numba-jitted function with the signature documented in this module.
    """
    if op not in OPS:
        return None
    metric = _normalise_metric(metric)
    if not metric:
        return None
    return _load("numba_kernels", module_name(op, metric))


def available(target: str = "numba") -> list[str]:
    """Names of the shipped kernel modules for ``target`` (only ``"numba"`` kernels are shipped), sorted."""
    import pathlib

    if target != "numba":
        raise ValueError(
            f"only numba kernels are shipped (target 'numba'), got target {target!r}; generate torch "
            "kernels with `galinear codegen --op OP --n N --target torch --out DIR`"
        )
    folder = pathlib.Path(__file__).parent / f"{target}_kernels"
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
