"""The numba transforms between multivectors and matrices (galinear.rotor_kernels.spinor) against the
numpy reference of galinear.matrix_rep."""
import numpy as np
import pytest

from galinear import matrix_rep
from galinear.rotor_kernels import spinor


def _layout(X, tab):
    """(B, irreps, N, N) reference matrices -> the kernels' (P * irreps, N, B, N) with P = 1."""
    return np.ascontiguousarray(np.transpose(X, (1, 2, 0, 3)))


@pytest.mark.parametrize("dtype,atol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("n", range(1, 12))
def test_to_matrix_matches_the_reference(n, dtype, atol):
    tab = matrix_rep.representation(n)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((11, 2, 2**n)).astype(dtype)
    mdtype = spinor.matrix_dtype(n, dtype)
    out = np.empty((2 * tab.irreps, tab.N, 7, tab.N), dtype=mdtype)
    spinor.to_matrix(x, out, start=3)
    for p in range(2):
        ref = _layout(matrix_rep.to_matrix(x[3:10, p].astype(np.float64), n), tab)
        got = out[p * tab.irreps:(p + 1) * tab.irreps]
        np.testing.assert_allclose(got, ref, atol=atol * np.sqrt(2**n))
    # back again: Y in (H, G, N, tokens, W) with H column blocks of W
    H, W = tab.blocks, tab.N // tab.blocks
    Y = np.ascontiguousarray(out.reshape(2 * tab.irreps, tab.N, 7, H, W).transpose(3, 0, 1, 2, 4))
    y = np.zeros_like(x)
    spinor.from_matrix(Y, y, start=3)
    np.testing.assert_allclose(y[3:10], x[3:10], atol=atol * 10)
    assert not np.any(y[:3]) and not np.any(y[10:])


def test_bad_arguments_name_the_problem():
    x = np.zeros((4, 1, 8))
    with pytest.raises(ValueError, match="out must have shape"):
        spinor.to_matrix(x, np.empty((1, 2, 4, 3), dtype=np.complex128))
    with pytest.raises(ValueError, match="complex128"):
        spinor.to_matrix(x, np.empty((1, 2, 4, 2), dtype=np.complex64))
    with pytest.raises(ValueError, match="2\\*\\*n"):
        spinor.to_matrix(np.zeros((4, 1, 6)), np.empty((1, 2, 4, 2), dtype=np.complex128))
    with pytest.raises(ValueError, match="Y must have shape"):
        spinor.from_matrix(np.zeros((1, 1, 2, 4, 3), dtype=np.complex128), x)
