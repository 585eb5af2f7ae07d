"""galinear.MultiVector against clifford and kingdon, operator by operator, on non-degenerate and
degenerate signatures: Cl(3), Cl(3,1), Cl(3,0,1) (PGA), Cl(4,1) (CGA) and Cl(2,0,2).

The operators that test_multivector.py compares in every signature from clifford's product
tables (``*``, ``^``, ``<<``, ``>>``, ``|``, ``~``, involutions, grade selection) are not repeated
here; this file covers the rest through the libraries' own MultiVector objects. Where a library
defines an operation differently, the test docstring names the convention and the conversion
applied before comparing.

Tolerances, relative to the product of the operands' coefficient 2-norms (to the norm of the
result for inverses and quotients): float64 1e-12 for single products and maps, 1e-10 for
inverses, quotients, powers and exponentials; float32 inputs 1e-5 and 1e-4. References are
computed in float64 from the same (rounded) inputs.
"""
import functools
from itertools import combinations

import numpy as np
import pytest

from galinear import Algebra, MultiVector
from galinear.testing import assert_close, default_rtol, norm_product, random_multivector

SIGNATURES = [(3, 0, 0), (3, 1, 0), (3, 0, 1), (4, 1, 0), (2, 0, 2)]
# one Algebra per signature, so that clifford compiles its functions once per layout
ALGEBRAS = {signature: Algebra(*signature) for signature in SIGNATURES}
# float32 inputs compile every kernel of the algebra again in single precision, against the same
# float64 references: `make test` compares float32 in Cl(3) and PGA (a non-degenerate and a
# degenerate metric), the other signatures in float32 in `make test-slow`.
# Cl(4,1) against clifford (16 s with a cold numba cache) is in `make test-slow` too: its products
# are compared with clifford in test_graded.py and tests/compiler, its operators here in the slow run.
FLOAT32_FAST = ((3, 0, 0), (3, 0, 1))
CASES = [pytest.param(signature, dtype, id=f"cl{''.join(map(str, signature))}-{np.dtype(dtype).name}",
                      marks=() if (dtype == np.float64 and signature != (4, 1, 0)) or signature in FLOAT32_FAST
                      else pytest.mark.slow)
         for dtype in (np.float64, np.float32) for signature in SIGNATURES]


def _blade_grades(alg):
    """Grades of the random blades to project onto: 2 and 3 where a random 3-blade is invertible
    (in Cl(2,0,2) every 3-dimensional subspace contains a null vector)."""
    return (2, 3) if alg.n - alg.metric.count(0) >= 3 else (2,)


def _blade(rng, alg, grade, dtype=np.float64):
    """An invertible blade: the outer product of ``grade`` random vectors."""
    out = MultiVector.scalar(alg, 1.0)
    for _ in range(grade):
        out = out ^ MultiVector.vector(alg, rng.standard_normal(alg.n))
    return out.astype(dtype)


def _rotor(rng, alg, dtype=np.float64, shape=()):
    """Unit rotors exp(B) of random bivectors (any signature)."""
    return MultiVector.bivector(alg, 0.5 * rng.standard_normal(shape + (alg.num_bivectors,))).exp().astype(dtype)


