"""The "spinor" sandwich backend (galinear.nn.functional.spinor): values of the map and of the
transposed map against the dense backend (the 2**n x 2**n matrix), its torch path against its
numba path, blocks of tokens, thread counts; gradients through rotor_sandwich (which runs
"factored" for a values-only backend) against the dense backend and against central differences
of the spinor map. Central differences of the exact gradient are in test_dexp.py."""
import numpy as np
import pytest
import torch

from galinear import matrix_rep
from galinear.nn import RotorLinear
from galinear.nn import functional as F
from galinear.nn.dexp import transposed_factors
from galinear.nn.functional import spinor


def _factors(P, n, dtype, seed, scale=0.7):
    g = torch.Generator().manual_seed(seed)
    k = n // 2
    return [(torch.randn(P, k, n, generator=g, dtype=dtype) * scale).requires_grad_() for _ in range(4)]


def _run(backend, x, factors, single):
    VL, WL, VR, WR = factors
    return F.rotor_sandwich(x, (VL, WL), None if single else (VR, WR), backend=backend)


def _values(backend, x, factors, single):
    """The backend's own map (no autograd: a values-only backend runs itself)."""
    with torch.no_grad():
        return _run(backend, x, factors, single)


def _transposed(factors):
    """Factors of the transposed map y -> R~ y S."""
    VL, WL, VR, WR = factors
    return [*transposed_factors(VL, WL), *transposed_factors(VR, WR)]


@pytest.mark.parametrize("single", [True, False], ids=["single", "double"])
@pytest.mark.parametrize("n", range(1, 11))
def test_matches_the_dense_backend_in_float64(n, single):
    x = torch.randn(5, 3, 2**n, dtype=torch.float64, requires_grad=True)
    factors = _factors(3, n, torch.float64, n)
    y_ref = _run("dense", x, factors, single)
    y = _values("spinor", x, factors, single)
    torch.testing.assert_close(y, y_ref.detach(), rtol=0, atol=1e-12)
    g = torch.randn_like(y)
    inputs = [x] + factors[: 2 if single else 4]
    ref = torch.autograd.grad(y_ref, inputs, g, allow_unused=True)
    # the transposed map (what the exact gradient asks of a backend) gives the input gradient
    torch.testing.assert_close(_values("spinor", g, _transposed(factors), single), ref[0], rtol=0, atol=1e-11)
    got = torch.autograd.grad(_run("spinor", x, factors, single), inputs, g, allow_unused=True)
    for a, b in zip(ref, got):
        if a is None or b is None:  # n = 1 has no factors
            assert n == 1
            continue
        torch.testing.assert_close(b, a, rtol=0, atol=1e-11)


@pytest.mark.parametrize("n", [3, 6, 8, 9, 11])
def test_float32_within_single_precision(n):
    x = torch.randn(9, 2, 2**n)
    factors = _factors(2, n, torch.float32, 20 + n)
    y_ref = _run("dense", x.double(), [f.double() for f in factors], False)
    y = _values("spinor", x, factors, False)
    assert y.dtype == torch.float32
    assert float((y.detach().double() - y_ref.detach()).norm() / y_ref.detach().norm()) < 1e-5


