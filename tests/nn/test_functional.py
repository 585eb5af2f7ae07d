"""galinear.nn.functional against independent references: clifford, blades' Cayley tables,
scipy's expm and Hadamard matrices, dense matrices; gradchecks in float64."""
import math

import numpy as np
import pytest
import scipy.linalg
import torch

from galinear.blades import bivector_pairs, blade_grades, cayley_tables
from galinear.nn import functional as F

# (rtol-free) absolute tolerances for dense vs factored maps, as promised in docs/nn.md
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]


def generator(rng):
    return torch.Generator().manual_seed(int(rng.integers(2**31)))


def random_factors(gen, P, n, dtype, scale=1.0):
    k = n // 2
    V = torch.randn(P, k, n, generator=gen, dtype=torch.float64) * scale
    W = torch.randn(P, k, n, generator=gen, dtype=torch.float64) * scale
    return V.to(dtype), W.to(dtype)


def gp_reference(a, b, n):
    """Geometric product through galinear.blades' Cayley tables (numpy, float64)."""
    index, sign = cayley_tables(n)
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape))
    for i in range(2**n):
        for j in range(2**n):
            out[..., index[i, j]] += sign[i, j] * a[..., i] * b[..., j]
    return out


def vector_mv(v, n):
    out = np.zeros(v.shape[:-1] + (2**n,))
    out[..., 1 : n + 1] = v
    return out


