"""galinear.nn modules: parameter counts, the gadget against a slow reference, state, devices,
compile, gradcheck, a small fit and bad input."""
import io
import math

import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from galinear.nn import BlockHadamardLinear, LowRankLinear, RotorLinear, RotorNetwork, check_finite
from galinear.nn import functional as F

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]


def seeded(rng):
    torch.manual_seed(int(rng.integers(2**31)))


def count(module):
    return sum(p.numel() for p in module.parameters())


# ------------------------------------------------------------------------- parameter counts

@pytest.mark.parametrize(
    "shape, hidden, expected",
    [((2048, 2048), None, 895), ((2048, 512), None, 1076), ((1536, 1536), 2048, 1401), ((1536, 256), 2048, 1493)],
)
def test_rotor_network_counts_match_the_paper(shape, hidden, expected):
    network = RotorNetwork(*shape, hidden=hidden)
    assert count(network) == network.num_parameters() == expected


def test_baseline_counts_match_the_paper_llama_layer():
    def layer(make):
        return sum(count(make(2048, out)) for out in (2048, 512, 512))

    assert layer(lambda i, o: LowRankLinear(i, o, 1)) == 9216
    assert layer(lambda i, o: LowRankLinear(i, o, 4)) == 36864
    assert layer(lambda i, o: BlockHadamardLinear(i, o, 128, 1)) == 49152


@pytest.mark.parametrize("double, alpha, bias", [(True, True, False), (False, True, True), (True, False, True)])
@pytest.mark.parametrize("shape, chunk", [((12, 20), None), ((20, 12), 4), ((7, 5), None), ((64, 16), 8)])
def test_rotor_linear_count_formula(shape, chunk, double, alpha, bias):
    layer = RotorLinear(*shape, chunk_size=chunk, double_rotor=double, alpha=alpha, bias=bias)
    c = layer.chunk_size
    n = int(math.log2(c))
    P = math.ceil(shape[0] / c) * math.ceil(shape[1] / c)
    expected = P * math.comb(n, 2) * (2 if double else 1) + (P if alpha else 0) + (shape[1] if bias else 0)
    assert count(layer) == expected
    assert layer.num_rotor_parameters() == P * math.comb(n, 2) * (2 if double else 1)
    assert layer.chunk_size == (chunk or 2 ** int(math.log2(min(shape))))


# -------------------------------------------------------------- the gadget vs a slow reference

def reference_gadget(layer, x):
    """Paper-notes section 4 written out with loops and dense matrices (float64)."""
    d_in, d_out, c = layer.in_features, layer.out_features, layer.chunk_size
    I, J = math.ceil(d_in / c), math.ceil(d_out / c)
    matrices = layer.pair_matrices()
    y = torch.zeros(x.shape[0], d_out, dtype=x.dtype)
    cover = torch.zeros(d_out, dtype=x.dtype)
    for j in range(J):
        out_idx = [(math.floor(j * d_out / J) + t) % d_out for t in range(c)]
        cover[out_idx] += 1
        for i in range(I):
            in_idx = [(math.floor(i * d_in / I) + t) % d_in for t in range(c)]
            p = j * I + i
            a = layer.alpha[p] if layer.alpha is not None else 1.0
            y[:, out_idx] += a * x[:, in_idx] @ matrices[p].t()
    y = y / (I * cover)
    return y + layer.bias if layer.bias is not None else y