# ------------------------------------------------------------------------------------------ clifford
@pytest.mark.parametrize("signature, dtype", CASES)
def test_against_clifford(signature, dtype, rng):
    """dual, undual, &, inv, /, **, outermorphism, project, reject and @ through clifford.

    Conventions: clifford's ``dual()`` is :math:`x I^{-1}` in non-degenerate metrics and its
    right complement in degenerate ones, the choice of our ``kind="auto"``. clifford has no
    undual: it is compared with :math:`x I` (non-degenerate) and with clifford's left
    complement, the inverse of its right complement (degenerate). clifford's ``&`` (``vee``)
    is the left complement of the outer product of right complements, which is our
    :math:`\\star^{-1}(\\star a \\wedge \\star b)` since the left complement inverts the right one;
    it is compared in every signature, PGA included. clifford's ``B.project(x)`` is
    :math:`(x \\rfloor B) B^{-1}` with a geometric product; for an invertible blade B,
    :math:`x \\rfloor B` lies in the subalgebra of B's subspace, where that product equals our
    second contraction, so general x are compared. clifford has no rejection: vectors are
    compared with :math:`(x \\wedge B) B^{-1}` from clifford's operators. clifford's ``**``
    takes non-negative powers only; ``a ** -2`` is compared with ``a.inv() ** 2``.
    """
    pytest.importorskip("clifford", reason="clifford is the reference implementation (test extra)")
    from clifford import transformations

    alg = ALGEBRAS[signature]
    layout = alg.clifford_layout()
    tol, inv_tol = default_rtol(dtype), default_rtol(dtype, "chain")
    a, b = random_multivector(rng, alg, (2,), dtype), random_multivector(rng, alg, (2,), dtype)
    matrix = rng.standard_normal((alg.n, alg.n)).astype(dtype)
    blades = {g: _blade(rng, alg, g, dtype) for g in _blade_grades(alg)}
    x = MultiVector.vector(alg, rng.standard_normal((2, alg.n)).astype(dtype))
    R = _rotor(rng, alg, dtype)
    I = layout.pseudoScalar
    degenerate = 0 in alg.metric
    outermorphism = transformations.OutermorphismMatrix(matrix.astype(np.float64), layout)
    got = {
        "dual": a.dual(), "undual": a.undual(), "&": a & b, "inv": a.inv(), "/": a / b,
        "** 3": a ** 3, "** -2": a ** -2, "outermorphism": a.outermorphism(matrix),
        "reject a vector": x.reject(blades[2]), "R @ a": R @ a,
    }
    got.update({f"project onto a {g}-blade": a.project(blade) for g, blade in blades.items()})
    for key, mv in got.items():
        assert mv.dtype == dtype, key
    CR = R.astype(np.float64).to_clifford()
    cblades = {g: blade.astype(np.float64).to_clifford() for g, blade in blades.items()}
    blade_scale = {g: np.linalg.norm(blade.values.astype(np.float64)) * np.linalg.norm(blade.inv().values)
                   for g, blade in blades.items()}
    for i in range(2):
        A, B, X = (m[i].astype(np.float64).to_clifford() for m in (a, b, x))
        want = {
            "dual": A.dual(), "undual": A.left_complement() if degenerate else A * I, "&": A & B,
            "inv": A.inv(), "/": A / B, "** 3": A ** 3, "** -2": A.inv() ** 2,
            "outermorphism": outermorphism(A), "reject a vector": (X ^ cblades[2]) * cblades[2].inv(),
            "R @ a": CR * A * ~CR,
        }
        want.update({f"project onto a {g}-blade": blade.project(A) for g, blade in cblades.items()})
        scales = {  # (scale, tolerance) per operation
            "dual": (norm_product(a[i]), tol), "undual": (norm_product(a[i]), tol),
            "&": (norm_product(a[i], b[i]), tol),
            "** 3": (norm_product(a[i]) ** 3, inv_tol),
            "outermorphism": (norm_product(a[i]) * max(1.0, np.linalg.norm(matrix, 2)) ** alg.n, tol),
            "reject a vector": (norm_product(x[i]) * blade_scale[2], inv_tol), "R @ a": (norm_product(R, R, a[i]), tol),
        }
        scales.update({f"project onto a {g}-blade": (norm_product(a[i]) * blade_scale[g], inv_tol) for g in blades})
        for key, ref in want.items():
            ref = MultiVector.from_clifford(ref, alg).values
            scale, t = scales.get(key, (np.linalg.norm(ref), inv_tol))  # inv, /, ** -2: the result's norm
            try:
                assert_close(got[key].values[i], ref, scale, t)
            except AssertionError as err:
                raise AssertionError(f"{key} in {alg!r} ({np.dtype(dtype).name}): {err}") from None


# ------------------------------------------------------------------------------------------ kingdon
@functools.lru_cache(maxsize=None)
def _kingdon(signature):
    """One kingdon algebra per signature: kingdon generates the code of each operation once per
    algebra, and the float32 and float64 tests ask it the same float64 questions."""
    kingdon = pytest.importorskip("kingdon", reason="kingdon is the second reference (test extra)")
    return kingdon.Algebra(*signature)


# kingdon in Cl(4,1): the same galinear kernels as the clifford comparison of Cl(4,1) above, and
# kingdon's own code generation for a 32-dimensional algebra (about 35 s cold): `make test-slow`
KINGDON_CASES = [pytest.param(*case.values, id=case.id,
                              marks=case.marks or ((pytest.mark.slow,) if case.values[0] == (4, 1, 0) else ()))
                 for case in CASES]


