"""galinear.nn.butterfly.Butterfly against a dense product of Givens matrices built from the
definition (numpy, float64), its orthogonality, its inverse and its gradients against central
differences.

Tolerances: float64 1e-12 and float32 1e-5 relative (the testing table); gradients 1e-7.
"""
import math

import numpy as np
import pytest
import torch
from torch.func import functional_call

from galinear.nn.butterfly import Butterfly
from galinear.testing import assert_close, assert_gradient_matches_fd, assert_orthogonal

SIZES = [2, 4, 8, 32]
DTYPES = [torch.float32, torch.float64]


def reference_matrix(angles: np.ndarray) -> np.ndarray:
    """The product G_{L-1} ... G_0 of dense Givens layers; layer l rotates (a, a + 2^l) for every a
    whose bit l is 0, by angles[l][k 2^l + j] with k = a // 2^(l+1), j = a mod 2^l."""
    depth, half = angles.shape
    n = 2 * half
    M = np.eye(n)
    for level in range(depth):
        s = 1 << level
        G = np.eye(n)
        for a in range(n):
            if a & s:
                continue
            theta = angles[level][(a // (2 * s)) * s + a % s]
            b = a + s
            G[a, a], G[a, b], G[b, a], G[b, b] = math.cos(theta), -math.sin(theta), math.sin(theta), math.cos(theta)
        M = G @ M
    return M


def random_butterfly(n, dtype, seed=0, scale=1.0):
    module = Butterfly(n, dtype=dtype)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        module.angles.copy_(scale * torch.randn(module.angles.shape, generator=generator, dtype=torch.float64))
    return module


def test_shape_and_identity_at_init():
    module = Butterfly(16)
    assert module.angles.shape == (4, 8)
    assert not module.angles.any()
    x = torch.randn(3, 16)
    assert torch.equal(module(x), x)
    assert sum(p.numel() for p in module.parameters()) == 32


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_is_orthogonal_and_matches_reference(n, dtype):
    module = random_butterfly(n, dtype, seed=n)
    with torch.no_grad():
        M = module.matrix()
    assert M.dtype == dtype and M.shape == (n, n)
    eps = torch.finfo(dtype).eps
    assert_orthogonal(M.double().numpy(), atol=20 * eps * math.log2(n))
    expected = reference_matrix(module.angles.detach().double().numpy())
    assert_close(M.double().numpy(), expected, scale=1.0, rtol=20 * eps * math.log2(n))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_equals_dense_and_inverse_is_transpose(n, dtype):
    module = random_butterfly(n, dtype, seed=1)
    x = torch.randn(2, 5, n, dtype=dtype, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        M = module.matrix()
        y = module(x)
        assert_close(y.numpy(), (x @ M.T).numpy(), scale=float(x.abs().max()))
        assert_close(module.inverse(x).numpy(), (x @ M).numpy(), scale=float(x.abs().max()))
        assert_close(module.inverse(y).numpy(), x.numpy(), scale=float(x.abs().max()), rtol=1e-4 if dtype == torch.float32 else 1e-12)
    assert module(torch.randn(n, dtype=dtype)).shape == (n,)


def _loss(module, x, weight):
    def f(angles):
        return (functional_call(module, {"angles": angles}, (x,)) * weight).sum()
    return f


ANGLE_CASES = {
    "random": lambda shape, g: torch.randn(shape, generator=g, dtype=torch.float64),
    "zero": lambda shape, g: torch.zeros(shape, dtype=torch.float64),
    "equal": lambda shape, g: torch.full(shape, 0.7, dtype=torch.float64),
    "half_pi": lambda shape, g: torch.full(shape, math.pi / 2, dtype=torch.float64),
    "large": lambda shape, g: 50.0 + 20 * torch.randn(shape, generator=g, dtype=torch.float64),
}


@pytest.mark.parametrize("case", sorted(ANGLE_CASES))
@pytest.mark.parametrize("n", [2, 8])
def test_gradient_against_central_differences(case, n):
    g = torch.Generator().manual_seed(3)
    module = Butterfly(n, dtype=torch.float64)
    x = torch.randn(4, n, generator=g, dtype=torch.float64)
    weight = torch.randn(4, n, generator=g, dtype=torch.float64)
    angles = ANGLE_CASES[case](module.angles.shape, g)
    assert_gradient_matches_fd(_loss(module, x, weight), angles, rtol=1e-7)
    # and with respect to the input, through forward and inverse
    assert_gradient_matches_fd(lambda v: (functional_call(module, {"angles": angles}, (v,)) * weight).sum(), x)
    with torch.no_grad():
        module.angles.copy_(angles)
    assert_gradient_matches_fd(lambda v: (module.inverse(v) * weight).sum(), x)


@pytest.mark.parametrize("bad", [0, 1, 3, 6, 12, -4, 2.0, True])
def test_bad_n_raises(bad):
    with pytest.raises(ValueError, match="power of two >= 2"):
        Butterfly(bad)


def test_bad_input_width_and_dtype():
    with pytest.raises(ValueError, match="last dimension of 8"):
        Butterfly(8)(torch.randn(2, 4))
    with pytest.raises(TypeError):
        Butterfly(8, dtype=torch.int64)
