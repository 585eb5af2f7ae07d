"""The field's structured matrices (Kronecker sum, Monarch, Hadamard-mixed blocks) and the orthogonal
control (Givens network) against independent constructions from their definitions.

Tolerances: float64 1e-10 and float32 1e-5 (relative to the largest entry) for a forward pass
against the dense matrix; 1e-9 for float64 closed forms against numpy references.
"""
import io

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from galinear.nn import (GivensLinear, GivensNetwork, KroneckerSumLinear, MixedBlockHadamardLinear, MonarchLinear,
                         RotorLinear, RotorNetwork)
from galinear.nn.functional import givens as givens_functional
from galinear.nn.functional.givens import givens_rotate
from galinear.nn.structured import kronecker_rearrange, monarch_projection, nearest_kronecker_sum
from galinear.testing import assert_gradient_matches_fd

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]


def assert_forward_is_dense(module, dtype, rows=7, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(3, rows, module.in_features, dtype=dtype)
    with torch.no_grad():
        y = module(x)
        w = module.dense_weight()
        ref = x.double() @ w.double().T
        if module.bias is not None:
            ref = ref + module.bias.double()
    assert y.shape == (3, rows, module.out_features) and y.dtype == dtype
    scale = max(1.0, float(ref.abs().max()))
    assert float((y.double() - ref).abs().max()) <= TOL[dtype] * scale


# ------------------------------------------------------------------------------ Kronecker sums

def kron_reference(a, b):
    """sum_k kron(A_k, B_k) from the entry formula W[(i1, i2), (j1, j2)] = sum_k A[i1, j1] B[i2, j2]."""
    t, m1, n1 = a.shape
    _, m2, n2 = b.shape
    w = np.zeros((m1 * m2, n1 * n2))
    for i1 in range(m1):
        for i2 in range(m2):
            for j1 in range(n1):
                for j2 in range(n2):
                    w[i1 * m2 + i2, j1 * n2 + j2] = np.sum(a[:, i1, j1] * b[:, i2, j2])
    return w


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [False, True])
def test_kronecker_forward_equals_its_dense_matrix(dtype, bias):
    torch.manual_seed(1)
    module = KroneckerSumLinear(12, 6, terms=3, factors=((2, 3), (3, 4)), bias=bias, dtype=dtype)
    if bias:
        torch.nn.init.normal_(module.bias)
    assert_forward_is_dense(module, dtype)
    ref = kron_reference(module.left.detach().double().numpy(), module.right.detach().double().numpy())
    assert np.allclose(module.dense_weight().detach().double().numpy(), ref, atol=TOL[dtype])
    assert module.num_parameters() == 3 * (6 + 12) + 6 * bias


def test_kronecker_default_factors_and_counts_for_smollm2():
    q = KroneckerSumLinear(576, 576, terms=1)
    assert q.factors == ((24, 24), (24, 24)) and q.num_parameters() == 1152
    k = KroneckerSumLinear(576, 192, terms=2)
    assert k.factors == ((12, 24), (16, 24)) and k.num_parameters() == 2 * (288 + 384)


def als_kronecker(w, terms, factors, sweeps=300, seed=0):
    """Independent optimum: alternate exact least-squares solves for all A's then all B's of
    min ||W - sum_k A_k kron B_k||_F, each written as a numpy lstsq on the entries of W."""
    (m1, n1), (m2, n2) = factors
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(terms, m2, n2))
    rows = [(i1, i2, j1, j2) for i1 in range(m1) for i2 in range(m2) for j1 in range(n1) for j2 in range(n2)]
    target = np.array([w[i1 * m2 + i2, j1 * n2 + j2] for i1, i2, j1, j2 in rows])
    for _ in range(sweeps):
        design = np.zeros((len(rows), terms * m1 * n1))       # unknown A[k, i1, j1]
        for r, (i1, i2, j1, j2) in enumerate(rows):
            for k in range(terms):
                design[r, (k * m1 + i1) * n1 + j1] = b[k, i2, j2]
        a = np.linalg.lstsq(design, target, rcond=None)[0].reshape(terms, m1, n1)
        design = np.zeros((len(rows), terms * m2 * n2))       # unknown B[k, i2, j2]
        for r, (i1, i2, j1, j2) in enumerate(rows):
            for k in range(terms):
                design[r, (k * m2 + i2) * n2 + j2] = a[k, i1, j1]
        b = np.linalg.lstsq(design, target, rcond=None)[0].reshape(terms, m2, n2)
    return kron_reference(a, b)


