"""The token-resident kernels (galinear.rotor_kernels.resident) against the tile kernels, the float64
reference map of galinear.testing, and across thread counts; gradients through
galinear.nn.functional.rotor_sandwich against central differences of the resident kernel.

Tolerances: norm-wise relative error, galinear.testing.default_rtol (float32 1e-5, float64
1e-12), against the float64 reference on the same inputs and against the tile kernel in the same
dtype (both sum the same terms in different orders).
"""
import functools

import numpy as np
import pytest
import torch

from galinear.rotor_kernels import resident, rotor_chain
from galinear.nn import functional as F
from galinear.nn.functional import plan as dispatch
from galinear.nn.numba_backend import numba_sandwich
from galinear.testing import (
    assert_gradient_matches_fd,
    default_rtol,
    random_factor_case,
    reference_factor_map,
    relative_error,
    transposed_map_factors,
)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("n,B,P", [(1, 1, 2), (2, 3, 1), (3, 1, 2), (4, 5, 3), (5, 9, 1), (6, 1, 3), (7, 2, 1),
                                   (8, 1, 1)])
def test_matches_reference_and_tile_kernel(rng, n, B, P, double, dtype):
    x, factors = random_factor_case(rng, n, B, P, dtype, double)
    y = resident.sandwich_forward(x, *factors)
    assert y.dtype == dtype and y.shape == x.shape
    assert relative_error(y, reference_factor_map(x, factors)) < default_rtol(dtype)
    assert relative_error(y, rotor_chain.sandwich_forward(x, *factors)) < default_rtol(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)  # the transposed map
    gx = resident.sandwich_forward(g, *transposed_map_factors(factors))
    assert relative_error(gx, reference_factor_map(g, transposed_map_factors(factors))) < default_rtol(dtype)


@pytest.mark.parametrize("n,B", [(9, 1), (10, 3), (11, 1)])
def test_large_n_matches_tile_kernel(rng, n, B):
    x, factors = random_factor_case(rng, n, B, 1, np.float64, True)
    y = resident.sandwich_forward(x, *factors)
    assert relative_error(y, rotor_chain.sandwich_forward(x, *factors)) < 1e-12
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    assert relative_error(resident.sandwich_forward(y, *transposed_map_factors(factors)), x) < 1e-12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_thread_count_gives_identical_bits(rng, dtype):
    import numba
    x, factors = random_factor_case(rng, 7, 19, 3, dtype, True)  # 19 tokens: full and partial jobs
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            results.append(resident.sandwich_forward(x, *factors))
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(*results)


@pytest.fixture
def resident_backend():
    """The resident kernel registered as a backend of its own (values only)."""
    F.register_sandwich_backend("numba-resident", functools.partial(numba_sandwich, kernel="resident"))
    yield "numba-resident"
    F.unregister_sandwich_backend("numba-resident")


@pytest.mark.parametrize("point", ["random", "zero_angle", "large_angle"])
def test_gradient_matches_central_differences(point, resident_backend):
    """rotor_sandwich differentiates the map (through "factored"); the central differences run
    the resident kernel itself (no autograd there)."""
    gen = torch.Generator().manual_seed(5)
    n, B, P = 4, 3, 2
    x = torch.randn(B, P, 1 << n, generator=gen, dtype=torch.float64)
    factors = [torch.randn(P, 2, n, generator=gen, dtype=torch.float64) / 2 for _ in range(4)]
    if point == "zero_angle":
        factors[1] = 0.5 * factors[0]  # v parallel to w: theta = 0, the left rotor is 1
    if point == "large_angle":
        factors = [4.0 * f for f in factors]
    probe = torch.randn(B, P, 1 << n, generator=gen, dtype=torch.float64)
    for i in range(5):
        def loss(t, i=i):
            args = [x, *factors]
            args[i] = t
            return (F.rotor_sandwich(args[0], tuple(args[1:3]), tuple(args[3:5]), backend=resident_backend)
                    * probe).sum()
        assert_gradient_matches_fd(loss, [x, *factors][i], rtol=1e-8)


@pytest.mark.parametrize("tokens,expected", [(1, "resident"), (resident.RESIDENT_MAX_TOKENS, "resident"),
                                             (resident.RESIDENT_MAX_TOKENS + 1, "tile"), (2048, "tile")])
def test_the_plan_picks_the_kernel_by_the_cross_over(tokens, expected):
    assert dispatch.numba_kernel(tokens) == expected
    chosen = dispatch.plan(4, tokens, "cpu", torch.float64, "inference", backend="numba")
    assert chosen.options == (("kernel", expected),)
    assert chosen.fn.keywords == {"kernel": expected}


def test_backend_kernels_agree_and_bad_names_are_refused():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(11, 2, 32, generator=gen, dtype=torch.float64)
    factors = [torch.randn(2, 2, 5, generator=gen, dtype=torch.float64) for _ in range(4)]
    outs = [numba_sandwich(x, *factors, kernel=k) for k in ("auto", "resident", "tile")]
    for y in outs[1:]:
        assert relative_error(y.numpy(), outs[0].numpy()) < 1e-12
    with pytest.raises(ValueError, match="kernel must be one of"):
        numba_sandwich(x, *factors, kernel="fast")


def test_bad_input_is_refused(rng):
    x, (V, W) = random_factor_case(rng, 4, 2, 3, np.float64, False)
    with pytest.raises(ValueError, match="2\\*\\*n"):
        resident.sandwich_forward(x[..., :15], V, W)
    with pytest.raises(ValueError, match="shape \\(P, k, n\\)"):
        resident.sandwich_forward(x, V[:1], W[:1])
    with pytest.raises(TypeError, match="float32 or float64"):
        resident.sandwich_forward(x.astype(np.int64), V, W)


def test_empty_batch(rng):
    x, factors = random_factor_case(rng, 5, 0, 2, np.float32, True)
    assert resident.sandwich_forward(x, *factors).shape == x.shape