def reverse_np(x, n):
    g = blade_grades(n)
    return x * np.where((g * (g - 1) // 2) % 2, -1.0, 1.0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_vector_products_match_cayley_tables(rng, n):
    x = rng.standard_normal((3, 2, 2**n))
    v = rng.standard_normal((2, n))
    left = F.left_vector_product(torch.tensor(x), torch.tensor(v)).numpy()
    right = F.right_vector_product(torch.tensor(x), torch.tensor(v)).numpy()
    np.testing.assert_allclose(left, gp_reference(vector_mv(v, n)[None], x, n), atol=1e-12)
    np.testing.assert_allclose(right, gp_reference(x, vector_mv(v, n)[None], n), atol=1e-12)


def test_rotor_and_sandwich_match_clifford(rng):
    clifford = pytest.importorskip("clifford")
    n = 4
    layout, _ = clifford.Cl(n)
    gen = generator(rng)
    V, W = random_factors(gen, 1, n, torch.float64)
    VR, WR = random_factors(gen, 1, n, torch.float64)
    x = rng.standard_normal(2**n)

    def rotor_in_clifford(V, W):
        rotor = layout.scalar * 1.0
        for v, w in zip(V[0].numpy(), W[0].numpy()):
            vec_v = layout.MultiVector(vector_mv(v, n))
            vec_w = layout.MultiVector(vector_mv(w, n))
            b = vec_v ^ vec_w
            theta = math.sqrt(abs(float((b * ~b).value[0])))
            rotor = rotor * (math.cos(theta) + math.sin(theta) / theta * b)
        return rotor

    R, S = rotor_in_clifford(V, W), rotor_in_clifford(VR, WR)
    np.testing.assert_allclose(F.compose_rotors(V, W)[0].numpy(), R.value, atol=1e-12)
    expected = (R * layout.MultiVector(x) * ~S).value
    for backend in ("dense", "factored"):
        y = F.rotor_sandwich(torch.tensor(x)[None, None], (V, W), (VR, WR), backend=backend)
        np.testing.assert_allclose(y[0, 0].numpy(), expected, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("double", [False, True])
def test_dense_and_factored_agree(rng, dtype, n, double):
    gen = generator(rng)
    P = 3
    left = random_factors(gen, P, n, dtype)
    right = random_factors(gen, P, n, dtype) if double else None
    x = torch.randn(5, P, 2**n, generator=gen, dtype=torch.float64).to(dtype)
    dense = F.rotor_sandwich(x, left, right, backend="dense")
    factored = F.rotor_sandwich(x, left, right, backend="factored")
    assert (dense - factored).abs().max().item() <= TOL[dtype]
    # both orthogonal: norms preserved
    torch.testing.assert_close(factored.norm(dim=-1), x.norm(dim=-1), atol=TOL[dtype] * 10, rtol=0)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_sandwich_matrix_orthogonal_and_grade_structure(rng, n):
    gen = generator(rng)
    left = random_factors(gen, 2, n, torch.float64)
    right = random_factors(gen, 2, n, torch.float64)
    eye = torch.eye(2**n, dtype=torch.float64)
    grades = torch.tensor(blade_grades(n))
    single = F.sandwich_matrix(left)
    double = F.sandwich_matrix(left, right)
    for M in (single, double):
        torch.testing.assert_close(M @ M.transpose(-1, -2), eye.expand_as(M), atol=1e-12, rtol=0)
    # single rotor: grade-preserving; double rotor: parity-preserving
    assert single[:, grades[:, None] != grades[None, :]].abs().max() < 1e-12
    assert double[:, (grades[:, None] - grades[None, :]) % 2 == 1].abs().max() < 1e-12
    assert double[:, grades[:, None] != grades[None, :]].abs().max() > 1e-3


@pytest.mark.parametrize("method", ["power", "exact"])
@pytest.mark.parametrize("n", [3, 4, 5, 6, 7])
def test_decomposition_reproduces_expm(rng, method, n):
    """Vector block of exp(B) x exp(B)~ is expm(2A) (scipy), and the planes sum to B."""
    m = n * (n - 1) // 2
    b = torch.tensor(rng.standard_normal((3, m)))
    dec = F.invariant_decomposition(b, tol=1e-13, max_iter=5000, method=method)
    torch.testing.assert_close(F.factors_to_bivectors(dec.V, dec.W).sum(-2), b, atol=1e-9, rtol=0)
    M = F.sandwich_matrix((dec.V, dec.W))
    A = F.bivector_to_skew(b).numpy()
    for p in range(3):
        np.testing.assert_allclose(M[p, 1 : n + 1, 1 : n + 1].numpy(), scipy.linalg.expm(2 * A[p]), atol=1e-9)


def test_power_and_exact_agree_at_convergence(rng):
    b = torch.tensor(rng.standard_normal((4, 15)))
    power = F.invariant_decomposition(b, tol=1e-13, max_iter=5000)
    exact = F.invariant_decomposition(b, method="exact")
    torch.testing.assert_close(
        F.factors_to_bivectors(power.V, power.W), F.factors_to_bivectors(exact.V, exact.W), atol=1e-9, rtol=0
    )


def test_power_iteration_is_per_row_and_warm_starts(rng):
    gen = generator(rng)
    easy = torch.zeros(10, dtype=torch.float64)
    easy[0], easy[-1] = 2.0, 0.1  # well separated angles: fast convergence
    hard = torch.zeros(10, dtype=torch.float64)
    hard[0], hard[-1] = 1.0, 0.97  # close angles: slow convergence
    start = torch.randn(2, 2, 5, generator=gen, dtype=torch.float64)
    both = F.invariant_decomposition(torch.stack([easy, hard]), start, max_iter=2000)
    alone = F.invariant_decomposition(easy[None], start[:1], max_iter=2000)
    alone_hard = F.invariant_decomposition(hard[None], start[1:], max_iter=2000)
    # per-row stop: the easy row is not iterated further because the hard row is slower
    torch.testing.assert_close(both.V[0], alone.V[0], atol=0, rtol=0)
    torch.testing.assert_close(both.warm_start[1], alone_hard.warm_start[0], atol=1e-15, rtol=0)
    assert alone.iterations < alone_hard.iterations
    # warm start: once converged, the refresh needs one step
    again = F.invariant_decomposition(torch.stack([easy, hard]), both.warm_start, max_iter=2000)
    assert again.iterations == 1
    # at least one step even with a huge tolerance
    one = F.invariant_decomposition(easy[None], start[:1], tol=1e9, max_iter=50)
    assert one.iterations == 1 and not torch.allclose(one.warm_start, start[:1] / start[:1].norm(dim=-1, keepdim=True))


@pytest.mark.parametrize("n", [5, 6, 7, 8])
def test_one_power_step_gives_simple_pieces_summing_to_b(rng, n):
    """Before convergence (one step) the pieces are simple, sum exactly to B, the map is orthogonal.

    Why: each v lies in the range of the current remainder R (it is a power step of R), so
    deflating v ^ (v _| R) keeps R's kernel and adds v to it; skew matrices have even rank, so the
    rank drops by 2 per plane and the remainder after k-1 planes has rank <= 2 (simple).
    """
    m = n * (n - 1) // 2
    b = torch.tensor(rng.standard_normal((2, m)))
    start = torch.tensor(rng.standard_normal((2, n // 2, n)))
    dec = F.invariant_decomposition(b, start, tol=0.0, max_iter=1, refresh=False)  # a bare finite iteration
    pieces = F.factors_to_bivectors(dec.V, dec.W)
    torch.testing.assert_close(pieces.sum(-2), b, atol=1e-12, rtol=0)
    remainder = F.bivector_to_skew(b - pieces[:, :-1].sum(-2))
    singular = torch.linalg.svdvals(remainder)
    assert singular[:, 2:].max() < 1e-12 < singular[:, 0].min()
    M = F.sandwich_matrix((dec.V, dec.W))
    eye = torch.eye(2**n, dtype=torch.float64)
    torch.testing.assert_close(M @ M.transpose(-1, -2), eye.expand_as(M), atol=1e-12, rtol=0)
    # not converged: the planes do not commute, so the product is not exp(B)
    A = F.bivector_to_skew(b).numpy()
    assert np.abs(M[0, 1 : n + 1, 1 : n + 1].numpy() - scipy.linalg.expm(2 * A[0])).max() > 1e-6


def test_zero_bivector_is_finite(rng):
    b = torch.zeros(2, 10, dtype=torch.float64, requires_grad=True)
    dec = F.invariant_decomposition(b)
    y = F.rotor_sandwich(torch.ones(1, 2, 32, dtype=torch.float64), (dec.V, dec.W), backend="factored")
    torch.testing.assert_close(y, torch.ones_like(y), atol=0, rtol=0)
    y.sum().backward()
    assert torch.isfinite(b.grad).all()


# ------------------------------------------------------------------------ gradchecks (float64)

def gradcheck(fn, inputs):
    return torch.autograd.gradcheck(fn, inputs, fast_mode=True)


def _isoclinic_factors(n, angle=0.7):
    """k planes e_{2j} ^ e_{2j+1}, all with the same angle."""
    k = n // 2
    V = torch.zeros(1, k, n, dtype=torch.float64)
    W = torch.zeros(1, k, n, dtype=torch.float64)
    for j in range(k):
        V[0, j, 2 * j] = 1.0
        W[0, j, 2 * j + 1] = angle
    return V, W


def test_gradcheck_exp_simple(rng):
    # the formula cos|b| + sinc|b| b as a function of all bivector coefficients (gradcheck steps
    # off the simple bivectors, so the simplicity check is off here)
    formula = lambda b: F.exp_simple(b, check=False)  # noqa: E731
    b = torch.tensor(rng.standard_normal((2, 6)) * 0.5, requires_grad=True)
    assert gradcheck(formula, (b,))
    zero = torch.zeros(1, 6, dtype=torch.float64, requires_grad=True)
    assert gradcheck(formula, (zero,))
    # near the series/closed-form switch
    edge = torch.zeros(1, 6, dtype=torch.float64)
    edge[0, 0] = math.sqrt(F.rotors.SERIES_LIMIT)
    assert gradcheck(formula, (edge.requires_grad_(),))


def test_exp_simple_values(rng):
    b = torch.tensor(rng.standard_normal((3, 1)))  # Cl(2): every bivector simple
    R = F.exp_simple(b)
    torch.testing.assert_close(R[:, 0], torch.cos(b[:, 0]), atol=1e-15, rtol=0)
    torch.testing.assert_close(R[:, 3], torch.sin(b[:, 0]), atol=1e-15, rtol=0)
    tiny = torch.tensor([[1e-9]], dtype=torch.float64)
    torch.testing.assert_close(F.exp_simple(tiny)[0], torch.tensor([1.0, 0, 0, 1e-9], dtype=torch.float64))


@pytest.mark.parametrize("backend", ["dense", "factored"])
@pytest.mark.parametrize("point", ["random", "zero", "isoclinic"])
def test_gradcheck_rotor_sandwich(rng, backend, point):
    n = 4
    gen = generator(rng)
    if point == "random":
        V, W = random_factors(gen, 1, n, torch.float64)
    elif point == "zero":
        V, _ = random_factors(gen, 1, n, torch.float64)
        W = torch.zeros_like(V)
    else:
        V, W = _isoclinic_factors(n)
    VR, WR = random_factors(gen, 1, n, torch.float64)
    x = torch.randn(2, 1, 2**n, generator=gen, dtype=torch.float64)
    inputs = tuple(t.requires_grad_() for t in (x, V, W, VR, WR))

    def f(x, V, W, VR, WR):
        return F.rotor_sandwich(x, (V, W), (VR, WR), backend=backend)

    assert gradcheck(f, inputs)


def test_gradcheck_compose_and_coefficients(rng):
    gen = generator(rng)
    V, W = random_factors(gen, 2, 5, torch.float64)
    assert gradcheck(F.compose_rotors, (V.requires_grad_(), W.requires_grad_()))
    zero_w = torch.zeros_like(W).requires_grad_()
    assert gradcheck(F.simple_rotor_coefficients, (V, zero_w))


@pytest.mark.parametrize("point", ["random", "isoclinic"])
def test_gradcheck_decomposition(rng, point):
    """Fixed number of steps (tol=0) from fixed start vectors (refresh=False): the map is smooth,
    its gradient exact, and finite even at (nearly) equal angles."""
    if point == "random":
        b = torch.tensor(rng.standard_normal((2, 10)))
    else:
        V, W = _isoclinic_factors(5)
        b = F.factors_to_bivectors(V, W).sum(-2)
        b = b + 1e-3 * torch.tensor(rng.standard_normal(b.shape))
    start = torch.tensor(rng.standard_normal((b.shape[0], 2, 5)))

    def f(b):
        dec = F.invariant_decomposition(b, start, tol=0.0, max_iter=3, refresh=False)
        return F.rotor_sandwich(torch.eye(32, dtype=torch.float64)[:, None].expand(32, b.shape[0], 32), (dec.V, dec.W), backend="factored")

    assert gradcheck(f, (b.requires_grad_(),))


def test_paper_gradient_is_one_pass_from_refreshed_vectors(rng):
    """refresh=True (the paper) = the gradient of one pass started at the refreshed vectors."""
    b = torch.tensor(rng.standard_normal((2, 10)), requires_grad=True)
    start = torch.tensor(rng.standard_normal((2, 2, 5)))
    paper = F.invariant_decomposition(b, start)
    manual = F.invariant_decomposition(b, paper.warm_start, refresh=False)
    grad_paper = torch.autograd.grad(paper.W.sum() + paper.V.pow(3).sum(), b)[0]
    grad_manual = torch.autograd.grad(manual.W.sum() + manual.V.pow(3).sum(), b)[0]
    torch.testing.assert_close(grad_paper, grad_manual, atol=1e-12, rtol=0)


def test_torch_func_jacobian_matches_autograd(rng):
    gen = generator(rng)
    V, W = random_factors(gen, 1, 3, torch.float64)
    x = torch.randn(1, 1, 8, generator=gen, dtype=torch.float64)

    def f(V):
        return F.rotor_sandwich(x, (V, W), backend="factored")

    jac = torch.func.jacrev(f)(V)
    reference = torch.autograd.functional.jacobian(f, V)
    torch.testing.assert_close(jac, reference)


# ------------------------------------------------------------------------------- other ops

def test_fwht_matches_scipy_hadamard(rng):
    x = torch.tensor(rng.standard_normal((3, 24)))
    H = scipy.linalg.hadamard(8) / math.sqrt(8)
    expected = (x.numpy().reshape(3, 3, 8) @ H.T).reshape(3, 24)
    np.testing.assert_allclose(F.fwht(x, 8).numpy(), expected, atol=1e-12)
    with pytest.raises(ValueError, match="power-of-two"):
        F.fwht(x)


def test_skew_conversions(rng):
    b = torch.tensor(rng.standard_normal((2, 10)))
    A = F.bivector_to_skew(b)
    torch.testing.assert_close(A, -A.transpose(-1, -2))
    i, j = bivector_pairs(5)[3]
    assert A[1, i, j] == b[1, 3]
    torch.testing.assert_close(F.skew_to_bivector(A), b)


def test_bfloat16_forward_close_to_float32(rng):
    gen = generator(rng)
    b = torch.randn(2, 10, generator=gen) * 0.3
    x = torch.randn(4, 2, 32, generator=gen)
    dec = F.invariant_decomposition(b)
    reference = F.rotor_sandwich(x, (dec.V, dec.W), backend="factored")
    dec16 = F.invariant_decomposition(b.bfloat16())
    for backend in ("dense", "factored"):
        y = F.rotor_sandwich(x.bfloat16(), (dec16.V, dec16.W), backend=backend)
        assert y.dtype == torch.bfloat16
        assert (y.float() - reference).abs().max() < 0.1


def test_core_algebra_agrees_if_present(rng):
    import galinear.core as core
    algebra = core.Algebra(4)
    b = rng.standard_normal(6)
    dec = F.invariant_decomposition(torch.tensor(b)[None], tol=1e-13, max_iter=5000)
    rotor = F.compose_rotors(dec.V, dec.W)[0].numpy()
    np.testing.assert_allclose(rotor, algebra.exp(algebra.bivector(b)), atol=1e-9)
    np.testing.assert_allclose(F.sandwich_matrix((dec.V, dec.W))[0].numpy(), algebra.sandwich_matrix(rotor), atol=1e-9)


# --------------------------------------------------------------------------------- registry

def test_registry_auto_priority_and_lazy_entries():
    calls = []

    def spy(x, VL, WL, VR, WR):
        calls.append(x.shape)
        return F.resolve_sandwich_backend("factored", x.device, x.dtype)[1](x, VL, WL, VR, WR)

    try:
        # priority decides only where the plan's own rules do not (here: a device spinor lacks)
        F.register_sandwich_backend("spy", spy, devices=None, dtypes=(torch.float64,), priority=1000)
        assert F.resolve_sandwich_backend("auto", "meta", torch.float64)[0] == "spy"
        assert F.resolve_sandwich_backend("auto", "meta", torch.float32)[0] == "factored"  # spy lacks float32
        assert F.resolve_sandwich_backend("auto", "cpu", torch.float64)[0] == "spinor"
        x = torch.randn(2, 1, 8, dtype=torch.float64)
        V, W = torch.randn(1, 1, 3, dtype=torch.float64), torch.randn(1, 1, 3, dtype=torch.float64)
        F.rotor_sandwich(x, (V, W))
        assert not calls, "auto on the CPU follows the plan, not the registry's priority"
        F.rotor_sandwich(x, (V, W), backend="spy")
        assert calls, "a named backend runs"
        with pytest.raises(ValueError, match="does not support"):
            F.rotor_sandwich(x.float(), (V.float(), W.float()), backend="spy")
        F.register_sandwich_backend("lazy", "galinear.nn.numba_backend:numba_sandwich", dtypes=(torch.float64,))
        y = F.rotor_sandwich(x, (V, W), backend="lazy")
        torch.testing.assert_close(y, F.rotor_sandwich(x, (V, W), backend="factored"))
        F.register_sandwich_backend("broken", "galinear.no_such_module:fn", devices=None, dtypes=(torch.float64,),
                                    priority=2000)
        assert F.resolve_sandwich_backend("auto", "meta", torch.float64)[0] == "spy"  # broken entry skipped
        assert F.sandwich_backend_entry("spy").priority == 1000
    finally:
        for name in ("spy", "lazy", "broken"):
            F.unregister_sandwich_backend(name)
    assert "spy" not in F.available_sandwich_backends()
    with pytest.raises(ValueError, match="unknown sandwich backend"):
        F.resolve_sandwich_backend("nope", "cpu", torch.float32)
    with pytest.raises(ValueError, match="unknown sandwich backend"):
        F.sandwich_backend_entry("nope")
    with pytest.raises(ValueError, match="auto"):
        F.register_sandwich_backend("auto", spy)
    assert {"dense", "factored"} <= set(F.available_sandwich_backends())


def test_auto_means_the_same_for_rotor_sandwich_and_the_layers():
    """rotor_sandwich's "auto" is the plan's: chunk matrices for small n, spinor above, factored
    under autograd for a values-only backend; each agrees with the dense map."""
    from galinear.nn.functional import plan as dispatch

    cpu = torch.device("cpu")
    for n, mode, expected in ((7, "training", "dense"), (9, "inference", "dense"), (10, "inference", "spinor"),
                              (8, "training", "factored")):
        assert dispatch.plan(n, 4, cpu, torch.float64, mode, sandwich=True).backend == expected
    layer_choice = dispatch.plan(10, 64, cpu, torch.float64, "inference").backend
    assert dispatch.plan(10, 64, cpu, torch.float64, "inference", sandwich=True).backend == layer_choice
    assert dispatch.plan(10, 4, cpu, torch.float64, "training", backend="spinor", sandwich=True).backend == "factored"
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(3, 2, 2**10, dtype=torch.float64, generator=generator)
    V, W = (torch.randn(2, 5, 10, dtype=torch.float64, generator=generator) for _ in range(2))
    reference = F.rotor_sandwich(x, (V, W), backend="dense")
    torch.testing.assert_close(F.rotor_sandwich(x, (V, W)), reference, atol=1e-10, rtol=1e-10)
    xg = x.clone().requires_grad_(True)
    y = F.rotor_sandwich(xg, (V, W), backend="spinor")  # factored carries the gradient
    assert y.requires_grad
    torch.testing.assert_close(y.detach(), reference, atol=1e-10, rtol=1e-10)


def test_bad_shapes_are_reported():
    x = torch.randn(2, 3, 8)
    V = torch.randn(3, 1, 3)
    with pytest.raises(ValueError, match=r"shape \(P, k, n\)"):
        F.rotor_sandwich(x, (V[:2], V[:2]))
    with pytest.raises(ValueError, match="2\\*\\*n"):
        F.rotor_sandwich(torch.randn(2, 3, 6), (V, V))
    with pytest.raises(ValueError, match="C\\(n, 2\\)"):
        F.invariant_decomposition(torch.randn(2, 4))
    with pytest.raises(ValueError, match="max_iter"):
        F.invariant_decomposition(torch.randn(2, 6), max_iter=0)
    with pytest.raises(TypeError):
        F.invariant_decomposition(np.zeros((2, 6)))
