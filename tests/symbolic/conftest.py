"""Shared references for the symbolic-layer tests (numpy, from galinear.blades)."""
import numpy as np
import pytest

from galinear import blades

#: (rtol, atol) per dtype for products of O(1) random inputs; reference maths in float64.
TOLERANCE = {np.float32: (2e-5, 2e-5), np.float64: (1e-12, 1e-12)}


def numpy_gp(a, b, metric):
    """Reference geometric product via blades.cayley_tables: out[k] = sum sign[i,j] a_i b_j."""
    index, sign = blades.cayley_tables(metric)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    dim = index.shape[0]
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape)[:-1] + (dim,))
    outer = a[..., :, None] * b[..., None, :] * sign
    for k in range(dim):
        out[..., k] = outer[..., index == k].sum(axis=-1)
    return out


def numpy_reverse(x, n):
    g = blades.blade_grades(n)
    return x * np.where((g * (g - 1) // 2) % 2, -1.0, 1.0)


def rotor_rows(r, n):
    """Full multivectors (batch, 2**n) from simple-rotor rows (scalar, bivector coefficients)."""
    out = np.zeros(r.shape[:-1] + (1 << n,))
    out[..., 0] = r[..., 0]
    pos = blades.bitmask_to_shortlex(n)
    for p, (i, j) in enumerate(blades.bivector_pairs(n).tolist()):
        out[..., pos[(1 << i) | (1 << j)]] = r[..., 1 + p]
    return out


def assert_close(actual, expected, dtype):
    rtol, atol = TOLERANCE[dtype]
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol * scale)


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    return request.param
