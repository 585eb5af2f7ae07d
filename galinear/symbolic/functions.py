"""Functions of multivectors that work on every kind galinear traces or evaluates (sympy only).

``sqrt``, ``norm``, ``blade``, ``exp``, ``inv``, ``dual``, ``undual``, ``reverse`` and ``grade``
take a traced multivector (:class:`galinear.symbolic.trace.Traced`, inside
:func:`galinear.compile`), a symbolic one, a numeric :class:`galinear.MultiVector` or the
verifier's clifford adapter, so one user function can be compiled, evaluated numerically and
checked against clifford. They are re-exported by :mod:`galinear.compiler`.
"""
from __future__ import annotations

import sympy as sp

from galinear.symbolic.multivector import MultiVector
from galinear.symbolic.trace import KernelDomainError, Traced

__all__ = ["sqrt", "norm", "blade", "exp", "inv", "dual", "undual", "reverse", "grade"]

# These work on traced, symbolic and numeric multivectors alike, so one user function can be
# traced, evaluated by galinear.MultiVector and by the clifford package.
def _numeric_scalar(x):
    values = getattr(x, "values", None)
    if values is None:
        return x
    import numpy as np

    values = np.asarray(values)
    if np.any(values[..., 1:] != 0):
        raise ValueError("sqrt() needs a scalar (only a grade-0 part)")
    return values[..., 0]


def sqrt(x):
    """Square root of a scalar part (traced, symbolic, numeric, the verifier's adapter or a number)."""
    if isinstance(x, Traced):
        return x.sqrt()
    if isinstance(x, MultiVector):
        if any(c != 0 for c in x.coefficients[1:]):
            raise ValueError("sqrt() needs a scalar (only a grade-0 part)")
        return x._coerce(sp.sqrt(x.coefficients[0]))
    if hasattr(x, "sqrt") and not hasattr(x, "algebra"):
        return x.sqrt()
    if hasattr(x, "values") and hasattr(x, "algebra"):
        import numpy as np

        s = _numeric_scalar(x)
        if np.any(s < 0):
            raise KernelDomainError("sqrt() of a negative scalar")
        return x.algebra.multivector({"1": np.sqrt(s)}) if np.ndim(s) == 0 else np.sqrt(s)
    import math

    return math.sqrt(x)


def norm(x):
    """:math:`\\sqrt{|\\langle x\\tilde x\\rangle_0|}` (a scalar multivector when traced)."""
    if isinstance(x, Traced):
        return x.norm()
    value = x.norm()
    if hasattr(x, "algebra"):
        import numpy as np

        if np.ndim(value) == 0:
            return x.algebra.multivector({"1": float(value)})
    return value


def blade(like, name: str, value=1):
    r"""The blade ``name`` (times ``value``) in the algebra and the kind of multivector of ``like``:
    traced, symbolic, numeric (:class:`galinear.MultiVector`) or the verifier's clifford adapter.
    Constant blades such as CGA's :math:`n_\infty` are built inside a compiled function this way."""
    if isinstance(like, Traced):
        from galinear.symbolic.multivector import blade as symbolic_blade

        return Traced(symbolic_blade(like.mv.metric, name, value), like._rec)
    if isinstance(like, MultiVector):
        from galinear.symbolic.multivector import blade as symbolic_blade

        return symbolic_blade(like.metric, name, value)
    make = getattr(like, "_galinear_blade", None)
    if make is not None:
        return make(name, value)
    algebra = getattr(like, "algebra", None)
    if algebra is None:
        raise TypeError(f"blade() needs a multivector to take the algebra from, got {type(like).__name__}")
    return algebra.multivector({name: value})


def exp(x):
    return x.exp()


def inv(x):
    return x.inv()


def dual(x):
    return x.dual()


def undual(x):
    return x.undual()


def reverse(x):
    return x.reverse()


def grade(x, *grades):
    """The sum of the listed grade parts, a multivector in every kind (``x(*grades)``)."""
    if isinstance(x, MultiVector):
        return x(*grades)
    return x.grade(*grades)
