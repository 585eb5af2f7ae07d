"""One power-decomposition contract for numpy (galinear.core.rotors) and torch (galinear.nn).

The rotor spec (galinear.symbolic.rotor_maths, "Power decomposition contract") states the start
vectors, the stop test, the last plane (one step), the scaling by max|b|, the restart from the
longest column, the vanishing threshold and the fallback to the eigen-decomposition. Both
implementations run on the same cases (galinear.testing.rotor_cases plus huge and restart cases)
and must give the same parts, each simple, summing to B, with exp of the parts = expm (dense).
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from galinear._generated import rotor_spec
from galinear.core import rotors
from galinear.nn import functional as F
from galinear.nn.functional.rotors import simple_rtol
from galinear.testing import rotor_cases

# float64: both follow the same iteration from the same start, so parts agree to rounding of the
# iteration (stop tolerance 1e-10 on |v_new + v| moves the planes by at most ~1e-10 |B|);
# float32: stop tolerance 1e-5.
TOLERANCE = {np.float64: 1e-8, np.float32: 2e-3}


def _cases(n):
    cases = rotor_cases(n, pairs=3, seed=n)
    cases["huge"] = 1e150 * cases["random"]  # A^2 v would overflow float64 without the scaling
    cases["restart"] = np.zeros_like(cases["random"])
    cases["restart"][:, 0] = 0.9  # e12 only: the start vector of plane 2 may be annihilated
    return cases


def _torch_parts(b, dtype):
    pairs = F.invariant_decomposition(torch.tensor(b, dtype=torch.float64 if dtype == np.float64 else torch.float32),
                                      method="power")
    return F.factors_to_bivectors(pairs.V, pairs.W).numpy()


def _rotation(n, b):
    """expm(2 A): the vector part of e^B x e^-B (scipy, independent of both implementations)."""
    return scipy.linalg.expm(2 * rotors.skew_matrix(n, b.astype(np.float64)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [4, 5, 6, 7, 8])
def test_numpy_and_torch_power_decompositions_agree_on_every_case(n, dtype):
    tol = TOLERANCE[dtype]
    for name, cases in _cases(n).items():
        if dtype == np.float32 and name == "huge":
            cases = cases * 1e-150 * 1e30  # above float32's overflow of A^2 without the scaling
        b = cases.astype(dtype)
        core = rotors.decompose_power(n, b).bivectors
        nn = _torch_parts(b, dtype)
        size = max(float(np.abs(b).max()), np.finfo(dtype).tiny)
        assert np.isfinite(core).all() and np.isfinite(nn).all(), name
        assert np.isfinite(rotors.decompose_power(n, b).angles).all(), name
        if name != "nearly_equal":  # there a plane pair is defined only to ~1e-7: compared by its rotation below
            np.testing.assert_allclose(nn / size, core / size, atol=tol, rtol=0, err_msg=name)
        np.testing.assert_allclose(nn.sum(axis=-2) / size, b / size, atol=tol, rtol=0, err_msg=name)
        if name in ("huge", "tiny", "zero") or dtype == np.float32:
            continue
        for row in range(b.shape[0]):  # exp of the parts (they commute when converged) = expm(B)
            for parts in (nn, core):
                product = np.eye(n)
                for part in parts[row]:
                    product = product @ _rotation(n, part)
                np.testing.assert_allclose(product, _rotation(n, b[row]), atol=1e-7, err_msg=name)


def test_the_last_plane_takes_one_step_in_both():
    n = 6
    b = rotor_cases(n, pairs=2)["random"]
    dec = rotors.decompose_power(n, b)
    assert (dec.iterations[:, -1] == rotor_spec.POWER_LAST_PLANE_STEPS).all()
    # torch, a single pass from the same start: the last plane moved by exactly one step
    start = torch.tensor(rotors.default_start(n), dtype=torch.float64).expand(2, n // 2, n)
    one = F.invariant_decomposition(torch.tensor(b), start, method="power", refresh=False, max_iter=1)
    many = F.invariant_decomposition(torch.tensor(b), start, method="power", refresh=False)
    assert one.V.shape == many.V.shape


def test_both_fall_back_to_the_eigen_decomposition_where_the_iteration_does_not_converge():
    n = 6
    b = rotor_cases(n, pairs=3)["nearly_equal"]
    core = rotors.decompose_power(n, b, max_iter=3)
    assert not core.converged[:, :-1].all()  # the flags still say the iteration did not converge
    exact = rotors.decompose_exact(n, b).bivectors
    np.testing.assert_allclose(core.bivectors, exact, atol=1e-12)
    nn = F.invariant_decomposition(torch.tensor(b), method="power", max_iter=3)
    np.testing.assert_allclose(F.factors_to_bivectors(nn.V, nn.W).numpy(), exact, atol=1e-12)
    # without the fallback numpy keeps the parts of the finite iteration: simple, summing to B
    raw = rotors.decompose_power(n, b, max_iter=3, fallback=False)
    np.testing.assert_allclose(raw.bivectors.sum(axis=-2), b, atol=1e-12)


def test_both_restart_from_the_longest_column():
    n = 6
    b = np.zeros((1, 15))
    b[0, 0], b[0, 9], b[0, 14] = 0.9, 0.5, 0.2  # e12, e34, e56
    start = np.zeros((1, 3, 6))
    start[0, 0, 5] = start[0, 1, 0] = start[0, 2, 0] = 1.0  # plane 2 starts at e1, annihilated after plane 1
    core = rotors.decompose_power(n, b, start=start, tol=1e-13, max_iter=1000)
    nn = F.invariant_decomposition(torch.tensor(b), torch.tensor(start), method="power", tol=1e-13, max_iter=1000)
    angles_nn = np.linalg.norm(F.factors_to_bivectors(nn.V, nn.W).numpy(), axis=-1)
    np.testing.assert_allclose(np.sort(core.angles[0])[::-1], [0.9, 0.5, 0.2], atol=1e-10)
    np.testing.assert_allclose(np.sort(angles_nn[0])[::-1], [0.9, 0.5, 0.2], atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_simplicity_tolerance(dtype):
    key = str(dtype).removeprefix("torch.")
    assert simple_rtol(dtype) == rotor_spec.SIMPLE_RTOL[key]
    eps = torch.finfo(dtype).eps
    assert 0.5 * eps**0.5 <= simple_rtol(dtype) <= 2 * eps**0.5
    # numpy and torch refuse the same non-simple bivector, and accept a wedge
    n = 4
    not_simple = np.zeros(6, dtype=key)
    not_simple[0] = not_simple[5] = 1.0  # e12 + e34
    with pytest.raises(ValueError, match="simple"):
        rotors.check_simple(n, not_simple)
    with pytest.raises(ValueError, match="simple"):
        F.exp_simple(torch.tensor(not_simple))
    wedge = rotors.wedge(n, np.array([1.0, 2, 0, 1], dtype=key), np.array([0.0, 1, 3, -1], dtype=key))
    rotors.check_simple(n, wedge)
    F.exp_simple(torch.tensor(wedge))