@pytest.mark.parametrize("terms", [1, 2])
def test_nearest_kronecker_sum_equals_an_alternating_least_squares_optimum(terms):
    rng = np.random.default_rng(terms)
    factors = ((2, 3), (3, 2))
    w = rng.normal(size=(6, 6))
    a, b, s = nearest_kronecker_sum(torch.as_tensor(w), terms, factors)
    ours = kron_reference(a.numpy(), b.numpy())
    reference = als_kronecker(w, terms, factors)
    assert np.linalg.norm(w - ours) == pytest.approx(np.linalg.norm(w - reference), rel=1e-9)
    assert np.allclose(ours, reference, atol=1e-7)  # unique optimum: distinct singular values
    # optimality: the error is the tail of the singular values of the rearrangement
    assert np.linalg.norm(w - ours) ** 2 == pytest.approx(float((s[terms:] ** 2).sum()), rel=1e-9)


def test_rearrangement_is_the_entry_permutation_of_the_definition():
    rng = np.random.default_rng(3)
    (m1, n1), (m2, n2) = factors = ((2, 4), (3, 2))
    w = rng.normal(size=(m1 * m2, n1 * n2))
    r = np.zeros((m1 * n1, m2 * n2))
    for i1 in range(m1):
        for j1 in range(n1):
            for i2 in range(m2):
                for j2 in range(n2):
                    r[i1 * n1 + j1, i2 * n2 + j2] = w[i1 * m2 + i2, j1 * n2 + j2]
    assert np.array_equal(kronecker_rearrange(torch.as_tensor(w), factors).numpy(), r)


@settings(max_examples=25, deadline=None)
@given(m1=st.integers(1, 4), n1=st.integers(1, 4), m2=st.integers(1, 4), n2=st.integers(1, 4),
       seed=st.integers(0, 2**16), data=st.data())
def test_a_random_kronecker_sum_is_recovered_exactly(m1, n1, m2, n2, seed, data):
    terms = data.draw(st.integers(1, min(m1 * n1, m2 * n2)))
    rng = np.random.default_rng(seed)
    w = kron_reference(rng.normal(size=(terms, m1, n1)), rng.normal(size=(terms, m2, n2)))
    module = KroneckerSumLinear(n1 * n2, m1 * m2, terms=terms, factors=((m1, n1), (m2, n2)), dtype=torch.float64)
    module.load_nearest(torch.as_tensor(w))
    assert np.allclose(module.dense_weight().detach().numpy(), w, atol=1e-10 * max(1.0, np.abs(w).max()))


def test_kronecker_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="m1 m2 = 6"):
        KroneckerSumLinear(12, 6, terms=1, factors=((2, 3), (2, 4)))
    with pytest.raises(ValueError, match="use fewer terms"):
        KroneckerSumLinear(4, 4, terms=5, factors=((2, 2), (2, 2)))
    with pytest.raises(ValueError, match=r"\(\(m1, n1\), \(m2, n2\)\)"):
        KroneckerSumLinear(4, 4, terms=1, factors=(2, 2))


# ------------------------------------------------------------------------------ Monarch

def monarch_reference(left, right):
    """P_o L P_m R with explicit matrices: R = blockdiag of b (q x p) blocks, P_m the (b, q) -> (q, b)
    transpose permutation, L = blockdiag of q (b x b) blocks, P_o the (q, b) -> (b, q) transpose."""
    q, b, _ = left.shape
    _, _, p = right.shape
    r = scipy.linalg.block_diag(*right)                       # (b q, b p)
    l = scipy.linalg.block_diag(*left)                        # (q b, q b)
    pm = np.zeros((q * b, b * q))
    for g in range(b):
        for a in range(q):
            pm[a * b + g, g * q + a] = 1.0                    # u[g, a] -> v[a, g]
    return pm.T @ l @ pm @ r                                  # P_o = P_m^T


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, blocks", [((16, 16), 4), ((12, 8), 4), ((6, 9), 3), ((8, 8), 2)])
def test_monarch_forward_equals_its_dense_matrix(dtype, shape, blocks):
    torch.manual_seed(2)
    module = MonarchLinear(*shape, blocks=blocks, dtype=dtype)
    assert_forward_is_dense(module, dtype)
    ref = monarch_reference(module.left.detach().double().numpy(), module.right.detach().double().numpy())
    assert np.allclose(module.dense_weight().detach().double().numpy(), ref, atol=TOL[dtype])
    d_in, d_out = shape
    assert module.num_parameters() == d_out * d_in // blocks + d_out * blocks


