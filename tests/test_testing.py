"""The references and tolerances of galinear.testing, which the other tests trust.

The float64 references are checked against facts that need no galinear code: the Cayley tables
of galinear.blades (built blade by blade, another route than the bitmask routines the reference
uses), scipy's matrix exponential, and rotor identities (R R~ = 1, |R x R~| = |x|).
"""
import numpy as np
import pytest

from galinear import blades
from galinear.testing import (
    TOLERANCES,
    assert_close,
    default_rtol,
    random_factor_case,
    reference_factor_map,
    reference_gp,
    reference_reverse,
    reference_rotor_map,
    reference_sandwich,
    relative_error,
    rotor_from_rows,
    transposed_map_factors,
)


def _cayley_gp(a, b, metric):
    index, sign = blades.cayley_tables(metric)
    outer = a[..., :, None] * b[..., None, :] * sign
    return np.stack([outer[..., index == k].sum(axis=-1) for k in range(index.shape[0])], axis=-1)


@pytest.mark.parametrize("metric", [1, 3, (1, -1), (0, 1, -1), (1, 1, 1, -1), 5])
def test_gp_matches_the_cayley_tables(rng, metric):
    dim = 1 << (metric if isinstance(metric, int) else len(metric))
    a, b = rng.standard_normal((3, dim)), rng.standard_normal((3, dim))
    np.testing.assert_allclose(reference_gp(a, b, metric), _cayley_gp(a, b, metric), rtol=0, atol=1e-13)
    sparse = a * (rng.random(dim) < 0.3)  # the loop runs over the sparser operand: both orders
    np.testing.assert_allclose(reference_gp(sparse, b, metric), _cayley_gp(sparse, b, metric), rtol=0, atol=1e-13)
    np.testing.assert_allclose(reference_gp(b, sparse, metric), _cayley_gp(b, sparse, metric), rtol=0, atol=1e-13)


def test_gp_refuses_mismatched_operands():
    with pytest.raises(ValueError, match="2\\*\\*n"):
        reference_gp(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="different algebras"):
        reference_gp(np.ones(4), np.ones(8))
    with pytest.raises(ValueError, match="does not fit"):
        reference_gp(np.ones(8), np.ones(8), (1, 1))


@pytest.mark.parametrize("n", [2, 4, 5])
def test_bivector_and_factor_rotors_agree_on_orthogonal_planes(rng, n):
    """Factors in orthogonal planes commute: R_0 ... R_{k-1} = exp(b_0 + ... + b_{k-1})."""
    k, P = n // 2, 3
    V, W = np.zeros((P, k, n)), np.zeros((P, k, n))
    angles = rng.uniform(-3, 3, (P, k))
    for j in range(k):
        V[:, j, 2 * j], W[:, j, 2 * j + 1] = 1.0, angles[:, j]
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    V, W = V @ Q.T, W @ Q.T
    i, j = blades.bivector_pairs(n).T
    bivectors = (V[..., i] * W[..., j] - V[..., j] * W[..., i]).sum(-2)
    x = rng.standard_normal((4, P, 1 << n))
    y = reference_rotor_map(x, (V, W))
    np.testing.assert_allclose(y, reference_rotor_map(x, bivectors), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-13)


@pytest.mark.parametrize("n", [3, 6, 11])
def test_factor_map_is_orthogonal_and_its_transpose_inverts_it(rng, n):
    x, factors = random_factor_case(rng, n, 2, 2, double=True)
    y = reference_factor_map(x, factors)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    assert relative_error(reference_factor_map(y, transposed_map_factors(factors)), x) < 1e-12
    with pytest.raises(ValueError, match="got 3 arrays"):
        reference_factor_map(x, factors[:3])


def test_rotors_are_unit_and_zero_angles_are_the_identity(rng):
    n = 4
    R = rotor_from_rows(np.concatenate([[np.cos(0.4)], np.sin(0.4) * np.eye(6)[2]]), n)
    one = reference_gp(R, reference_reverse(R))
    np.testing.assert_allclose(one, np.eye(16)[0], atol=1e-15)
    x = rng.standard_normal((2, 1, 16))
    V = rng.standard_normal((1, 2, n))
    np.testing.assert_allclose(reference_rotor_map(x, (V, 0.5 * V)), x, atol=1e-15)  # v parallel to w
    np.testing.assert_allclose(reference_rotor_map(x, np.zeros((1, 6))), x, atol=1e-15)
    np.testing.assert_allclose(reference_sandwich(x, [R, R], [R, R]), reference_sandwich(x, reference_gp(R, R)),
                               atol=1e-14)
    with pytest.raises(ValueError, match="1 \\+ C\\(n, 2\\) = 7"):
        rotor_from_rows(np.ones(6), n)


def test_one_tolerance_table_for_numpy_and_torch_dtypes():
    torch = pytest.importorskip("torch")
    assert default_rtol(np.float64) == default_rtol(torch.float64) == default_rtol("float64") == 1e-12
    assert default_rtol(np.float32, "chain") == default_rtol(torch.float32, "chain") == TOLERANCES["float32"]["chain"]
    assert default_rtol(np.int64) == TOLERANCES["float64"]["product"]
    with pytest.raises(ValueError, match="kind must be one of"):
        default_rtol(np.float64, "loose")


def test_assert_close_measures_rows_against_their_scale():
    want = np.array([[1.0, 2.0], [100.0, 0.0]])
    assert_close(want + np.array([[0.0, 5e-13], [5e-11, 0.0]]), want, scale=np.array([1.0, 100.0]))
    with pytest.raises(AssertionError, match="row 0 differs by 5e-12"):
        assert_close(want + np.array([[0.0, 5e-12], [0.0, 0.0]]), want, scale=np.array([1.0, 100.0]))
    assert_close(want.astype(np.float32) * (1 + 4e-6), want)  # float32 actual: rtol 1e-5
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close(want[:1], want)


def test_payload_is_live(tmp_path):
    """Control for the loader tests: galinear.testing.payloads' pickle does run code when a plain
    unpickler reads it (so a loader that unpickled it would be caught)."""
    import pickle

    from galinear.testing.payloads import write_payload

    write_payload(tmp_path / "evil.pkl", tmp_path / "marker", kind="pickle")
    with open(tmp_path / "evil.pkl", "rb") as handle:
        pickle.load(handle)
    assert (tmp_path / "marker").exists()