@pytest.mark.parametrize("shape, chunk", [((12, 20), None), ((20, 12), 4), ((7, 5), None), ((16, 16), 8)])
@pytest.mark.parametrize("double", [True, False])
def test_gadget_matches_reference(rng, shape, chunk, double):
    seeded(rng)
    layer = RotorLinear(*shape, chunk_size=chunk, double_rotor=double, bias=True, dtype=torch.float64).eval()
    with torch.no_grad():
        layer.alpha.uniform_(0.5, 1.5)
        layer.bias.normal_()
    x = torch.randn(5, shape[0], dtype=torch.float64)
    expected = reference_gadget(layer, x)
    torch.testing.assert_close(layer(x), expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(x @ layer.dense_weight().t() + layer.bias, expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pair_maps_are_orthogonal(rng, dtype):
    seeded(rng)
    layer = RotorLinear(20, 12, chunk_size=8, dtype=dtype)
    M = layer.pair_matrices().detach()
    eye = torch.eye(8, dtype=dtype).expand_as(M)
    torch.testing.assert_close(M @ M.transpose(-1, -2), eye, atol=TOL[dtype] * 10, rtol=0)
    # square single chunk without alpha: the whole dense weight is orthogonal
    square = RotorLinear(16, 16, alpha=False, dtype=dtype)
    W = square.dense_weight().detach()
    torch.testing.assert_close(W @ W.t(), torch.eye(16, dtype=dtype), atol=TOL[dtype] * 10, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_backends_agree_in_modules(rng, dtype):
    seeded(rng)
    network = RotorNetwork(12, 10, hidden=16, dtype=dtype).eval()
    x = torch.randn(4, 3, 12, dtype=dtype)
    network.backend = "dense"
    dense = network(x)
    network.backend = "factored"
    factored = network(x)
    # LayerNorm divides by a std of order 1e-1 here, so allow a modest factor over the map tolerance
    assert (dense - factored).abs().max().item() < TOL[dtype] * 20
    assert factored.shape == (4, 3, 10)


@pytest.mark.parametrize("shape, blocks, depth", [((30, 20), 4, 1), ((30, 20), 4, 3), ((24, 24), 3, 2), ((16, 8), 8, 2)])
def test_block_hadamard_matches_explicit_matrices(rng, shape, blocks, depth):
    seeded(rng)
    layer = BlockHadamardLinear(*shape, blocks, depth, bias=True, dtype=torch.float64)
    d_in, d_out = shape
    bi, bo = -(-d_in // blocks), -(-d_out // blocks)
    W = torch.block_diag(*layer.first.detach())  # (blocks*bo, blocks*bi)
    length = (bo * blocks) & -(bo * blocks)
    H = torch.block_diag(*[torch.tensor(scipy.linalg.hadamard(length) / math.sqrt(length))] * (bo * blocks // length))
    for stage in layer.stages.detach():
        W = torch.block_diag(*stage) @ H @ W
    expected = W[:d_out, :d_in]
    torch.testing.assert_close(layer.dense_weight().detach(), expected, atol=1e-12, rtol=0)
    x = torch.randn(3, d_in, dtype=torch.float64)
    torch.testing.assert_close(layer(x), x @ expected.t() + layer.bias, atol=1e-12, rtol=0)


def test_low_rank_dense_weight(rng):
    seeded(rng)
    layer = LowRankLinear(9, 7, 2, bias=True, dtype=torch.float64)
    x = torch.randn(4, 9, dtype=torch.float64)
    torch.testing.assert_close(layer(x), x @ layer.dense_weight().t() + layer.bias)
    assert torch.linalg.matrix_rank(layer.dense_weight()) == 2


@settings(deadline=None)  # as many examples as the profile asks (40 under "ci", 500 under "thorough")
@given(
    d_in=st.integers(1, 40), d_out=st.integers(1, 40), log_chunk=st.integers(0, 5), double=st.booleans()
)
def test_gadget_property_linear_and_counted(d_in, d_out, log_chunk, double):
    chunk = min(2**log_chunk, 1 << (min(d_in, d_out).bit_length() - 1))
    torch.manual_seed(d_in * 97 + d_out)
    layer = RotorLinear(d_in, d_out, chunk_size=chunk, double_rotor=double, dtype=torch.float64).eval()
    x = torch.randn(3, d_in, dtype=torch.float64)
    W = layer.dense_weight()
    torch.testing.assert_close(layer(x), x @ W.t(), atol=1e-12, rtol=0)
    with torch.no_grad():
        layer.alpha.mul_(2.0)
    torch.testing.assert_close(layer.dense_weight(), 2 * W, atol=1e-12, rtol=0)  # linear in alpha
    P = math.ceil(d_in / chunk) * math.ceil(d_out / chunk)
    n = chunk.bit_length() - 1
    assert count(layer) == P * math.comb(n, 2) * (2 if double else 1) + P


# --------------------------------------------------------------------------------- state

@pytest.mark.parametrize("decomposition", ["exact", "power"])
def test_state_dict_round_trip_is_bit_exact(rng, decomposition):
    seeded(rng)
    network = RotorNetwork(12, 10, hidden=16, decomposition=decomposition)
    x = torch.randn(5, 12)
    network.train()
    network(x).sum().backward()  # moves the power method's warm starts away from their initial values
    keys = network.state_dict().keys()
    for side in ("left", "right"):  # the exact decomposition reads no warm starts and keeps none
        assert (f"input_gadget.{side}_warm_start" in keys) == (decomposition == "power")
    assert "input_permutation" in keys and "hidden_permutations" in keys
    buffer = io.BytesIO()
    torch.save(network.state_dict(), buffer)
    buffer.seek(0)
    fresh = RotorNetwork(12, 10, hidden=16, decomposition=decomposition)
    assert not torch.equal(fresh.input_permutation, network.input_permutation)
    fresh.load_state_dict(torch.load(buffer))
    for mode in ("train", "eval"):
        getattr(network, mode)()
        getattr(fresh, mode)()
        assert torch.equal(network(x), fresh(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_state_dict_loads_across_backends(rng, dtype):
    seeded(rng)
    source = RotorLinear(20, 12, chunk_size=8, backend="dense", dtype=dtype)
    x = torch.randn(4, 20, dtype=dtype)
    source(x)  # training-mode forward refreshes the warm starts
    target = RotorLinear(20, 12, chunk_size=8, backend="factored", dtype=dtype)
    target.load_state_dict(source.state_dict())
    source.eval(), target.eval()
    assert (source(x) - target(x)).abs().max().item() <= TOL[dtype]


def test_to_moves_parameters_and_buffers(rng):
    seeded(rng)
    network = RotorNetwork(12, 10, hidden=16, decomposition="power")
    network.to(torch.float64)
    gadget = network.input_gadget
    assert gadget.left_warm_start.dtype == torch.float64
    assert gadget.output_scale.dtype == torch.float64
    assert gadget.input_index.dtype == torch.long and network.input_permutation.dtype == torch.long
    y = network(torch.randn(2, 12, dtype=torch.float64))
    assert y.dtype == torch.float64
    if torch.cuda.is_available():  # pragma: no cover - exercised on GPU machines only
        network.cuda()
        assert network(torch.randn(2, 12, dtype=torch.float64, device="cuda")).device.type == "cuda"


@pytest.mark.parametrize("gradient", ["exact", "power-step"])
def test_only_the_power_decomposition_keeps_warm_starts(rng, gradient):
    seeded(rng)
    exact = RotorLinear(16, 16, gradient=gradient)  # decomposition="exact", the default
    power = RotorLinear(16, 16, decomposition="power", gradient=gradient)
    single = RotorLinear(16, 16, double_rotor=False, decomposition="power", gradient=gradient)
    assert exact.left_warm_start is None and exact.right_warm_start is None
    assert not any("warm_start" in name for name, _ in exact.named_buffers())
    assert not any("warm_start" in key for key in exact.state_dict())
    assert power.left_warm_start.shape == power.right_warm_start.shape == (power.pairs, power.planes, power.n)
    assert {"left_warm_start", "right_warm_start"} <= power.state_dict().keys()
    assert single.right_warm_start is None and "right_warm_start" not in single.state_dict()
    exact(torch.randn(2, 16)).sum().backward()  # a training step has nothing to refresh
    assert exact.left_warm_start is None and not any("warm_start" in key for key in exact.state_dict())


def test_warm_starts_load_across_decompositions(rng):
    """A state with warm starts (a power layer's, or any layer's from before exact layers kept
    none) loads strictly into an exact network with them dropped; a state without them loads into
    a power network, which keeps its own; all three give one map."""
    seeded(rng)
    x = torch.randn(3, 12, dtype=torch.float64)
    power = RotorNetwork(12, 10, hidden=16, decomposition="power", dtype=torch.float64)
    power(x)  # a training-mode forward moves the warm starts
    saved = power.state_dict()
    exact = RotorNetwork(12, 10, hidden=16, dtype=torch.float64)
    result = exact.load_state_dict(saved)
    assert not result.missing_keys and not result.unexpected_keys
    assert "input_gadget.left_warm_start" in saved  # the caller's dict is left as it was
    assert exact.input_gadget.left_warm_start is None and not any("warm_start" in k for k in exact.state_dict())
    back = RotorNetwork(12, 10, hidden=16, decomposition="power", dtype=torch.float64)
    own = back.input_gadget.right_warm_start.clone()
    result = back.load_state_dict(exact.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    assert torch.equal(back.input_gadget.right_warm_start, own)
    for name, tensor in exact.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor) and torch.equal(saved[name], tensor), name
    with torch.no_grad():
        reference = power.eval()(x)
        torch.testing.assert_close(exact.eval()(x), reference, atol=1e-10, rtol=0)
        torch.testing.assert_close(back.eval()(x), reference, atol=1e-10, rtol=0)


def test_the_decomposition_changes_no_random_draw(rng):
    """An exact layer draws (and drops) the numbers a power layer's warm starts take: one seed
    gives one model, and the layers built after it, whichever the decomposition."""
    seeded(rng)
    state = torch.get_rng_state()
    exact = RotorNetwork(12, 10, hidden=16)
    after_exact = torch.randn(4)
    torch.set_rng_state(state)
    power = RotorNetwork(12, 10, hidden=16, decomposition="power")
    assert torch.equal(torch.randn(4), after_exact)
    for name, tensor in exact.state_dict().items():
        assert torch.equal(power.state_dict()[name], tensor), name


def test_warm_starts_refresh_only_in_training(rng):
    seeded(rng)
    layer = RotorLinear(16, 16, decomposition="power")
    before = layer.left_warm_start.clone()
    layer.eval()
    layer(torch.randn(2, 16))
    assert torch.equal(layer.left_warm_start, before)
    layer.dense_weight()
    assert torch.equal(layer.left_warm_start, before)
    layer.train()
    layer(torch.randn(2, 16))
    assert not torch.equal(layer.left_warm_start, before)


def test_reset_parameters_and_repr(rng):
    seeded(rng)
    layer = RotorLinear(12, 20, bias=True)
    with torch.no_grad():
        layer.alpha.fill_(3.0)
        layer.bias.fill_(2.0)
    layer.reset_parameters()
    assert torch.equal(layer.alpha, torch.ones_like(layer.alpha)) and torch.equal(layer.bias, torch.zeros_like(layer.bias))
    text = repr(layer)
    assert "chunk_size=8" in text and "pairs=6" in text and "backend='auto'" in text
    assert "hidden=16" in repr(RotorNetwork(12, 10, hidden=16))


# -------------------------------------------------------------------- autograd and compile

def test_gradcheck_rotor_linear(rng):
    seeded(rng)
    # refresh=False, tol=0: a fixed number of power steps from the stored warm starts, whose
    # gradient is exact (the paper's refresh-then-step gradient is a deliberate approximation)
    layer = RotorLinear(
        10, 9, chunk_size=8, bias=True, dtype=torch.float64, refresh=False, tol=0.0, max_iter=2,
        decomposition="power", gradient="power-step",
    ).eval()
    x = torch.randn(2, 10, dtype=torch.float64, requires_grad=True)
    params = dict(layer.named_parameters())
    buffers = dict(layer.named_buffers())

    def f(x, left, right, alpha, bias):
        values = {"left_bivectors": left, "right_bivectors": right, "alpha": alpha, "bias": bias}
        return torch.func.functional_call(layer, ({**values}, buffers), (x,))

    inputs = (x,) + tuple(params[name].detach().clone().requires_grad_() for name in ("left_bivectors", "right_bivectors", "alpha", "bias"))
    assert torch.autograd.gradcheck(f, inputs, fast_mode=True)


def test_torch_compile_matches_eager(rng):
    seeded(rng)
    # the pure-torch backend; other registered backends bring their own compile support
    layer = RotorLinear(16, 12, chunk_size=8, backend="factored").eval()
    x = torch.randn(3, 16)
    eager = layer(x)
    compiled = torch.compile(layer, backend="aot_eager")
    torch.testing.assert_close(compiled(x), eager, atol=1e-6, rtol=0)
    loss = compiled(x).pow(2).sum()
    loss.backward()
    assert layer.left_bivectors.grad is not None and torch.isfinite(layer.left_bivectors.grad).all()


def test_fit_random_rotor_sandwich_target(rng):
    """A double-rotor layer learns a random rotor sandwich of Cl(4) to MSE < 1e-6 (float64)."""
    seeded(rng)
    target = RotorLinear(16, 16, alpha=False, dtype=torch.float64).eval()
    with torch.no_grad():
        target.left_bivectors.normal_(0, 0.5)
        target.right_bivectors.normal_(0, 0.5)
    model = RotorLinear(16, 16, alpha=False, dtype=torch.float64)
    x = torch.randn(64, 16, dtype=torch.float64)
    with torch.no_grad():
        y = target(x)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(500):
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        if loss.item() < 1e-8:
            break
        loss.backward()
        optimizer.step()
    model.eval()
    assert (model(x) - y).pow(2).mean().item() < 1e-6


# ------------------------------------------------------------------------------ bad input

def test_bad_input_is_reported():
    layer = RotorLinear(12, 20)
    with pytest.raises(ValueError, match="in_features=12"):
        layer(torch.randn(3, 13))
    with pytest.raises(ValueError, match="power of two"):
        RotorLinear(12, 20, chunk_size=6)
    with pytest.raises(ValueError, match="larger than a dimension"):
        RotorLinear(12, 20, chunk_size=16)
    with pytest.raises(ValueError, match="positive integer"):
        RotorLinear(0, 4)
    with pytest.raises(ValueError, match="in_features=8"):
        RotorNetwork(8, 8)(torch.randn(2, 9))
    with pytest.raises(ValueError, match="blocks"):
        BlockHadamardLinear(4, 8, 5)
    with pytest.raises(ValueError, match="rank"):
        LowRankLinear(4, 8, 0)
    with pytest.raises(ValueError, match="unknown sandwich backend"):
        RotorLinear(8, 8, backend="nope")(torch.randn(1, 8))


def test_non_finite_parameters_name_the_module():
    network = RotorNetwork(8, 8, hidden=8)
    optimizer = torch.optim.SGD(network.parameters(), lr=1.0)
    network(torch.randn(2, 8)).sum().backward()
    network.hidden_gadgets[1][2].left_bivectors.grad.fill_(float("nan"))
    optimizer.step()
    with pytest.raises(ValueError, match=r"RotorNetwork\.hidden_gadgets\.1\.2.*left_bivectors"):
        network(torch.randn(2, 8))
    with pytest.raises(ValueError, match="hidden_gadgets.1.2.left_bivectors"):
        check_finite(network)
    network.eval()
    with torch.no_grad(), pytest.raises(ValueError, match=r"RotorNetwork\.hidden_gadgets\.1\.2.*left_bivectors"):
        network(torch.randn(2, 8))                     # the decoding path checks too


def test_inference_reuses_factors_until_the_state_changes(rng, monkeypatch):
    seeded(rng)
    layer = RotorLinear(16, 16, chunk_size=8).eval()
    x = torch.randn(4, 16)
    calls = []
    for name in ("invariant_decomposition", "exact_factors"):  # exact: exact_factors; power-step: the other
        original = getattr(F, name)
        monkeypatch.setattr(F, name, lambda *a, _original=original, **k: calls.append(1) or _original(*a, **k))
    with torch.no_grad():
        first = layer(x)
        assert len(calls) == 2  # left and right rotors
        torch.testing.assert_close(layer(x), first, atol=0, rtol=0)
        assert len(calls) == 2  # reused
        layer.left_bivectors.add_(0.1)  # an in-place update, as an optimizer makes
        changed = layer(x)
    assert len(calls) == 4
    assert not torch.allclose(changed, first)
    fresh = layer(x)  # with autograd: the exact gradient treats the factors as constants, reused
    assert len(calls) == 4
    torch.testing.assert_close(fresh, changed, atol=0, rtol=0)
    layer.gradient = "power-step"  # the factors carry the gradient: recomputed with autograd
    again = layer(x)
    assert len(calls) == 6
    # the same planes, refined by the power step that carries the paper's gradient: equal to rounding
    torch.testing.assert_close(again, changed, atol=1e-6, rtol=1e-5)
