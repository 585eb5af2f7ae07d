"""One autograd Function per exact rotor op (galinear.nn.dexp): the sandwich map, the parity blocks
and the rotor exponential, each with its own backward pass, checked against central differences
of its own forward (decomposition included) in float64 at random and special points: zero,
tiny and large bivectors, equal and nearly equal angles, nearly simple bivectors."""
import numpy as np
import pytest
import torch

from galinear.nn import dexp
from galinear.nn import functional as F
from galinear.testing import assert_gradient_matches_fd, rotor_cases

N = 4  # the smallest n with two planes: every special case of rotor_cases exists
CASES = sorted(rotor_cases(N, pairs=1))


def _factors(b):
    with torch.no_grad():
        V, W, spec = F.exact_factors(b, N)
    return (V, W), spec


def _inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    B = torch.tensor(rotor_cases(N, pairs=1, seed=seed)[case])
    C = torch.tensor(np.roll(rotor_cases(N, pairs=1, seed=seed + 1)[case], 1, axis=-1) * 0.5)
    x = torch.tensor(rng.standard_normal((3, 1, 2**N)))
    return B, C, x


def _weights(shape, seed=1):
    return torch.tensor(np.random.default_rng(seed).standard_normal(shape))


def _check(loss, point, case):
    """autograd's gradient of ``loss`` at ``point`` equals central differences; large bivectors
    take a larger step (an angle is known to angle * eps only)."""
    step = 1e-3 if case == "large" else 1e-4
    assert assert_gradient_matches_fd(loss, point, rtol=1e-6, step=step) <= 1e-6, case


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("double", [False, True])
def test_sandwich_map_gradient(case, double):
    B, C, x = _inputs(case)
    weights = _weights(x.shape)
    backend = F.resolve_sandwich_backend("factored", "cpu", torch.float64)[1]

    def forward(x, B, C):
        left, spec_l = _factors(B)
        right, spec_r = _factors(C) if double else (None, None)
        y = dexp.exact_rotor_sandwich(x, B, C if double else None, left, right, backend=backend,
                                      spectra=(spec_l, spec_r))
        return (weights * y).sum()

    _check(lambda b: forward(x, b, C), B, case)
    _check(lambda t: forward(t, B, C), x, case)
    if double:
        _check(lambda c: forward(x, B, c), C, case)
    left, _ = _factors(B)
    y = dexp.exact_rotor_sandwich(x, B.requires_grad_(), None, left)
    assert type(y.grad_fn).__name__ == "SandwichMapBackward"


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("double", [False, True])
def test_parity_blocks_gradient(case, double):
    B, C, _ = _inputs(case)
    weights = _weights((1, 2, 2**(N - 1), 2**(N - 1)))

    def forward(B, C):
        left, spec_l = _factors(B)
        right, spec_r = _factors(C) if double else (None, None)
        blocks = dexp.exact_parity_blocks(B, C if double else None, left, right, (spec_l, spec_r))
        return (weights * blocks).sum()

    _check(lambda b: forward(b, C), B, case)
    if double:
        _check(lambda c: forward(B, c), C, case)
    left, _ = _factors(B)
    blocks = dexp.exact_parity_blocks(B.requires_grad_(), None, left)
    assert type(blocks.grad_fn).__name__ == "ParityBlocksMapBackward"


@pytest.mark.parametrize("case", CASES)
def test_rotor_exp_gradient(case):
    B, _, _ = _inputs(case)
    weights = _weights((1, 2**N))
    _check(lambda b: (weights * dexp.rotor_exp(b)).sum(), B, case)
    assert type(dexp.rotor_exp(B.requires_grad_()).grad_fn).__name__ == "RotorExpBackward"


def test_each_function_vmaps_over_rotors():
    """A batch of rotors runs one by one through each Function's vmap rule."""
    B = torch.tensor(rotor_cases(N, pairs=2)["random"])                   # (2, 6)
    (V, W), _ = _factors(B)
    B, V, W = B.unsqueeze(1), V.unsqueeze(1), W.unsqueeze(1)               # a batch of 2 single rotors
    x = torch.randn(3, 1, 2**N, dtype=torch.float64)
    fn = F.resolve_sandwich_backend("factored", "cpu", torch.float64)[1]
    runs = {
        "exp": lambda b, v, w: dexp.rotor_exp(b, (v, w)),
        "blocks": lambda b, v, w: dexp.exact_parity_blocks(b, None, (v, w)),
        "sandwich": lambda b, v, w: dexp.exact_rotor_sandwich(x, b, None, (v, w), backend=fn),
    }
    for name, run in runs.items():
        batched = torch.func.vmap(run)(B, V, W)
        assert torch.allclose(batched, torch.stack([run(*args) for args in zip(B, V, W)]), atol=1e-12), name
