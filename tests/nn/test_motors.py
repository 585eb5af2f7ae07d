"""galinear.nn.motors: PGA motors in torch against the numeric core and scipy's expm, gradients
against central differences (float64), and a rigid-body fit.

Tolerances: float64 1e-12 against the core and expm; float32 1e-5; gradients 1e-7 relative.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from galinear import Algebra  # noqa: E402
from galinear.core.signatures import left_matrix  # noqa: E402
from galinear.nn import motors  # noqa: E402
from galinear.testing import assert_gradient_matches_fd  # noqa: E402

ALG = Algebra(3, 0, 1)


def _cases(rng):
    return {
        "random": rng.standard_normal(6),
        "rotation": np.r_[0, 0, 0, rng.standard_normal(3)],
        "translation": np.r_[rng.standard_normal(3), 0, 0, 0],
        "zero": np.zeros(6),
        "small angle": np.r_[rng.standard_normal(3), 1e-4 * rng.standard_normal(3)],
    }


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_exp_matches_core_and_expm(dtype, tol):
    from scipy.linalg import expm

    rng = np.random.default_rng(0)
    for name, b in _cases(rng).items():
        full = ALG.bivector(b)
        want = expm(left_matrix(ALG, full[None])[0])[:, 0]
        got = motors.motor_exp(torch.tensor(b, dtype=dtype)).double().numpy()
        assert np.max(np.abs(got - want)) <= tol * max(1.0, np.max(np.abs(want))), name
        assert np.max(np.abs(got - ALG.exp(full))) <= tol * max(1.0, np.max(np.abs(want))), name


def test_log_inverts_exp():
    rng = np.random.default_rng(1)
    for name, b in _cases(rng).items():
        B = torch.tensor(b)
        assert torch.allclose(motors.motor_log(motors.motor_exp(B)), B, atol=1e-12, rtol=0), name
    batch = torch.tensor(rng.standard_normal((50, 6)) * 0.6)  # rotation angles below pi
    assert torch.allclose(motors.motor_log(motors.motor_exp(batch)), batch, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="pi"):
        motors.motor_log(motors.motor_exp(torch.tensor([0.0, 0, 0, np.pi, 0, 0])))
    with pytest.raises(ValueError, match="length 6"):
        motors.motor_exp(torch.zeros(4))


def test_sandwich_is_a_rigid_motion():
    rng = np.random.default_rng(2)
    M = motors.motor_exp(torch.tensor(rng.standard_normal(6)))
    xyz = torch.tensor(rng.standard_normal((20, 3)))
    moved = motors.point_coordinates(motors.sandwich(M, motors.point(xyz)))
    assert torch.allclose(torch.cdist(moved, moved), torch.cdist(xyz, xyz), atol=1e-12)
    want = ALG.gp(ALG.gp(M.numpy(), motors.point(xyz).numpy()), ALG.reverse(M.numpy()))
    assert np.max(np.abs(motors.sandwich(M, motors.point(xyz)).numpy() - want)) <= 1e-12


@pytest.mark.parametrize("case", ["random", "rotation", "translation", "zero", "small angle"])
def test_gradients_match_central_differences(case):
    rng = np.random.default_rng(3)
    b = torch.tensor(_cases(rng)[case])
    weights = torch.tensor(rng.standard_normal(16))
    xyz = torch.tensor(rng.standard_normal((4, 3)))
    assert_gradient_matches_fd(lambda B: (motors.motor_exp(B) * weights).sum(), b, rtol=1e-7)
    assert_gradient_matches_fd(lambda B: motors.point_coordinates(
        motors.sandwich(motors.motor_exp(B), motors.point(xyz))).square().sum(), b, rtol=1e-7)
    if case != "zero":  # log is differentiable away from theta = pi
        M = motors.motor_exp(b)
        assert_gradient_matches_fd(lambda m: (motors.motor_log(m) * weights[:6]).sum(), M, rtol=1e-6)


def test_fit_a_rigid_motion_by_gradient_descent():
    """Recover a motor from 30 point pairs by Adam on the squared distances."""
    rng = np.random.default_rng(4)
    true = torch.tensor([0.4, -0.3, 0.2, 0.3, -0.2, 0.5], dtype=torch.float64)
    xyz = torch.tensor(rng.standard_normal((30, 3)))
    target = motors.point_coordinates(motors.sandwich(motors.motor_exp(true), motors.point(xyz)))
    B = torch.zeros(6, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([B], lr=0.05)
    for _ in range(600):
        opt.zero_grad()
        moved = motors.point_coordinates(motors.sandwich(motors.motor_exp(B), motors.point(xyz)))
        loss = (moved - target).square().sum()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 1e-8
    assert torch.allclose(motors.motor_exp(B.detach()), motors.motor_exp(true), atol=1e-4)
