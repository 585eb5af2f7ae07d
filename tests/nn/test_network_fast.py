"""RotorNetwork under autograd: every stage through its gadgets' structured map (branches in one
call) and one fused Function for the chunk sum, permutations, LayerNorm, PReLU and branch sum.

Checked against the matrix path (the assembled matrices) and the gadget-by-gadget composition
written out here, and the gradient against central differences at the special points on every
backend the dispatcher can pick."""
import pytest
import torch
from torch import nn

from galinear.nn import RotorNetwork
from galinear.nn.functional import branches
from galinear.nn.functional.branches import branch_sum
from galinear.testing import assert_gradient_matches_fd, rotor_cases
from galinear.testing import rotor_network as network  # the network with its weights away from their start

BACKENDS = ["auto", "dense", "spinor", "numba", "factored"]
# (in, out, hidden, chunk): one chunk per gadget; overlapping and wrapping chunks (3 input chunks
# of 16 over 40 coordinates, several output chunks); chunks of n = 8 where "auto" picks "spinor"
SHAPES = [(16, 8, None, None), (40, 24, 48, 16), (256, 64, None, None)]
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-5}
# central-difference step for the networks: PReLU has a kink at 0, and among the thousands of
# normalised values a step of 1e-4 crosses it at some points; 1e-6 keeps clear of it (rounding
# error about 1e-16 |f| / 1e-6, far below the tolerance)
STEP = 1e-6


def gadget_by_gadget(net, x):
    """The network as its definition composes it: each gadget, its permutation, LayerNorm, PReLU
    and the weighted branch sum, in plain autograd."""
    def block(gadget, permutation, h):
        z = gadget(h)[..., permutation]
        return net.activation(nn.functional.layer_norm(z, (net.hidden,), eps=net.eps))

    h = block(net.input_gadget, net.input_permutation, x)
    for layer, gadgets in enumerate(net.hidden_gadgets):
        h = sum(net.branch_weights[layer, b] * block(g, net.hidden_permutations[layer, b], h)
                for b, g in enumerate(gadgets))
    return net.output_gadget(h)


