r"""A generated torch layer: a learned rigid motion in PGA, compiled by :func:`galinear.compile`.

:class:`GeneratedMotor` holds one bivector of Cl(3,0,1) (6 parameters) and moves a batch of
points by the motor :math:`M = e^B`, :math:`x \mapsto M x \tilde M`. The whole forward pass, the
closed-form exponential (screw form) and the sandwich, is one straight-line program generated from

.. code-block:: python

    def moved_point(B, x):
        M = B.exp()
        return M * x * ~M

traced once (per backend, cached for the process and on disk by the compiler) with ``B`` a bivector
and ``x`` a trivector (a PGA point). Backends:

* ``"torch"`` (default): ``galinear.compile(..., target="torch")``, plain torch operations, so
  autograd, ``torch.compile`` and ``torch.func`` see through it; any device;
* ``"numba"``: ``galinear.compile(..., target="numba", grad=True).torch_function()``, one
  ``torch.autograd.Function`` whose backward is the generated backward kernel (CPU tensors).

Conventions are those of :mod:`galinear.nn.motors`: bivectors are (..., 6) coefficients on
``e12, e13, e14, e23, e24, e34`` of ``galinear.Algebra(3, 0, 1)`` (``e1`` is the null vector, the
ideal part ``e12, e13, e14`` translates, ``e23, e24, e34`` rotates), points are Euclidean
coordinates (..., 3) in and out, and the motor (:meth:`GeneratedMotor.motor`) is a (..., 16) tensor
in shortlex order. The point of coordinates (x, y, z) is the right complement of the vector
:math:`e_1 + x e_2 + y e_3 + z e_4` (``e234 - x e134 + y e124 - z e123``, as
:func:`galinear.nn.motors.point`).

Programs (``program=``): ``"fused"`` is the one generated program above, exp and sandwich per
point; ``"staged"`` runs two generated programs, ``B.exp()`` once per bivector and then
``M * x * ~M`` (``M`` even) per point. They agree to rounding. ``"auto"`` (the default) takes
``"staged"`` when fewer bivectors than points are given (one learned motor for a whole cloud):
the generated torch program broadcasts the argument of the closed-form exp coefficients to the
batch shape (``_gfunK(_c0 + _zero)``), so the fused program evaluates exp's transcendental branches
once per point, and the numba kernel does the same per row.

The layout conversion between these conventions and the blade order of the generated kernels
(``kernel.input_blades`` / ``kernel.output_blades``) is a pair of index and sign tables derived
once from the blade names and bitmasks (:func:`layout_tables`), never typed by hand.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import nn

from galinear.blades import blade_grades, blade_names, metric_from_signature, reorder_sign, shortlex_bitmasks

__all__ = ["SIGNATURE", "BACKENDS", "PROGRAMS", "GeneratedMotor", "moved_point", "move_points",
           "generated_motor_exp", "kernels", "layout_tables"]

SIGNATURE = (3, 0, 1)
BACKENDS = ("torch", "numba")
PROGRAMS = ("auto", "fused", "staged")
_N = sum(SIGNATURE)


def moved_point(B, x):
    """The traced function: the motor exp(B) applied to the point x (bivector B, trivector x)."""
    M = B.exp()
    return M * x * ~M


def _motor(B):
    return B.exp()


def _sandwich(M, x):
    return M * x * ~M


@lru_cache(maxsize=None)
def kernels(backend: str = "torch"):
    """``(move, exp, sandwich)``: the generated kernels of :func:`moved_point` (inputs ``B``: grade 2,
    ``x``: grade 3), of ``B.exp()`` and of ``M * x * ~M`` (``M`` even) for ``backend``, compiled once
    per process (the compiler also keeps the generated sources in galinear's cache folder).
    ``"numba"`` gives :class:`galinear.compiler.KernelPair` objects (forward and generated backward)."""
    import galinear

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    algebra = galinear.Algebra(*SIGNATURE)
    options = {"target": "torch"} if backend == "torch" else {"target": "numba", "grad": True}
    move = galinear.compile(moved_point, algebra, {"B": 2, "x": 3}, name="moved_point", **options)
    exp = galinear.compile(_motor, algebra, {"B": 2}, name="motor_exp", **options)
    sandwich = galinear.compile(_sandwich, algebra, {"M": "even", "x": 3}, name="motor_sandwich", **options)
    return move, exp, sandwich


@dataclass(frozen=True)
class LayoutTables:
    """Index and sign tables between galinear.nn.motors' conventions and the generated kernels.

    ``bivector``: kernel bivector j = motors' bivector coefficient ``bivector[j]``;
    ``point_source``, ``point_sign``: kernel point coefficient j = ``point_sign[j]`` times the
    homogeneous coordinate ``point_source[j]`` of (1, x, y, z);
    ``coordinate_index``, ``coordinate_sign``: homogeneous coordinate i (0: the weight, 1..3: x, y, z)
    = ``coordinate_sign[i]`` times kernel output coefficient ``coordinate_index[i]``;
    ``motor_index``: shortlex position (of 16) of each output blade of the exp kernel;
    ``staged``: the sandwich kernel reads the exp kernel's output as it is (same blade order).
    """

    bivector: tuple
    point_source: tuple
    point_sign: tuple
    coordinate_index: tuple
    coordinate_sign: tuple
    motor_index: tuple
    identity_bivector: bool
    staged: bool


def _mask(name: str) -> int:
    return int(shortlex_bitmasks(_N)[blade_names(_N).index(name)])


def _complement(vector_mask: int) -> tuple[int, int]:
    """(bitmask, sign) of the right complement T of a basis vector v: v ^ T = +e1234."""
    full = (1 << _N) - 1
    other = full ^ vector_mask
    return other, reorder_sign(vector_mask, other)


@lru_cache(maxsize=None)
def _tables(point_names: tuple, output_names: tuple, bivector_names: tuple, motor_names: tuple,
            sandwich_names: tuple) -> LayoutTables:
    names = blade_names(_N)
    grades = blade_grades(_N)
    # galinear.nn.motors: bivectors on the grade-2 blades in shortlex order of Algebra(3, 0, 1).
    motors_bivector = tuple(n for n, g in zip(names, grades) if g == 2)
    bivector = tuple(motors_bivector.index(n) for n in bivector_names)
    # Homogeneous coordinates (1, x, y, z) live on (null vector, Euclidean vectors in order).
    metric = metric_from_signature(*SIGNATURE)
    vectors = [i for i, m in enumerate(metric) if m == 0] + [i for i, m in enumerate(metric) if m != 0]
    complements = [_complement(1 << i) for i in vectors]
    point_masks = [_mask(n) for n in point_names]
    source, sign = [], []
    for m in point_masks:
        k = [c for c, _ in complements].index(m)
        source.append(k)
        sign.append(float(complements[k][1]))
    output_masks = [_mask(n) for n in output_names]
    coordinate_index = tuple(output_masks.index(c) for c, _ in complements)
    coordinate_sign = tuple(float(s) for _, s in complements)
    motor_index = tuple(names.index(n) for n in motor_names)
    return LayoutTables(bivector, tuple(source), tuple(sign), coordinate_index, coordinate_sign, motor_index,
                        bivector == tuple(range(len(bivector))), motor_names == sandwich_names)


def layout_tables(backend: str = "torch") -> LayoutTables:
    """The :class:`LayoutTables` for the kernels of ``backend`` (from their blade names)."""
    move, exp, sandwich = kernels(backend)
    if sandwich.input_blades["x"] != move.input_blades["x"] or sandwich.output_blades != move.output_blades:
        raise RuntimeError("the generated sandwich and move kernels disagree on the point blades")
    return _tables(tuple(move.input_blades["x"]), tuple(move.output_blades), tuple(move.input_blades["B"]),
                   tuple(exp.output_blades), tuple(sandwich.input_blades["M"]))


@lru_cache(maxsize=None)
def _index(values: tuple, device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long, device=device)


def _signs(values: tuple, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(values, dtype=like.dtype, device=like.device)


def _check(x, size: int, name: str) -> None:
    if not torch.is_tensor(x) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point torch tensor, got {type(x).__name__}")
    if x.shape[-1:] != (size,):
        raise ValueError(f"{name} must have a last axis of length {size}, got shape {tuple(x.shape)}")


def _function(kernel, backend: str):
    return kernel if backend == "torch" else kernel.torch_function()


@lru_cache(maxsize=None)
def _functions(backend: str):
    return tuple(_function(k, backend) for k in kernels(backend))


def _kernel_bivector(B: torch.Tensor, tables: LayoutTables) -> torch.Tensor:
    if tables.identity_bivector:
        return B
    return B.index_select(-1, _index(tables.bivector, B.device))


def _staged(program: str, B: torch.Tensor, points: torch.Tensor) -> bool:
    if program not in PROGRAMS:
        raise ValueError(f"program must be one of {', '.join(PROGRAMS)}, got {program!r}")
    if program != "auto":
        return program == "staged"
    rows = torch.broadcast_shapes(B.shape[:-1], points.shape[:-1]).numel()
    return B[..., 0].numel() < rows


def move_points(B: torch.Tensor, points: torch.Tensor, backend: str = "torch", program: str = "auto") -> torch.Tensor:
    r"""Points (..., 3) moved by the motors :math:`e^B` of bivectors B (..., 6), leading axes
    broadcast: ``point_coordinates(sandwich(motor_exp(B), point(points)))`` of
    :mod:`galinear.nn.motors`, computed by the generated kernel of :func:`moved_point`
    (``program="fused"``) or by the generated ``B.exp()`` then ``M * x * ~M`` (``"staged"``; the
    default ``"auto"`` stages when there are fewer bivectors than points)."""
    _check(B, 6, "B")
    _check(points, 3, "points")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    staged = _staged(program, B, points)
    tables = layout_tables(backend)
    move, exp, sandwich = _functions(backend)
    dtype = torch.promote_types(B.dtype, points.dtype)
    B, points = B.to(dtype), points.to(dtype)
    homogeneous = torch.cat([torch.ones_like(points[..., :1]), points], dim=-1)
    x = homogeneous.index_select(-1, _index(tables.point_source, points.device)) * _signs(tables.point_sign, points)
    if staged:
        motor = exp(_kernel_bivector(B, tables))
        if not tables.staged:
            raise RuntimeError("the generated exp and sandwich kernels disagree on the motor blades")
        out = sandwich(motor, x)
    else:
        out = move(_kernel_bivector(B, tables), x)
    coords = out.index_select(-1, _index(tables.coordinate_index, out.device)) * _signs(tables.coordinate_sign, out)
    return coords[..., 1:] / coords[..., :1]


def generated_motor_exp(B: torch.Tensor, backend: str = "torch") -> torch.Tensor:
    """Motors (..., 16) in shortlex order (as :func:`galinear.nn.motors.motor_exp`) of bivectors
    (..., 6), by the generated kernel of ``B.exp()``."""
    _check(B, 6, "B")
    tables = layout_tables(backend)
    exp = _functions(backend)[1]
    out = exp(_kernel_bivector(B, tables))
    full = out.new_zeros(out.shape[:-1] + (2 ** _N,))
    return full.index_copy(-1, _index(tables.motor_index, out.device), out)


class GeneratedMotor(nn.Module):
    """A learned rigid motion of points: ``forward(points (..., 3)) -> (..., 3)``, the motor
    ``exp(bivector)`` applied by the kernel generated from :func:`moved_point`.

    Parameters
    ----------
    bivector : tensor (6,), optional
        Initial bivector on ``e12, e13, e14, e23, e24, e34`` (default: zero, the identity motion).
    backend : {"torch", "numba"}
        ``"torch"``: the generated torch program (autograd through its operations, any device,
        ``torch.compile``); ``"numba"``: the generated numba kernel and its generated backward in
        one ``torch.autograd.Function`` (CPU).
    program : {"auto", "fused", "staged"}
        ``"fused"``: the one program generated from :func:`moved_point`; ``"staged"``: the generated
        ``B.exp()`` once, then the generated ``M * x * ~M`` per point; ``"auto"``: staged (one
        bivector for many points, as here) unless ``forward`` gets a single point.
    dtype, device : optional
        Of the parameter (default: torch's default dtype).
    """

    def __init__(self, bivector=None, *, backend: str = "torch", program: str = "auto", dtype=None, device=None):
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if program not in PROGRAMS:
            raise ValueError(f"program must be one of {', '.join(PROGRAMS)}, got {program!r}")
        self.backend, self.program = backend, program
        if bivector is None:
            value = torch.zeros(6, dtype=dtype, device=device)
        else:
            value = torch.as_tensor(np.asarray(bivector) if not torch.is_tensor(bivector) else bivector)
            value = value.detach().clone().to(dtype=dtype or (value.dtype if value.is_floating_point()
                                                              else torch.get_default_dtype()), device=device)
            _check(value, 6, "bivector")
            if value.shape != (6,):
                raise ValueError(f"bivector must have shape (6,), got {tuple(value.shape)}")
        self.bivector = nn.Parameter(value)
        kernels(backend)  # compile now (once per process and backend), not at the first call

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return move_points(self.bivector, points, backend=self.backend, program=self.program)

    def motor(self) -> torch.Tensor:
        """The motor exp(bivector), a (16,) tensor in shortlex order."""
        return generated_motor_exp(self.bivector, backend=self.backend)

    def extra_repr(self) -> str:
        return f"backend={self.backend!r}, program={self.program!r}"
