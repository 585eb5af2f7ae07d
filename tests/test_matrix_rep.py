"""The matrix representation of Euclidean Cl(n) (galinear.matrix_rep), checked against the
clifford package's geometric product and against the blade sign rule of galinear.blades."""
import functools

import clifford
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from galinear import matrix_rep
from galinear.blades import bitmask_to_shortlex, blade_grades, blade_product_sign, shortlex_bitmasks


@pytest.mark.parametrize("n", range(1, 13))
def test_gamma_matrices_are_hermitian_and_anticommute(n):
    tab = matrix_rep.representation(n)
    for irrep in range(tab.irreps):
        g = matrix_rep.gamma_matrices(n, irrep)
        assert g.shape == (n, tab.N, tab.N)
        for i in range(n):
            np.testing.assert_array_equal(g[i], g[i].conj().T)
            for j in range(n):
                np.testing.assert_array_equal(g[i] @ g[j] + g[j] @ g[i], 2.0 * (i == j) * np.eye(tab.N))
        if tab.real:
            assert not np.any(g.imag)


def test_sizes_and_kinds_follow_the_classification():
    # Cl(n, 0): R+R, M2(R), M2(C), M2(H), 2 M2(H), M4(H), M8(C), M16(R), 2 M16(R), M32(R), M32(C), M32(H)
    kinds = {n: (matrix_rep.representation(n).N, matrix_rep.representation(n).irreps,
                 matrix_rep.representation(n).real) for n in range(1, 13)}
    assert kinds == {1: (1, 2, True), 2: (2, 1, True), 3: (2, 1, False), 4: (4, 1, False), 5: (4, 2, False),
                     6: (8, 1, False), 7: (8, 1, False), 8: (16, 1, True), 9: (16, 2, True),
                     10: (32, 1, True), 11: (32, 1, False), 12: (64, 1, False)}
    with pytest.raises(ValueError, match="n >= 1"):
        matrix_rep.representation(0)


@pytest.mark.parametrize("n", range(1, 11))
def test_blades_multiply_by_the_sign_rule(n):
    tab = matrix_rep.representation(n)
    masks = shortlex_bitmasks(n)
    where = bitmask_to_shortlex(n)
    rng = np.random.default_rng(n)
    for a, b in rng.integers(0, 2**n, size=(40, 2)):
        sign = blade_product_sign(int(masks[a]), int(masks[b]), (1,) * n)
        for irrep in range(tab.irreps):
            product = matrix_rep.blade_matrix(n, a, irrep) @ matrix_rep.blade_matrix(n, b, irrep)
            np.testing.assert_array_equal(product, sign * matrix_rep.blade_matrix(n, where[masks[a] ^ masks[b]], irrep))


@functools.lru_cache(maxsize=None)
def _layout(n):
    """One clifford layout per n: clifford compiles the product of each new layout (about 0.5 s)."""
    return clifford.Cl(n)[0]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 7), seed=st.integers(0, 2**31 - 1))
def test_phi_is_a_homomorphism_against_clifford(n, seed):
    layout = _layout(n)
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, 2**n))
    product = (layout.MultiVector(value=a) * layout.MultiVector(value=b)).value
    Pa, Pb, Pab = (matrix_rep.to_matrix(v, n) for v in (a, b, product))
    np.testing.assert_allclose(Pa @ Pb, Pab, atol=1e-12 * (1 + np.abs(Pab).max()))
    # reversion is the conjugate transpose
    reverse = np.where((blade_grades(n) * (blade_grades(n) - 1) // 2) % 2, -1.0, 1.0)
    np.testing.assert_allclose(matrix_rep.to_matrix(a * reverse, n), np.conj(np.swapaxes(Pa, -1, -2)), atol=1e-13)


@pytest.mark.parametrize("n", range(1, 11))
def test_to_matrix_and_back(n):
    tab = matrix_rep.representation(n)
    rng = np.random.default_rng(10 + n)
    x = rng.standard_normal((3, 2**n))
    X = matrix_rep.to_matrix(x, n)
    assert X.shape == (3, tab.irreps, tab.N, tab.N)
    order = tab.order
    direct = sum(x[0, c] * matrix_rep.blade_matrix(n, c, 0) for c in range(2**n))
    np.testing.assert_allclose(X[0, 0], direct[np.ix_(order, order)], atol=1e-12)
    np.testing.assert_allclose(matrix_rep.from_matrix(X, n), x, atol=1e-12)
    if tab.real:
        assert not np.any(X.imag)
    if tab.blocks == 2:  # even elements (rotors) are block diagonal in the block order
        even = matrix_rep.to_matrix(x * (blade_grades(n) % 2 == 0), n)
        h = tab.N // 2
        assert not np.any(even[..., :h, h:]) and not np.any(even[..., h:, :h])