@settings(max_examples=25, deadline=None)
@given(blocks=st.integers(1, 4), p=st.integers(1, 4), q=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_a_monarch_matrix_is_recovered_exactly_by_the_projection(blocks, p, q, seed):
    rng = np.random.default_rng(seed)
    w = monarch_reference(rng.normal(size=(q, blocks, blocks)), rng.normal(size=(blocks, q, p)))
    module = MonarchLinear(blocks * p, blocks * q, blocks=blocks, dtype=torch.float64)
    module.load_nearest(torch.as_tensor(w))
    assert np.allclose(module.dense_weight().detach().numpy(), w, atol=1e-10 * max(1.0, np.abs(w).max()))


def test_monarch_projection_is_optimal_on_a_general_matrix():
    rng = np.random.default_rng(5)
    w = rng.normal(size=(12, 8))
    left, right = monarch_projection(torch.as_tensor(w), 4)
    ours = monarch_reference(left.numpy(), right.numpy())
    # the error is, per sub-block S_ag, everything beyond its top singular value
    tail = 0.0
    for a in range(3):
        for g in range(4):
            sub = np.array([[w[h * 3 + a, g * 2 + t] for t in range(2)] for h in range(4)])
            tail += float((np.linalg.svd(sub, compute_uv=False)[1:] ** 2).sum())
    assert np.linalg.norm(w - ours) ** 2 == pytest.approx(tail, rel=1e-9)
    for _ in range(20):  # no nearby Monarch matrix does better
        moved = monarch_reference(left.numpy() + 1e-2 * rng.normal(size=left.shape),
                                  right.numpy() + 1e-2 * rng.normal(size=right.shape))
        assert np.linalg.norm(w - moved) >= np.linalg.norm(w - ours) - 1e-12


def test_monarch_bad_blocks_names_the_divisors():
    with pytest.raises(ValueError, match="common divisors"):
        MonarchLinear(12, 8, blocks=3)


# ------------------------------------------------------------------------------ Hadamard-mixed blocks

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, blocks", [((10, 8), 4), ((16, 16), 8), ((7, 4), 2), ((576, 192), 64)])
def test_mixed_block_hadamard_forward_equals_q_times_blocks(dtype, shape, blocks):
    torch.manual_seed(3)
    module = MixedBlockHadamardLinear(*shape, blocks=blocks, bias=True, dtype=dtype)
    torch.nn.init.normal_(module.bias)
    assert_forward_is_dense(module, dtype, rows=3)
    d_in, d_out = shape
    q_ref = np.kron(scipy.linalg.hadamard(blocks) / np.sqrt(blocks), np.eye(d_out // blocks))
    first = module.first.detach().double().numpy()
    d = scipy.linalg.block_diag(*first)[:, :d_in]
    assert np.allclose(module.mixing_matrix(dtype=torch.float64).numpy(), q_ref, atol=1e-12)
    assert np.allclose(module.dense_weight().detach().double().numpy(), q_ref @ d, atol=TOL[dtype])
    assert np.allclose(q_ref.T @ q_ref, np.eye(d_out), atol=1e-12)
    assert module.num_parameters() == d_out * -(-d_in // blocks) + d_out


def test_mixed_block_hadamard_every_block_reaches_every_output_block():
    module = MixedBlockHadamardLinear(8, 8, blocks=4, dtype=torch.float64)
    assert bool((module.dense_weight().abs() > 0).all())


def test_mixed_block_hadamard_bad_blocks():
    with pytest.raises(ValueError, match="power of two dividing out_features"):
        MixedBlockHadamardLinear(576, 576, blocks=48)
    with pytest.raises(ValueError, match="choose one of"):
        MixedBlockHadamardLinear(8, 12, blocks=8)


# ------------------------------------------------------------------------------ the orthogonal control

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, chunk", [((8, 8), None), ((12, 10), None), ((16, 8), 4), ((5, 9), 4)])
def test_givens_gadget_is_orthogonal_per_pair_and_counts_like_the_rotor(dtype, shape, chunk):
    torch.manual_seed(4)
    gadget = GivensLinear(*shape, chunk_size=chunk, dtype=dtype)
    rotor = RotorLinear(*shape, chunk_size=chunk, dtype=dtype)
    assert gadget.num_parameters() == rotor.num_parameters()
    assert gadget.num_rotor_parameters() == rotor.num_rotor_parameters()
    with torch.no_grad():
        m = gadget.pair_matrices().double()
        eye = torch.eye(gadget.chunk_size, dtype=torch.float64)
        assert float((m.transpose(1, 2) @ m - eye).abs().max()) <= TOL[dtype]
        assert float((torch.linalg.det(m) - 1).abs().max()) <= 10 * TOL[dtype]  # rotations, not reflections
    assert gadget.uses_rows(1) and not gadget.uses_rows(10 ** 6)
    assert_forward_is_dense(gadget, dtype, rows=1)       # the layer-by-layer path
    assert_forward_is_dense(gadget, dtype, rows=10 ** 4)  # the matrix path


@pytest.mark.parametrize("dtype", DTYPES)
def test_givens_gadget_with_one_chunk_pair_is_an_orthogonal_map(dtype):
    torch.manual_seed(5)
    gadget = GivensLinear(16, 16, alpha=False, dtype=dtype)
    with torch.no_grad():
        q = gadget.dense_weight().double()
    assert float((q.T @ q - torch.eye(16, dtype=torch.float64)).abs().max()) <= TOL[dtype]
    assert float((q - torch.eye(16, dtype=torch.float64)).abs().max()) > 0.05  # it does rotate


def test_givens_layer_is_the_plane_rotations_of_its_matching():
    torch.manual_seed(6)
    gadget = GivensLinear(8, 8, double_rotor=False, alpha=False, dtype=torch.float64)
    with torch.no_grad():
        gadget.angles.zero_()
        gadget.angles[0, 1] = 0.3
    m = gadget.matchings[0, 1].tolist()
    ref = np.eye(8)
    for a, b in zip(m[0::2], m[1::2]):
        ref[np.ix_([a, b], [a, b])] = [[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]]
    with torch.no_grad():
        assert np.allclose(gadget.dense_weight().numpy(), ref, atol=1e-14)


@pytest.mark.parametrize("shape, hidden", [((16, 16), None), ((12, 6), 8), ((20, 12), 16), ((576, 192), 512)])
def test_givens_network_has_the_rotor_networks_shape_and_count(shape, hidden):
    torch.manual_seed(7)
    givens, rotor = GivensNetwork(*shape, hidden=hidden), RotorNetwork(*shape, hidden=hidden)
    assert givens.num_parameters() == rotor.num_parameters()
    assert givens.num_rotation_parameters() == sum(
        g.num_rotor_parameters() for g in rotor.modules() if isinstance(g, RotorLinear))
    names = {n: p.shape for n, p in givens.named_parameters() if "gadget" not in n}
    assert names == {n: p.shape for n, p in rotor.named_parameters() if "gadget" not in n}
    assert not any(isinstance(m, RotorLinear) for m in givens.modules())


@pytest.mark.parametrize("dtype", DTYPES)
def test_givens_network_paths_agree_and_state_reloads(dtype):
    torch.manual_seed(8)
    net = GivensNetwork(12, 6, hidden=8, dtype=dtype)
    x = torch.randn(5, 12, dtype=dtype)
    y_train = net(x)
    y_train.pow(2).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.eval()
    with torch.no_grad():
        y_eval = net(x)  # the assembled-matrix path
    assert float((y_eval - y_train.detach()).abs().max()) <= 10 * TOL[dtype]
    buffer = io.BytesIO()
    torch.save(net.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(99)
    other = GivensNetwork(12, 6, hidden=8, dtype=dtype).eval()
    other.load_state_dict(torch.load(buffer, weights_only=True))
    with torch.no_grad():
        assert torch.equal(other(x), y_eval)


def test_givens_network_learns_a_little():
    torch.manual_seed(9)
    net = GivensNetwork(8, 8, hidden=8)
    x = torch.randn(64, 8)
    target = x @ torch.randn(8, 8).T
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    first = None
    for _ in range(40):
        loss = (net(x) - target).pow(2).mean()
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.8 * first


def test_givens_bad_chunk_size():
    with pytest.raises(ValueError, match="power of two"):
        GivensLinear(8, 8, chunk_size=3)
    with pytest.raises(ValueError, match="non-finite"):
        gadget = GivensLinear(4, 4)
        with torch.no_grad():
            gadget.angles[0, 0] = float("nan")
        gadget(torch.zeros(1, 4))


# ------------------------------------------------------------------ Givens layers applied to rows

GIVENS_BACKENDS = ["kernel", "torch"]


@pytest.fixture
def givens_backend(request, monkeypatch):
    """Run givens_rotate on the numba kernels or on the torch recurrences."""
    if request.param == "torch":
        monkeypatch.setattr(givens_functional, "_kernel_usable", lambda x: False)
    else:
        assert givens_functional._kernel_usable(torch.zeros(1))
    return request.param


def givens_reference(rows, angles, matchings):
    """Dense float64 product of the plane rotations of every layer, built from the definition."""
    P, G, c = matchings.shape
    out = np.empty(rows.shape)
    for p in range(P):
        m = np.eye(c)
        for layer in range(G):
            t, pairs = float(angles[p, layer]), matchings[p, layer].tolist()
            r = np.eye(c)
            for a, b in zip(pairs[0::2], pairs[1::2]):
                r[np.ix_([a, b], [a, b])] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
            m = r @ m
        out[..., p, :] = rows[..., p, :].astype(np.float64) @ m.T
    return out


def givens_case(P=3, G=6, c=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    matchings = torch.stack([torch.randperm(c, generator=generator) for _ in range(P * G)]).reshape(P, G, c)
    return matchings, generator


ANGLE_CASES = {
    "random": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64),
    "zero": lambda g, shape: torch.zeros(shape, dtype=torch.float64),
    "equal": lambda g, shape: torch.full(shape, 0.7, dtype=torch.float64),
    "tiny": lambda g, shape: 1e-8 * torch.randn(shape, generator=g, dtype=torch.float64),
    "large": lambda g, shape: 100.0 + torch.randn(shape, generator=g, dtype=torch.float64),
}


@pytest.mark.parametrize("givens_backend", GIVENS_BACKENDS, indirect=True)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens", [1, 70])
def test_givens_rotate_is_the_product_of_plane_rotations(givens_backend, dtype, tokens):
    matchings, generator = givens_case(P=3, G=6, c=8, seed=tokens)
    angles = torch.randn(3, 6, generator=generator, dtype=dtype)
    rows = torch.randn(tokens, 3, 8, generator=generator, dtype=dtype)
    out = givens_rotate(rows, angles, matchings)
    assert out.dtype == dtype and out.shape == rows.shape
    ref = givens_reference(rows.numpy(), angles.numpy(), matchings.numpy())
    tol = {torch.float64: 1e-12, torch.float32: 1e-5}[dtype]
    assert np.abs(out.double().numpy() - ref).max() <= tol * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("givens_backend", GIVENS_BACKENDS, indirect=True)
@pytest.mark.parametrize("case", sorted(ANGLE_CASES))
def test_givens_rotate_gradient_matches_central_differences(givens_backend, case):
    matchings, generator = givens_case(P=2, G=6, c=8, seed=1)
    angles = ANGLE_CASES[case](generator, (2, 6))
    rows = torch.randn(67, 2, 8, generator=generator, dtype=torch.float64)  # a padded last block
    weight = torch.randn(67, 2, 8, generator=generator, dtype=torch.float64)
    assert_gradient_matches_fd(lambda a: (givens_rotate(rows, a, matchings) * weight).sum(), angles, rtol=1e-8)
    small = rows[:3].clone()
    assert_gradient_matches_fd(lambda x: (givens_rotate(x, angles, matchings) * weight[:3]).sum(), small, rtol=1e-8)


@pytest.mark.parametrize("givens_backend", GIVENS_BACKENDS, indirect=True)
def test_givens_rotate_backward_from_the_output_equals_autograd_through_every_layer(givens_backend):
    """The backward pass recovers the layers' inputs from the output (R^T z); against autograd
    through the stored layers the difference is rounding only, at 56 layers of 256 coordinates."""
    matchings, generator = givens_case(P=2, G=56, c=256, seed=2)
    angles = (100.0 * torch.randn(2, 56, generator=generator, dtype=torch.float64)).requires_grad_(True)
    rows = torch.randn(130, 2, 256, generator=generator, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(130, 2, 256, generator=generator, dtype=torch.float64)
    (givens_rotate(rows, angles, matchings) * weight).sum().backward()
    partner, sign = givens_functional.matching_partners(matchings, torch.float64)
    a, x = angles.detach().clone().requires_grad_(True), rows.detach().clone().requires_grad_(True)
    z = x
    for layer in range(56):
        moved = z.gather(-1, partner[:, layer].expand(z.shape[0], -1, -1))
        z = torch.cos(a[:, layer, None]) * z + torch.sin(a[:, layer, None]) * sign[:, layer] * moved
    (z * weight).sum().backward()
    assert float((rows.grad - x.grad).abs().max()) <= 1e-12 * float(x.grad.abs().max())
    assert float((angles.grad - a.grad).abs().max()) <= 1e-12 * float(a.grad.abs().max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, chunk", [((16, 16), 8), ((12, 20), 4), ((64, 64), 64)])
def test_givens_gadget_rows_and_matrix_paths_agree(dtype, shape, chunk):
    torch.manual_seed(10)
    gadget = GivensLinear(*shape, chunk_size=chunk, bias=True, dtype=dtype)
    with torch.no_grad():
        gadget.bias.normal_()
    x = torch.randn(3, 45, shape[0], dtype=dtype)
    results = []
    for rows in (True, False):
        gadget.uses_rows = lambda tokens, rows=rows: rows
        gadget.zero_grad(set_to_none=True)
        y = gadget(x)
        (y * torch.linspace(-1, 1, y.numel(), dtype=dtype).view(y.shape)).sum().backward()
        results.append([y.detach()] + [p.grad for p in gadget.parameters()])
    tol = {torch.float64: 1e-12, torch.float32: 1e-5}[dtype]
    for a, b in zip(*results):
        assert float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_givens_network_rows_and_matrix_paths_agree(dtype):
    torch.manual_seed(11)
    net = GivensNetwork(24, 12, hidden=16, chunk_size=8, dtype=dtype)
    x = torch.randn(40, 24, dtype=dtype)
    results = []
    for rows in (True, False):
        for gadget in net.modules():
            if isinstance(gadget, GivensLinear):
                gadget.uses_rows = lambda tokens, rows=rows: rows
        net.zero_grad(set_to_none=True)
        y = net(x)
        y.pow(2).sum().backward()
        results.append([y.detach()] + [p.grad for p in net.parameters()])
    tol = {torch.float64: 1e-12, torch.float32: 1e-5}[dtype]
    for a, b in zip(*results):
        assert float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))


def test_givens_network_gradient_matches_central_differences():
    torch.manual_seed(12)
    net = GivensNetwork(8, 8, hidden=8, chunk_size=4, dtype=torch.float64)
    x = torch.randn(5, 8, dtype=torch.float64)
    gadget = net.hidden_gadgets[0][0]
    gadget.uses_rows = lambda tokens: True

    def loss(angles):
        saved = gadget.angles
        del gadget.angles
        gadget.angles = angles
        try:
            return net(x).pow(2).sum()
        finally:
            del gadget.angles
            gadget.angles = saved

    for point in (gadget.angles.detach().clone(), torch.zeros_like(gadget.angles),
                  torch.full_like(gadget.angles, 0.7)):
        assert_gradient_matches_fd(loss, point, rtol=1e-7)


def test_givens_rotate_bad_shapes():
    matchings, _ = givens_case(P=2, G=3, c=8)
    with pytest.raises(ValueError, match="disagree"):
        givens_rotate(torch.zeros(4, 3, 8), torch.zeros(2, 3), matchings)


def test_givens_rotate_under_a_transform_equals_the_function():
    matchings, generator = givens_case(P=2, G=6, c=8, seed=3)
    angles = torch.randn(2, 6, generator=generator, dtype=torch.float64)
    rows = torch.randn(5, 2, 8, generator=generator, dtype=torch.float64)
    jacobian = torch.func.jacrev(lambda a: givens_rotate(rows, a, matchings))(angles)  # the torch path
    reference = torch.autograd.functional.jacobian(lambda a: givens_rotate(rows, a, matchings), angles)
    assert float((jacobian - reference).abs().max()) <= 1e-12