def relative(actual, expected):
    return float((actual - expected).abs().max()) / max(float(expected.abs().max()), 1.0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_fast_path_equals_the_matrix_path_and_the_gadget_composition(shape, dtype, backend):
    if backend == "factored" and shape[0] == 256:
        pytest.skip("the factored backend keeps every intermediate: slow at n = 8")
    net = network(shape, dtype, backend)
    x = torch.randn(3, 5, shape[0], dtype=dtype, requires_grad=True)
    y = net(x)  # training mode under autograd: the structured path
    with torch.no_grad():
        matrices = net._fused_forward(x)
        composed = gadget_by_gadget(net, x)
    tol = TOLERANCE[dtype]
    assert relative(y, matrices) <= tol
    assert relative(y, composed) <= tol
    # gradients against the gadget-by-gadget composition
    weight = torch.randn_like(y)
    inputs = [x, *net.parameters()]
    fast = torch.autograd.grad(y, inputs, weight)
    reference = torch.autograd.grad(gadget_by_gadget(net, x), inputs, weight)
    scale = max(float(r.abs().max()) for r in reference)
    for name, f, r in zip(["x", *(n for n, _ in net.named_parameters())], fast, reference):
        assert float((f - r).abs().max()) <= 10 * tol * max(scale, 1.0), name


def _set_bivectors(net, case):
    with torch.no_grad():
        for index, gadget in enumerate(net._gadgets()):
            points = torch.as_tensor(rotor_cases(gadget.n, gadget.pairs, seed=index)[case])
            gadget.left_bivectors.copy_(points)
            gadget.right_bivectors.copy_(points.flip(0) * 0.5)


@pytest.mark.parametrize("case", ["random", "zero", "equal_angles"])
@pytest.mark.parametrize("backend", ["dense", "spinor", "numba", "factored"])  # "auto" picks "dense" at n = 4
def test_network_gradient_matches_central_differences(case, backend):
    shape = (40, 24, 48, 16)  # n = 4: equal angles exist; 3 x 3 chunk pairs per hidden gadget
    net = network(shape, torch.float64, backend)
    _set_bivectors(net, case)
    x = torch.randn(6, shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    weight = torch.randn(6, shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    names = ["hidden_gadgets.0.1.left_bivectors", "hidden_gadgets.1.2.right_bivectors",
             "input_gadget.left_bivectors", "output_gadget.alpha", "branch_weights", "activation.weight"]
    for name in names:
        def f(point, name=name):
            return (torch.func.functional_call(net, {name: point}, (x,)) * weight).sum()

        assert_gradient_matches_fd(f, net.get_parameter(name).detach(), rtol=1e-7, step=STEP, directions=3)

    def of_input(point):
        return (net(point) * weight).sum()

    assert_gradient_matches_fd(of_input, x, rtol=1e-7, step=STEP, directions=3)


@pytest.mark.parametrize("backend", ["auto", "spinor"])
def test_gadget_path_gradient_matches_central_differences_at_n8(backend):
    """n = 8, where "auto" picks the parity blocks of a stage's chunk pairs and "spinor" its
    sandwich; the branches share one call either way."""
    net = network((256, 32, None, None), torch.float64, backend)  # the output gadget has n = 5
    _set_bivectors(net, "equal_angles")
    x = torch.randn(4, 256, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    name = "hidden_gadgets.1.1.left_bivectors"

    def f(point):
        return torch.func.functional_call(net, {name: point}, (x,)).square().sum()

    assert_gradient_matches_fd(f, net.get_parameter(name).detach(), rtol=1e-7, step=STEP, directions=3)


# (S, T, B, Kp, H): two parts of 8 coordinates per branch placed onto 10 hidden coordinates (sums
# and overlaps), onto 16 (a permutation), and two parts of 4 onto 12 (hidden coordinates that
# receive nothing)
@pytest.mark.parametrize("shape", [(2, 5, 3, 8, 10), (2, 5, 3, 8, 16), (2, 5, 2, 4, 12)])
@pytest.mark.parametrize("kernel", [True, False])
def test_branch_sum_gradient_matches_central_differences(kernel, shape, monkeypatch):
    """The fused Function alone, every input, at zero rows (LayerNorm of a constant row) too, on
    the numba kernels and on the torch operations."""
    if not kernel:
        monkeypatch.setattr(branches, "_kernel_usable", lambda y: False)
    else:
        assert branches._kernel_usable(torch.zeros(1, dtype=torch.float64))
    (y, scale, weights, slope), dest, permutation, H, weight = _branch_case(shape, torch.float64)
    args = [y, scale, weights, slope]
    for position in range(4):
        if position == 0:
            # y itself away from the constant row (the kink of PReLU at the normalised value 0)
            args[0] = y.clone()
            args[0][:, 0] = torch.randn(y[:, 0].shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        else:
            args[0] = y
        def f(point, position=position):
            values = list(args)
            values[position] = point
            return (branch_sum(*values, dest, permutation, H, 1e-5) * weight).sum()

        assert_gradient_matches_fd(f, args[position], rtol=1e-7)


def _branch_case(shape, dtype, seed=0):
    """(y, scale, weights, slope), dest, permutation, H, output gradient for y (S, T, B, Kp);
    token 0 is a constant row (LayerNorm of a constant: normalised values exactly 0, where
    PReLU's derivative is the slope)."""
    S, T, B, Kp, H = shape
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(S, T, B, Kp, dtype=dtype, generator=g)
    y[:, 0] = 0.0
    scale = torch.rand(B, S * Kp, dtype=dtype, generator=g) + 0.5
    weights = None if B == 1 else torch.rand(B, dtype=dtype, generator=g) + 0.5
    slope = torch.tensor([0.3], dtype=dtype)
    dest = (torch.arange(S * Kp) * 7 + 3) % H
    permutation = torch.stack([torch.randperm(H, generator=g) for _ in range(B)])
    grad = torch.randn(T, H, dtype=dtype, generator=g)
    return [y, scale, weights, slope], dest, permutation, H, grad


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
# (S, T, B, Kp, H): parts summed onto fewer hidden coordinates; parts onto more hidden coordinates
# (some receive nothing); one branch; the n = 8 stage of the parity-block path (2 parts of 128 per
# branch)
@pytest.mark.parametrize("shape", [(4, 70, 3, 8, 12), (2, 70, 2, 4, 12), (1, 5, 1, 16, 16), (2, 130, 3, 128, 256)])
def test_branch_sum_kernels_equal_the_torch_operations(shape, dtype, monkeypatch):
    """The numba kernels (CPU) and the torch operations (every other device): outputs and every
    gradient agree to float64 rounding (1e-12) and float32 rounding (2e-6), relative to the
    largest entry."""
    args, dest, permutation, H, grad = _branch_case(shape, dtype)
    results = []
    for kernel in (True, False):
        if not kernel:
            monkeypatch.setattr(branches, "_kernel_usable", lambda y: False)
        inputs = [None if a is None else a.clone().requires_grad_() for a in args]
        out = branch_sum(*inputs, dest, permutation, H, 1e-5)
        wanted = [a for a in inputs if a is not None]
        results.append([out, *torch.autograd.grad(out, wanted, grad)])
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    for fast, reference in zip(*results):
        assert relative(fast, reference) <= tol


def test_no_hidden_square_matrix_is_built_in_training():
    """In training at n = 8 the structured path runs: no gadget assembles its matrix."""
    net = network((256, 256, None, None), torch.float32)
    calls = []
    for gadget in net._gadgets():
        original = gadget._chunk_weight
        gadget._chunk_weight = lambda *a, original=original: calls.append(1) or original(*a)
    net(torch.randn(8, 256)).sum().backward()
    assert not calls


def _per_stage_blocks(monkeypatch):
    """Every stage builds its own parity blocks (the path of a network whose stages differ)."""
    monkeypatch.setattr(RotorNetwork, "_network_blocks", lambda self, x: [None] * (self.hidden_layers + 2))


def _counted_block_calls(monkeypatch):
    """Count the parity-block calls and the eigen-decompositions of the network's stages."""
    from galinear.nn import functional, network_stages as module

    counts = {"blocks": 0, "factors": 0}

    def counted(name, function):
        def call(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(module, "exact_parity_blocks", counted("blocks", module.exact_parity_blocks))
    monkeypatch.setattr(functional, "exact_factors", counted("factors", functional.exact_factors))
    return counts


# (in, out, hidden, chunk, options, calls): the network's parity-block calls in one forward, with
# the stages of one n sharing theirs and with one call per stage: every stage at n = 4 with 9, 9
# and 6 chunk pairs per gadget; n = 8 with a 4-pair output gadget; single rotors without hidden
# layers; input and hidden stages at n = 8 with the output at n = 5; the power decomposition
# (one call per stage either way); a bias (every gadget its own call, outside these counts)
NETWORKS = [
    (40, 24, 48, 16, {}, (1, 4)),
    (256, 1024, None, None, {}, (1, 4)),
    (16, 16, None, None, {"double_rotor": False, "hidden_layers": 0}, (1, 2)),
    (256, 32, None, None, {}, (2, 4)),
    (40, 24, 48, 16, {"decomposition": "power"}, (4, 4)),
    (40, 24, 48, 16, {"bias": True}, (0, 0)),
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("case", ["random", "zero", "equal_angles"])
@pytest.mark.parametrize("config", NETWORKS, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{sorted(c[4])}")
def test_stages_of_one_n_build_their_blocks_in_one_call(config, case, dtype, monkeypatch):
    """The blocks of all stages of one n from one eigen-decomposition and one block call give the
    per-stage path's output and every gradient (x, every bivector, alpha, bias, branch weights,
    PReLU slope): to float64 rounding (1e-12) and float32 rounding (1e-6), relative to the
    largest entry, at random bivectors, zero and equal angles."""
    a, b, hidden, chunk, options, calls = config
    torch.manual_seed(0)
    net = RotorNetwork(a, b, hidden=hidden, chunk_size=chunk, dtype=dtype, backend="dense", **options)
    with torch.no_grad():
        for index, gadget in enumerate(net._gadgets()):
            gadget.alpha.uniform_(0.5, 1.5)
            points = torch.as_tensor(rotor_cases(gadget.n, gadget.pairs, seed=index)[case])
            gadget.left_bivectors.copy_(points)
            if gadget.right_bivectors is not None:
                gadget.right_bivectors.copy_(points.flip(0) * 0.5)
            if gadget.bias is not None:
                gadget.bias.uniform_(-1.0, 1.0)
        net.branch_weights.uniform_(0.5, 1.5)
        net.activation.weight.fill_(0.3)
    if options.get("decomposition") == "power":
        net.eval()  # still under autograd; the power method's warm starts stay as they are between the calls
    x = torch.randn(2, 7, a, dtype=dtype, generator=torch.Generator().manual_seed(1), requires_grad=True)
    weight = torch.randn(2, 7, b, dtype=dtype, generator=torch.Generator().manual_seed(2))
    named = [(name, p) for name, p in net.named_parameters() if p.numel()]  # no branch weights without hidden layers
    inputs = [x, *(p for _, p in named)]
    names = ["x", *(name for name, _ in named)]
    results = []
    with monkeypatch.context() as patch:
        counts = _counted_block_calls(patch)
        for joined in (True, False):
            if not joined:
                _per_stage_blocks(patch)
            counts.update(blocks=0, factors=0)
            y = net(x)
            results.append((y.detach(), *torch.autograd.grad(y, inputs, weight)))
            assert counts["blocks"] == calls[0 if joined else 1]
            if options.get("decomposition") is None and not options.get("bias"):
                assert counts["factors"] == counts["blocks"]  # one eigen-decomposition per block call
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    for name, joined, reference in zip(["y", *names], *results):
        assert relative(joined, reference) <= tol, name


def test_a_graph_of_the_backward_pass_is_refused_with_the_route_that_has_one():
    """create_graph through the fused stage function would give wrong second derivatives: it raises and
    names torch.func, whose gadget-by-gadget path gives them (checked against central differences of
    the gradient)."""
    net = network((16, 8, None, None), torch.float64, "dense")
    x = torch.randn(3, 16, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="differentiable once.*torch.func"):
        torch.autograd.grad(net(x).square().sum(), x, create_graph=True)
    point = torch.randn(3, 16, dtype=torch.float64)
    gradient = torch.func.grad(lambda z: net(z).square().sum())
    hessian = torch.func.jacrev(gradient)(point).reshape(48, 48)
    step = 1e-5
    for k in (0, 17, 40):
        e = torch.zeros(48, dtype=torch.float64)
        e[k] = step
        column = (gradient(point + e.view(3, 16)) - gradient(point - e.view(3, 16))).reshape(-1) / (2 * step)
        torch.testing.assert_close(hessian[:, k], column, rtol=1e-6, atol=1e-6)