@pytest.mark.parametrize("signature, dtype", KINGDON_CASES)
def test_against_kingdon(signature, dtype, rng):
    """Right contraction, sandwich, involutions, grade selection, inv, /, ** and projection
    through kingdon (batched).

    Conventions: kingdon's ``V >> y`` is :math:`(-1)^{k l}\\, V y V^{-1}` for a k-versor V and
    the grade-l parts of y, with V assumed normalised (:math:`V^{-1} = \\tilde V`); ours,
    ``V @ y``, is :math:`V y \\tilde V` with no sign. For unit rotors (even) the two agree; for
    an odd unit versor kingdon's equals ``V @ y.involute()``. kingdon's projection
    ``x @ B`` is :math:`(x | B) \\tilde B` for normalised B (:math:`B \\tilde B = 1`); for
    the grades of x up to that of B its inner product is our left contraction and
    :math:`\\tilde B = B^{-1}`, so vectors and bivectors are compared with ``x.project(B)``
    onto a normalised 2- and 3-blade. In Cl(4,1) inv and ``** -2`` are compared on bivectors
    and ``/`` with a vector divisor (kingdon's symbolic inverse of a general 32-coefficient
    multivector takes minutes to generate).
    """
    kalg = _kingdon(signature)
    alg = ALGEBRAS[signature]
    tol, inv_tol = default_rtol(dtype), default_rtol(dtype, "chain")
    a, b = random_multivector(rng, alg, (3,), dtype), random_multivector(rng, alg, (3,), dtype)
    R = _rotor(rng, alg, dtype, (3,))
    positive = alg.metric.index(1)  # a basis vector squaring to +1, turned by R: a unit odd versor
    V = R * (R @ MultiVector.basis_vectors(alg)[positive].astype(dtype))
    ka, kb, kR, kV = (m.astype(np.float64).to_kingdon(kalg) for m in (a, b, R, V))

    def theirs(k):
        return MultiVector.from_kingdon(k, alg).values

    cases = [
        ("R >> a", R @ a, theirs(kR >> ka), norm_product(R, R, a), tol),
        ("V >> a (odd)", V @ a.involute(), theirs(kV >> ka), norm_product(V, V, a), tol),
        ("a >> b (right contraction)", a >> b, theirs(ka.rc(kb)), norm_product(a, b), tol),
        ("involute", a.involute(), theirs(ka.involute()), norm_product(a), tol),
        ("conjugate", a.conjugate(), theirs(ka.conjugate()), norm_product(a), tol),
        ("grade 2", a(2), theirs(ka.grade(2)), norm_product(a), tol),
        ("grades 0, n", a.grade(0, alg.n), theirs(ka.grade(0, alg.n)), norm_product(a), tol),
        ("** 3", a ** 3, theirs(ka ** 3), norm_product(a) ** 3, inv_tol),
    ]
    # kingdon writes its inverse symbolically per blade pattern; for a general multivector of
    # Cl(4,1) that takes minutes, so there inv and ** -2 use bivectors and / a vector divisor
    x, y = (a, b) if alg.n <= 4 else (a(2), b(1))
    kx, ky = (m.astype(np.float64).to_kingdon(kalg) for m in (x, y))
    inv, quotient, inv2 = theirs(kx.inv()), theirs(ka / ky), theirs(kx ** -2)
    cases += [
        ("inv", x.inv(), inv, np.linalg.norm(inv, axis=-1), inv_tol),
        ("/", a / y, quotient, np.linalg.norm(quotient, axis=-1), inv_tol),
        ("** -2", x ** -2, inv2, np.linalg.norm(inv2, axis=-1), inv_tol),
    ]
    for grade in _blade_grades(alg):
        blade = _blade(rng, alg, grade)
        blade = blade / float(np.sqrt(abs((blade * ~blade)["1"])))
        if (blade * ~blade)["1"] < 0:  # kingdon's formula needs B ~B = +1; such a blade has no unit form
            continue
        kblade = blade.to_kingdon(kalg)
        for g in (1, 2):
            x = a(g)
            ref = theirs(x.astype(np.float64).to_kingdon(kalg) @ kblade)
            cases.append((f"grade-{g} part projected onto a {grade}-blade", x.project(blade.astype(dtype)), ref,
                          norm_product(x), inv_tol))
    for name, ours, ref, scale, t in cases:
        assert ours.dtype == dtype, name
        try:
            assert_close(ours.values, ref, scale, t)
        except AssertionError as err:
            raise AssertionError(f"{name} in {alg!r} ({np.dtype(dtype).name}): {err}") from None


@pytest.mark.parametrize("signature", SIGNATURES)
def test_exp_of_simple_bivectors_against_kingdon(signature, rng):
    """kingdon exponentiates bivectors that square to a scalar (it raises NotImplementedError
    otherwise): cos/sin for B^2 < 0, cosh/sinh for B^2 > 0, 1 + B for B^2 = 0. A bivector in
    the span of three basis vectors is simple and its square has no 4-vector term at all, so
    every such bivector of the algebra is compared: rotations, boosts (Cl(3,1), Cl(4,1)),
    translations and null rotations (PGA, Cl(2,0,2))."""
    kalg = _kingdon(signature)
    alg = ALGEBRAS[signature]
    e = MultiVector.basis_vectors(alg)
    squares = set()
    for i, j, k in combinations(range(alg.n), 3):
        c = rng.standard_normal(3)
        variants = [c]
        if alg.metric[i] == 0:  # e_i null: e_i ^ (c0 e_j + c1 e_k) squares to 0 (a translation in PGA)
            variants.append(np.r_[c[:2], 0.0])
        for c in variants:
            B = c[0] * (e[i] ^ e[j]) + c[1] * (e[i] ^ e[k]) + c[2] * (e[j] ^ e[k])
            square = (B * B)["1"]
            squares.add(int(np.sign(square)) if abs(square) > 1e-12 else 0)
            kB = B.to_kingdon(kalg).filter(lambda v: v != 0)  # only the blades present: B^2 is a scalar
            ref = MultiVector.from_kingdon(kB.exp(), alg).values
            scale = max(1.0, float(np.linalg.norm(ref)))
            assert_close(B.exp().values, ref, scale, 1e-12)
            assert_close(B.astype(np.float32).exp().values, ref, scale, 1e-5)
    assert -1 in squares  # rotations in every signature here
    if -1 in alg.metric:
        assert 1 in squares  # boosts
    if 0 in alg.metric:
        assert 0 in squares  # translations, null rotations