def test_token_blocks_and_batch_axes(monkeypatch):
    monkeypatch.setattr(spinor, "TOKENS_PER_BLOCK", 8)
    n = 7
    x = torch.randn(3, 7, 2, 2**n, dtype=torch.float64, requires_grad=True)   # 21 tokens: 3 blocks
    factors = _factors(2, n, torch.float64, 3)
    y = _values("spinor", x, factors, False)
    y_ref = _run("dense", x, factors, False)
    torch.testing.assert_close(y, y_ref.detach(), rtol=0, atol=1e-12)
    g = torch.randn_like(y)
    ref = torch.autograd.grad(y_ref, [x] + factors, g)
    torch.testing.assert_close(_values("spinor", g, _transposed(factors), False), ref[0], rtol=0, atol=1e-11)
    got = torch.autograd.grad(_run("spinor", x, factors, False), [x] + factors, g)
    for a, b in zip(ref, got):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-11)
    one = _values("spinor", x[:1, :1], factors, False)
    torch.testing.assert_close(one, y_ref[:1, :1].detach(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [2, 5, 6, 8, 9])
def test_torch_path_equals_the_numba_path(n, monkeypatch):
    x = torch.randn(10, 2, 2**n, dtype=torch.float64)
    factors = _factors(2, n, torch.float64, 40 + n)
    y = _values("spinor", x, factors, False)
    g = torch.randn_like(y)
    gx = _values("spinor", g, _transposed(factors), False)
    monkeypatch.setenv("GALINEAR_SPINOR_TRANSFORM", "torch")
    torch.testing.assert_close(_values("spinor", x, factors, False), y, rtol=0, atol=1e-12)
    torch.testing.assert_close(_values("spinor", g, _transposed(factors), False), gx, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [4, 7, 9, 10])
def test_rotor_matrices_are_unitary_images_of_the_rotor(n):
    V, W = _factors(2, n, torch.float64, 60 + n)[:2]
    A = spinor.rotor_matrices(V, W).detach()
    tab = matrix_rep.representation(n)
    eye = torch.eye(A.shape[-1], dtype=A.dtype)
    torch.testing.assert_close(A @ A.mH, eye.expand_as(A), rtol=0, atol=1e-12)
    rotor = F.compose_rotors(V.detach(), W.detach()).numpy()                     # (P, 2**n)
    full = matrix_rep.to_matrix(rotor, n)                                        # (P, irreps, N, N)
    H, Wd = tab.blocks, tab.N // tab.blocks
    blocks = np.stack([full[..., h * Wd:(h + 1) * Wd, h * Wd:(h + 1) * Wd] for h in range(H)], axis=-3)
    np.testing.assert_allclose(A.numpy(), blocks.reshape(A.shape), atol=1e-12)


def _fused_case(n, dtype, single, seed, tokens=21, P=2):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, P, 2**n, generator=g, dtype=dtype)
    G = torch.randn(tokens, P, 2**n, generator=g, dtype=dtype)
    factors = [f.detach() for f in _factors(P, n, dtype, seed)]
    if single:
        factors[2:] = [None, None]
    y = spinor.spinor_sandwich(x, *factors)
    return x, G, y, factors


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("single", [True, False], ids=["single", "double"])
@pytest.mark.parametrize("n", range(1, 12))
def test_fused_backward_equals_the_transposed_map_and_the_bivector_parts(n, single, dtype, monkeypatch):
    # spinor_sandwich_backward against independent references: the input gradient against the dense
    # backend's transposed map (the 2**n x 2**n matrix), the parameter parts against the gather
    # tables of galinear.blades (bivector_parts, kernel "torch"); 21 tokens in blocks of 8
    from galinear.nn.dexp import bivector_parts

    monkeypatch.setattr(spinor, "TOKENS_PER_BLOCK", 8)
    x, G, y, factors = _fused_case(n, dtype, single, 70 + n, P=1 if n >= 10 else 2)
    grad_x, left, right = spinor.spinor_sandwich_backward(G, y, *factors)
    VL, WL, VR, WR = factors
    TL = transposed_factors(VL, WL)
    TR = TL if single else transposed_factors(VR, WR)
    wide = torch.float64
    with torch.no_grad():
        ref_x = F.rotor_sandwich(G.to(wide), (TL[0].to(wide), TL[1].to(wide)), (TR[0].to(wide), TR[1].to(wide)),
                                 backend="dense")
    ref_l, ref_r = bivector_parts(G.to(wide), y.to(wide), "torch")
    assert grad_x.dtype == left.dtype == right.dtype == dtype
    assert left.shape == right.shape == (x.shape[1], n * (n - 1) // 2)
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    assert float((grad_x.to(wide) - ref_x).norm() / ref_x.norm()) < tol
    scale = max(float(ref_l.norm()), float(ref_r.norm()), 1.0)
    assert float((left.to(wide) - ref_l).norm()) / scale < tol
    assert float((right.to(wide) - ref_r).norm()) / scale < tol
    none, left2, right2 = spinor.spinor_sandwich_backward(G, y, *factors, input_grad=False)
    assert none is None and torch.equal(left2, left) and torch.equal(right2, right)


def test_fused_backward_is_the_same_whichever_threads_take_the_blocks(monkeypatch):
    from galinear.nn.functional.threads import intra_op_threads

    monkeypatch.setattr(spinor, "TOKENS_PER_BLOCK", 8)
    x, G, y, factors = _fused_case(9, torch.float32, False, 3, tokens=75)
    results = []
    for workers in (1, 2):
        with intra_op_threads(1, workers=workers):
            results.append(spinor.spinor_sandwich_backward(G, y, *factors))
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_the_exact_gradient_runs_the_fused_backward_only_where_it_applies(monkeypatch):
    # the layer's training step on the spinor backend runs spinor_sandwich_backward once (not the
    # transposed map and the bivector parts apart); a graph of the backward pass (create_graph)
    # takes the other route, with the same first derivatives
    from galinear.nn import dexp

    calls = []
    fused = spinor.spinor_sandwich_backward
    monkeypatch.setattr(spinor.spinor_sandwich, "backward", lambda *a, **k: calls.append(1) or fused(*a, **k))
    layer = RotorLinear(1024, 1024, backend="spinor", dtype=torch.float64)
    x = torch.randn(6, 1024, dtype=torch.float64, requires_grad=True)
    params = [p for p in layer.parameters() if p.requires_grad]
    first = torch.autograd.grad(layer(x).square().sum(), [x] + params)
    assert calls == [1]
    parts = []
    separate = dexp.bivector_parts
    monkeypatch.setattr(dexp, "bivector_parts", lambda *a, **k: parts.append(1) or separate(*a, **k))
    second = torch.autograd.grad(layer(x).square().sum(), [x] + params, create_graph=True)
    assert calls == [1] and parts == [1]
    for a, b in zip(first, second):
        torch.testing.assert_close(b.detach(), a, rtol=0, atol=1e-10)


def test_thread_count_does_not_change_the_forward():
    from galinear import _numba

    n = 9
    x = torch.randn(40, 2, 2**n)
    factors = [f.detach() for f in _factors(2, n, torch.float32, 5)]
    before = (torch.get_num_threads(), _numba.numba.get_num_threads())
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            _numba.set_threads(threads)
            results.append(_run("spinor", x, factors, False))
    finally:
        torch.set_num_threads(before[0])
        _numba.set_threads(before[1])
    assert torch.equal(results[0], results[1])


def test_registered_for_cpu_and_cuda_and_usable_by_layers():
    entry = F.sandwich_backend_entry("spinor")
    assert entry.devices == ("cpu", "cuda")
    layer = RotorLinear(64, 64, backend="spinor")
    reference = RotorLinear(64, 64, backend="dense")
    reference.load_state_dict(layer.state_dict())
    x = torch.randn(4, 64)
    torch.testing.assert_close(layer(x), reference(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="float32 and float64"):
        spinor.spinor_sandwich(torch.zeros(2, 1, 8, dtype=torch.float16), *[torch.zeros(1, 1, 3)] * 2)


def test_inference_reuses_rotor_matrices_only_while_the_factors_are_unchanged():
    n = 6
    x = torch.randn(4, 1, 2**n, dtype=torch.float64)
    factors = [f.detach() for f in _factors(1, n, torch.float64, 8)]
    spinor._MATRIX_CACHE.clear()
    with torch.no_grad():
        first = _run("spinor", x, factors, False)
        assert len(spinor._MATRIX_CACHE) == 1
        factors[0].mul_(0.5)                      # in-place change: a new version, rebuilt
        second = _run("spinor", x, factors, False)
    torch.testing.assert_close(second, _run("dense", x, factors, False), rtol=0, atol=1e-12)
    assert not torch.equal(first, second)
    with torch.enable_grad():                     # with autograd rotor_sandwich runs "factored"
        spinor._MATRIX_CACHE.clear()
        y = _run("spinor", x, [f.clone().requires_grad_() for f in factors], False)
        assert y.requires_grad and not spinor._MATRIX_CACHE
        with pytest.raises(ValueError, match="values only.*rotor_sandwich"):
            spinor.spinor_sandwich(x, *[f.clone().requires_grad_() for f in factors])


def _special_factors(case, P, n):
    """Factor pairs (P, k, n) at the special points of simple rotors."""
    g = torch.Generator().manual_seed(11)
    k = n // 2
    V = torch.randn(P, k, n, generator=g, dtype=torch.float64)
    W = torch.randn(P, k, n, generator=g, dtype=torch.float64)
    if case == "zero":                      # every angle 0: the series branch of cos and sinc
        W = V.clone()
    elif case == "tiny":
        V, W = V * 1e-4, W * 1e-4
    elif case == "large":                   # angles of several turns
        V, W = V * 3.0, W * 3.0
    elif case == "equal_angles":            # every factor of the same angle (v_j, w_j orthonormal)
        q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
        V = torch.stack([q[:, 2 * j] for j in range(k)]).expand(P, k, n).clone() * 0.9
        W = torch.stack([q[:, 2 * j + 1] for j in range(k)]).expand(P, k, n).clone() * 0.9
    return V, W


@pytest.mark.parametrize("case", ["random", "zero", "tiny", "large", "equal_angles"])
@pytest.mark.parametrize("n", [4, 5, 8, 9])
def test_factor_gradients_match_central_differences(n, case):
    # gradients through rotor_sandwich(backend="spinor") against fourth-order central differences
    # of the spinor map itself (it runs without autograd), float64
    from galinear.testing import assert_gradient_matches_fd

    VL, WL = _special_factors(case, 2, n)
    VR, WR = _special_factors("random", 2, n)
    x = torch.randn(6, 2, 2**n, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    weights = torch.randn(6, 2, 2**n, dtype=torch.float64, generator=torch.Generator().manual_seed(n + 1))

    def loss(**changed):
        args = {"VL": VL, "WL": WL, "VR": VR, "WR": WR, **changed}
        y = F.rotor_sandwich(x, (args["VL"], args["WL"]), (args["VR"], args["WR"]), backend="spinor")
        return (weights * y).sum() + (y ** 2).sum() * 0.1

    for name, point in (("VL", VL), ("WL", WL), ("VR", VR)):
        assert_gradient_matches_fd(lambda value, name=name: loss(**{name: value}), point, directions=6)


@pytest.mark.parametrize("shape", [(512, 512, None), (576, 512, None), (512, 192, None), (12, 10, 8), (64, 48, 16)])
@pytest.mark.parametrize("dtype,atol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_rotor_linear_decode_matches_forward(shape, dtype, atol):
    in_features, out_features, chunk = shape
    torch.manual_seed(1)
    layer = RotorLinear(in_features, out_features, chunk_size=chunk, bias=True, dtype=dtype).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        x = torch.randn(3, 2, in_features, dtype=dtype)
        torch.testing.assert_close(layer.decode(x), layer(x), rtol=0, atol=atol)
        layer.left_bivectors.mul_(0.5)                       # in place: the cached matrices are rebuilt
        torch.testing.assert_close(layer.decode(x), layer(x), rtol=0, atol=atol)
    with pytest.raises(RuntimeError, match="no_grad"):
        layer.decode(x)


@pytest.mark.parametrize("out_features", [576, 192])
def test_rotor_network_decoding_paths_match_the_training_path(out_features, monkeypatch):
    from galinear.nn import RotorNetwork
    from galinear.nn.functional import plan

    torch.manual_seed(2)
    net = RotorNetwork(576, out_features, hidden=512, dtype=torch.float64).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    x = torch.randn(2, 576, dtype=torch.float64)
    reference = net(x)                                       # autograd on: gadget by gadget
    with torch.no_grad():
        torch.testing.assert_close(net(x), reference, rtol=0, atol=1e-12)        # compiled decoding kernel
        assert net._decoder is not None
        net.branch_weights[0, 1] = 0.3                       # in place: rebuilt
        changed = net(x)
        net.output_gadget.alpha = torch.nn.Parameter(net.output_gadget.alpha * 2)  # replaced: rebuilt
        replaced = net(x)
        monkeypatch.setattr(plan, "numba_usable", lambda: False)
        plan.forget_plans()
        try:
            torch.testing.assert_close(net(x), replaced, rtol=0, atol=1e-12)   # the stacked matrices (torch)
        finally:
            plan.forget_plans()
    with torch.enable_grad():
        torch.testing.assert_close(replaced, net(x), rtol=0, atol=1e-12)
        assert not torch.allclose(changed, replaced)


def test_auto_decodes_one_token_where_measured_faster():
    torch.manual_seed(3)
    layer = RotorLinear(512, 512).eval()
    matrix = RotorLinear(512, 512, backend="dense").eval()
    matrix.load_state_dict(layer.state_dict())
    x = torch.randn(1, 512)

    def decodes(module, batch):
        return module._plan(batch, x, False).decode

    with torch.no_grad():
        assert decodes(layer, 1) and not decodes(layer, 8)                # 512 x 512: one token only
        torch.testing.assert_close(layer(x), matrix(x), rtol=0, atol=1e-5)
    assert not decodes(layer, 1)                                         # autograd on: never
    with torch.no_grad():
        assert not decodes(RotorLinear(64, 64, chunk_size=16).eval(), 1)  # small chunks: the matrix


def test_checked_decoders_refuse_bad_tables_once_and_equal_the_checked_calls():
    """The decoding kernels' index tables are checked when a decoder is built (not at every call),
    on private copies: changing the layer's buffers afterwards cannot reach the kernel."""
    import numpy as np

    from galinear.rotor_kernels import spinor as kernels
    from galinear.nn import RotorLinear

    torch.manual_seed(0)
    layer = RotorLinear(64, 32).eval()
    x = torch.randn(3, 64)
    with torch.no_grad():
        args = layer._decode_state()
        flat = x.numpy()
        want = kernels.gadget_forward(flat, *args, np.zeros((3, 32), dtype=np.float32))
        got = layer._decoder()(flat, np.zeros((3, 32), dtype=np.float32))
        assert np.array_equal(got, want)
        bad = list(args)
        bad[0] = args[0].copy()
        bad[0][0, 0] = 64  # one past the input width
        with pytest.raises(ValueError, match="gadget input index"):
            kernels.CheckedGadget(*bad, np.float32, 64)
        decoder = layer._decoder()
        args[0][0, 0] = 10**6  # the layer's own table, after the check: the decoder holds a copy
        assert np.array_equal(decoder(flat, np.zeros((3, 32), dtype=np.float32)), want)
        with pytest.raises(ValueError, match="x must be a float32 array of shape"):
            decoder(flat[:, :32], np.zeros((3, 32), dtype=np.float32))
        with pytest.raises(ValueError, match="out must be a writable float32 array"):
            decoder(flat, np.zeros((3, 31), dtype=np.float32))
