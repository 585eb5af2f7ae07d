"""The one dispatcher of the rotor layers (galinear.nn.functional.plan): each switch point on both
sides, the layers asking it and nothing else, the thread policy of a call, and `auto` computing
what the backend it picks computes when named."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from galinear import _switch_points as sp
from galinear.nn import RotorLinear, RotorNetwork
from galinear.nn import functional as F
from galinear.nn.functional import plan as dispatch

P = dispatch.Path
CPU = torch.device("cpu")
F32 = torch.float32
GALINEAR = Path(dispatch.__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_plans():
    """Plans are remembered per argument tuple; tests that patch what they depend on start and end clean."""
    dispatch.forget_plans()
    yield
    dispatch.forget_plans()


def needs_numba():
    if not dispatch.numba_usable():
        pytest.skip("numba does not compile here (NUMBA_DISABLE_JIT or missing)")


def plan(n, batch, mode="inference", threads=2, **kw):
    return dispatch.plan(n, batch, CPU, F32, mode, threads, **kw)


# ---------------------------------------------------------------------------------------------
# Every switch point, on both sides.

def test_decoding_needs_chunks_of_decode_min_n():
    needs_numba()
    n = sp.DECODE_MIN_N
    assert plan(n, 1).decode
    below = plan(n - 1, 1)
    assert not below.decode and below.path is P.CACHED_MATRIX


def test_decoding_more_than_one_token_needs_decode_min_entries():
    needs_numba()
    n, big = sp.DECODE_MIN_N, sp.DECODE_MIN_ENTRIES
    assert plan(n, 2, entries=big).decode
    assert not plan(n, 2, entries=big - 1).decode
    assert plan(n, 2, entries=big - 1).path is P.CACHED_MATRIX


def test_few_tokens_in_inference_never_run_a_rotor_backend():
    n, limit = 11, sp.MATRIX_MAX_INFERENCE_BATCH
    at = plan(n, limit, entries=1)
    assert (at.path, at.decode) == (P.CACHED_MATRIX, False)
    assert plan(n, limit + 1, entries=1).backend == "spinor"
    if dispatch.numba_usable():
        big = sp.DECODE_MIN_ENTRIES
        assert plan(n, limit, entries=big).decode and not plan(n, limit + 1, entries=big).decode


def test_inference_matrix_limit():
    n = sp.INFERENCE_MATRIX_MAX_N
    assert plan(n, 4096).path is P.CACHED_MATRIX
    above = plan(n + 1, 4096)
    assert above.backend == "spinor" and above.threads == 1


@pytest.mark.parametrize("batch", [1, 4096])
def test_training_matrix_limit_and_the_thread_rule(batch):
    n = sp.MATRIX_MAX_N
    for threads in (1, 2):
        at = plan(n, batch, "training", threads)
        assert (at.path, at.decode, at.threads) == (P.CHUNK_MATRICES, False, None)
    for threads in (1, 2):  # one intra-op thread; the token blocks go to the caller's threads
        above = plan(n + 1, batch, "training", threads)
        assert (above.backend, above.threads) == ("spinor", 1)


@pytest.mark.parametrize("threads", [1, 2])
def test_network_stages_run_the_parity_blocks_in_training(threads):
    n = sp.NETWORK_BLOCKS_MAX_N
    at = plan(n, 4096, "training", threads, network_stage=True)
    assert (at.path, at.decode, at.threads) == (P.PARITY_BLOCKS, False, None)
    assert plan(n + 1, 4096, "training", threads, network_stage=True) == plan(n + 1, 4096, "training", threads)
    # inference and a named backend are as for one gadget
    assert plan(8, 4096, "inference", threads, network_stage=True) == plan(8, 4096, "inference", threads)
    assert plan(8, 4096, "training", threads, network_stage=True, backend="spinor").backend == "spinor"


def test_serial_backends_run_one_thread_on_the_cpu_only():
    for name in sp.SERIAL_BACKENDS:
        chosen = plan(11, 4096, backend=name)
        assert (chosen.path, chosen.backend, chosen.threads, chosen.rule) == (
            P.SPINOR if name == "spinor" else P.BACKEND, name, 1, "requested")
        assert dispatch.plan(11, 4096, "cuda", F32, "inference", backend=name).threads is None
    for name in ("dense", "numba"):
        assert plan(11, 4096, backend=name).threads is None


def test_other_devices_and_dtypes():
    cuda = dispatch.plan(11, 4096, "cuda", F32, "inference")             # nothing runs: no GPU needed
    assert (cuda.backend, cuda.decode, cuda.threads) == ("spinor", False, None)
    assert dispatch.plan(11, 4096, "cuda", torch.bfloat16, "inference").backend == "factored"
    assert dispatch.plan(11, 1, "cuda", F32, "inference", entries=sp.DECODE_MIN_ENTRIES).decode is False
    assert plan(11, 4096, mode="training").backend in ("numba", "spinor")
    assert dispatch.plan(11, 4096, CPU, torch.bfloat16, "inference").backend == "factored"


def test_network_runs_whole_on_few_tokens_in_inference():
    limit = sp.MATRIX_MAX_INFERENCE_BATCH
    whole = plan(11, limit, network=True)
    assert whole.path is (P.DECODE if dispatch.numba_usable() else P.STACKED_MATRICES)
    assert plan(11, limit + 1, network=True).path is P.GADGETS
    assert plan(11, 1, "training", network=True).path is P.GADGETS
    assert dispatch.plan(11, 1, CPU, torch.bfloat16, "inference", network=True).path is P.GADGETS  # autocast
    cuda = dispatch.plan(11, 1, "cuda", F32, "inference", network=True)
    assert (cuda.path, cuda.decode) == (P.STACKED_MATRICES, False)


def _inside_vmap(ask):
    """ask() run inside torch.func.vmap (a transform: the call counts as captured)."""
    seen = []
    torch.func.vmap(lambda t: seen.append(ask()) or t * 1)(torch.zeros(2, 1))
    return seen[0]


def test_captured_calls_keep_to_plain_torch():
    captured_plan = dispatch.Plan(P.CACHED_MATRIX, None, None, "captured: plain torch operations")
    assert _inside_vmap(lambda: plan(11, 1)) == captured_plan
    assert _inside_vmap(lambda: plan(11, 4096, backend="numba")) == dispatch.Plan(
        P.BACKEND, "numba", None, "requested", options=(("kernel", "tile"),), parts="gather")
    assert _inside_vmap(lambda: plan(11, 1, network=True)).path is P.GADGETS
    captured = _inside_vmap(lambda: dispatch.plan(11, 4, CPU, torch.float64, "training", backend="spinor",
                                                  sandwich=True))
    assert (captured.backend, captured.threads) == ("factored", None)
    assert plan(11, 1) != captured_plan  # outside


def test_bivector_parts_correlation_limit():
    limit = sp.CORRELATION_LIMIT
    assert dispatch.bivector_parts_method(limit, CPU, numba=True) == "correlation"
    assert dispatch.bivector_parts_method(2 * limit, CPU, numba=True) == ("numba" if dispatch.numba_usable() else "gather")
    assert dispatch.bivector_parts_method(2 * limit, CPU, numba=False) == "gather"
    assert dispatch.bivector_parts_method(2 * limit, "cuda", numba=True) == "gather"


def test_bad_mode_is_named():
    with pytest.raises(ValueError, match="mode must be one of"):
        plan(11, 1, mode="train")


# ---------------------------------------------------------------------------------------------
# The layers ask plan() and choose nothing themselves.

@pytest.fixture
def spy_backend():
    calls = []

    def spy(x, VL, WL, VR, WR):
        calls.append((x.shape, torch.get_num_threads()))
        return F.resolve_sandwich_backend("factored", x.device, x.dtype)[1](x, VL, WL, VR, WR)

    F.register_sandwich_backend("plan-spy", spy, devices=("cpu",), dtypes=(torch.float32, torch.float64),
                                priority=-1, differentiable=True)
    yield calls
    F.unregister_sandwich_backend("plan-spy")


def _recording(monkeypatch, answer=None):
    """plan() replaced by a recorder that returns ``answer`` (or the real plan)."""
    asked = []
    real = dispatch.plan

    def recorder(*args, **kwargs):
        asked.append((args, kwargs))
        if answer is None:
            return real(*args, **kwargs)
        return answer(*args, **kwargs) if callable(answer) else answer

    monkeypatch.setattr(dispatch, "plan", recorder)
    return asked


def test_rotor_linear_runs_what_plan_says(monkeypatch, spy_backend):
    torch.manual_seed(0)
    layer = RotorLinear(64, 64, chunk_size=16).eval()
    asked = _recording(monkeypatch, dispatch.Plan(P.BACKEND, "plan-spy", None, "test"))
    with torch.no_grad():
        layer(torch.randn(5, 64))
    (args, kwargs), = asked
    assert args[:5] == (4, 5, CPU, F32, "inference") and kwargs == {"backend": "auto", "entries": 64 * 64}
    assert spy_backend and spy_backend[0][0] == (5, 16, 16)
    layer.train()
    layer(torch.randn(3, 64)).sum().backward()                       # training asks too
    assert asked[-1][0][4] == "training" and len(spy_backend) >= 2


def test_rotor_network_runs_what_plan_says(monkeypatch, spy_backend):
    torch.manual_seed(0)
    net = RotorNetwork(64, 64, hidden=64, chunk_size=16).eval()
    spy = dispatch.Plan(P.BACKEND, "plan-spy", None, "test")
    gadgets = dispatch.Plan(P.GADGETS, None, None, "test")
    asked = _recording(monkeypatch, lambda *args, network=False, **kwargs: gadgets if network else spy)
    with torch.no_grad():
        net(torch.randn(2, 64))       # would otherwise run whole (decoding kernel or stacked matrices)
    assert asked[0][1]["network"] is True and asked[0][0][1] == 2
    assert len(asked) == 1 + 1 + 2 * 3 + 1 and all(kw.get("backend") == "auto" for _, kw in asked[1:])
    assert len(spy_backend) == 8                                    # every gadget ran the backend it was told


def test_the_layers_choose_nothing_themselves():
    """Inside galinear/nn only the dispatcher names the switch points and only it and its thread
    module set thread counts, and every switch point is one constant of galinear/_switch_points.py."""
    names = ["MATRIX_MAX_N", "INFERENCE_MATRIX_MAX_N", "MATRIX_MAX_INFERENCE_BATCH", "DECODE_MIN_N",
             "DECODE_MIN_ENTRIES", "CORRELATION_LIMIT", "SERIAL_BACKENDS", "choose_backend", "rule_backend",
             "autotable", "backend_table", "batch_bucket", "_backend_for", "_decodes", "numba_usable",
             "set_num_threads", "set_threads", "SPINOR_TRANSFORM_ENV", "transform_setting", "pick_kernel",
             "RESIDENT_MAX_TOKENS"]
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    plan_file = Path(dispatch.__file__).resolve()
    # the numba kernel's rule, below the dispatcher and the numba backend (neither imports the other)
    rules_file = GALINEAR / "nn" / "_kernel_rules.py"
    threads_file = plan_file.with_name("threads.py")  # sets thread counts, names no switch point
    setters = {"set_num_threads", "set_threads"}
    found = [f"{path.relative_to(GALINEAR.parent)}:{number}: {line.strip()}"
             for path in sorted((GALINEAR / "nn").rglob("*.py")) if path.resolve() not in (plan_file, rules_file)
             for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)
             if path.resolve() != threads_file or not set(pattern.findall(line)) <= setters]
    assert not found, "switch points or thread settings outside the dispatcher:\n" + "\n".join(found)
    constants = [name for name in vars(sp) if name.isupper()]
    assert set(constants) >= {"MATRIX_MAX_N", "RESIDENT_MAX_TOKENS", "SERIAL_BACKENDS"}
    assign = re.compile(r"^\s*(" + "|".join(constants) + r")\s*(:[^=]*)?=", re.M)
    defined = [str(path.relative_to(GALINEAR.parent)) for path in sorted(GALINEAR.rglob("*.py"))
               if path.name != "_switch_points.py" and assign.search(path.read_text())]
    assert not defined, f"switch points defined outside galinear/_switch_points.py: {defined}"
    assert not (GALINEAR / "nn" / "functional" / "backend_table.json").exists()


# ---------------------------------------------------------------------------------------------
# The thread policy of a call.

def _numba_threads():
    import numba

    return numba.get_num_threads()


def test_thread_context_restores_the_counts_when_the_call_raises():
    before = torch.get_num_threads()
    numba_before = _numba_threads()  # starts numba's pool first (that may set torch's count)
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match="inside"):
            with dispatch.intra_op_threads(1):
                assert torch.get_num_threads() == 1 and _numba_threads() == 1
                raise RuntimeError("inside")
        assert torch.get_num_threads() == 2 and _numba_threads() == numba_before
        with dispatch.intra_op_threads(None):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="positive integer"):
        dispatch.intra_op_threads(0)


def test_thread_context_is_a_no_op_while_captured(monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        def ask():
            with dispatch.intra_op_threads(1):
                return torch.get_num_threads()

        assert _inside_vmap(ask) == 2
        assert ask() == 1  # outside a transform the count applies
    finally:
        torch.set_num_threads(before)


def test_a_layer_runs_a_serial_backend_with_one_thread_and_restores(monkeypatch, spy_backend):
    monkeypatch.setattr(dispatch, "SERIAL_BACKENDS", ("plan-spy",))
    layer = RotorLinear(64, 64, chunk_size=16, backend="plan-spy").eval()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch.no_grad():
            layer(torch.randn(40, 64))
            assert spy_backend[-1][1] == 1 and torch.get_num_threads() == 2
            monkeypatch.setattr(F.sandwich_backend_entry("plan-spy"), "fn", lambda *a: (_ for _ in ()).throw(KeyError("spy")))
            with pytest.raises(KeyError, match="spy"):
                layer(torch.randn(40, 64))
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("backend", ["plan-spy", "spinor"])
def test_the_exact_gradient_runs_its_backward_with_the_forward_threads(monkeypatch, spy_backend, backend):
    """A backend that runs single-threaded in the forward call runs its transposed map in the
    backward pass single-threaded too, which autograd runs after the call has returned; the
    bivector parts (one batched product or one parallel loop) run with the count the forward call's
    caller had; the caller's count is back after it, also when the backward pass raises."""
    from galinear.nn import dexp

    monkeypatch.setattr(dispatch, "SERIAL_BACKENDS", ("plan-spy", "spinor"))
    parts, real_parts = [], dexp.bivector_parts

    def recording(real, *args, **kwargs):
        parts.append(torch.get_num_threads())
        if len(parts) == 2:
            raise KeyError("backward")
        return real(*args, **kwargs)

    def recording_parts(*args, **kwargs):
        return recording(real_parts, *args, **kwargs)

    monkeypatch.setattr(dexp, "bivector_parts", recording_parts)
    if backend == "spinor":  # its own backward pass computes the bivector parts with the transposed map
        fn = F.resolve_sandwich_backend("spinor", torch.device("cpu"), torch.float64)[1]
        monkeypatch.setattr(fn, "backward", lambda *args, real=fn.backward, **kwargs: recording(real, *args, **kwargs))
    layer = RotorLinear(64, 64, chunk_size=16, backend=backend, dtype=torch.float64)  # training mode
    x = torch.randn(40, 64, dtype=torch.float64, requires_grad=True)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        y = layer(x)
        assert torch.get_num_threads() == 2
        y.sum().backward()
        # the spinor backend's own backward pass runs at its forward's serial count, sharing its
        # token blocks among the caller's workers; the bivector parts of the others at the caller's
        first = 1 if backend == "spinor" else 2
        assert parts == [first] and torch.get_num_threads() == 2
        assert x.grad is not None and layer.left_bivectors.grad is not None
        if backend == "plan-spy":  # the forward call and the transposed map of the backward pass
            assert [threads for _, threads in spy_backend] == [1, 1]
        with pytest.raises(KeyError, match="backward"):
            layer(x).sum().backward()
        assert parts == [first, first] and torch.get_num_threads() == 2
        monkeypatch.setattr(dispatch, "SERIAL_BACKENDS", ())  # a backend that keeps the caller's count
        dispatch.forget_plans()
        layer(x).sum().backward()
        assert parts == [first, first, 2] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------
# `auto` computes what the backend it picks computes when named.

@pytest.mark.parametrize("width, tokens, training", [
    (1024, 40, False),    # n = 10, inference: spinor (one thread)
    (512, 40, False),     # n = 9, inference: the cached matrix
    (512, 1, False),      # n = 9, one token: the decoding kernel
    (256, 24, True),      # n = 8, training: spinor (1 thread) or numba
    (64, 24, True),       # n = 6, training: the chunk matrices
])
def test_auto_equals_the_backend_it_picks(width, tokens, training):
    torch.manual_seed(1)
    auto = RotorLinear(width, width)
    x = torch.randn(tokens, width)
    with torch.set_grad_enabled(training):
        picked = auto._plan(tokens, x, training)
    named = RotorLinear(width, width, backend=picked.backend or dispatch.MATRICES)
    named.load_state_dict(auto.state_dict())
    auto.train(training)
    named.train(training)
    if training:
        ya, yn = auto(x), named(x)
        ya.square().sum().backward()
        yn.square().sum().backward()
        assert torch.equal(auto.left_bivectors.grad, named.left_bivectors.grad)
    else:
        with torch.no_grad():
            ya = auto(x)
            yn = named.decode(x) if picked.decode else named(x)
    assert torch.equal(ya, yn), picked


def test_spinor_transform_rule_and_switch(monkeypatch):
    monkeypatch.delenv(dispatch.SPINOR_TRANSFORM_ENV, raising=False)
    expected_cpu = "numba" if dispatch.numba_usable() else "torch"
    assert dispatch.spinor_transform(numba=True, triton=False) == expected_cpu
    assert dispatch.spinor_transform(numba=False, triton=True) == "triton"
    assert dispatch.spinor_transform(numba=False, triton=False) == "torch"
    monkeypatch.setenv(dispatch.SPINOR_TRANSFORM_ENV, "torch")
    assert dispatch.spinor_transform(numba=True, triton=True) == "torch"
    monkeypatch.setenv(dispatch.SPINOR_TRANSFORM_ENV, "fast")
    with pytest.raises(ValueError, match="GALINEAR_SPINOR_TRANSFORM must be 'auto' or 'torch'"):
        dispatch.spinor_transform(numba=True, triton=False)


def test_the_plan_carries_the_spinor_transform_and_reads_the_switch_at_each_call(monkeypatch):
    monkeypatch.delenv(dispatch.SPINOR_TRANSFORM_ENV, raising=False)
    chosen = plan(11, 64, "training")
    expected = "numba" if dispatch.numba_usable() else "torch"
    assert chosen.path is P.SPINOR and chosen.options == (("transform", expected),)
    assert chosen.fn.keywords == {"transform": expected} and chosen.fn.backward.keywords == {"transform": expected}
    assert dispatch.plan(11, 64, "cuda", F32, "training").options[0][0] == "transform"
    monkeypatch.setenv(dispatch.SPINOR_TRANSFORM_ENV, "torch")
    assert plan(11, 64, "training").options == (("transform", "torch"),)
    assert dispatch.spinor_transform_for(CPU, 11, F32) == "torch"
    monkeypatch.setenv(dispatch.SPINOR_TRANSFORM_ENV, "fast")
    with pytest.raises(ValueError, match="GALINEAR_SPINOR_TRANSFORM must be 'auto' or 'torch'"):
        plan(11, 64, "training")


def test_the_plan_carries_the_bivector_parts_method():
    limit = sp.CORRELATION_LIMIT
    n_small, n_large = limit.bit_length() - 1, limit.bit_length()
    assert plan(n_small, 64, "training", backend="spinor").parts == "correlation"
    large = "numba" if dispatch.numba_usable() else "gather"
    assert plan(n_large, 64, "training", backend="spinor").parts == large
    assert dispatch.plan(n_large, 64, CPU, torch.bfloat16, "training", backend="factored").parts == "gather"
    assert _inside_vmap(lambda: plan(n_large, 64, "training", backend="spinor")).parts == "gather"
    assert plan(n_large, 4, "inference").parts is None                    # no sandwich path, no parts
    assert dispatch.plan(n_large, 64, CPU, F32, "training", backend="factored", sandwich=True).parts is None


def test_a_replaced_backend_gets_only_the_options_it_declares():
    def plain(x, VL, WL, VR=None, WR=None):
        return x

    entry = F.sandwich_backend_entry("numba")
    F.register_sandwich_backend("numba", plain, devices=("cpu",), priority=entry.priority)
    try:
        chosen = plan(11, 4, "inference", backend="numba")
        assert chosen.options == (("kernel", "resident"),) and chosen.fn is plain
    finally:
        F.unregister_sandwich_backend("numba")
        F.backends._REGISTRY["numba"] = entry
        dispatch.forget_plans()
    assert plan(11, 4, "inference", backend="numba").fn.keywords == {"kernel": "resident"}


def test_a_network_in_training_asks_once_for_every_stage(monkeypatch):
    """Under autograd the network's one plan holds every stage's plan: no stage asks again."""
    torch.manual_seed(0)
    net = RotorNetwork(64, 64, hidden=64, chunk_size=16)
    asked = _recording(monkeypatch)
    net(torch.randn(3, 64)).sum().backward()
    (args, kwargs), = asked
    assert kwargs["network"] and kwargs["autograd"] and len(kwargs["stages"]) == 4
    whole = dispatch.plan(*args, **kwargs)
    assert whole.path is P.STAGES and [s.path for s in whole.stages] == [P.PARITY_BLOCKS] * 4


def test_an_unknown_backend_names_the_valid_ones():
    layer = RotorLinear(64, 64, chunk_size=16, backend="nope")
    with pytest.raises(ValueError, match=r"unknown sandwich backend 'nope'; valid: 'auto' or a registered name"):
        layer(torch.randn(40, 64))
    with pytest.raises(TypeError, match="backend must be a string"):
        plan(11, 1, backend=None)


def test_a_decoding_network_reads_its_structure_once_per_parameter_state(monkeypatch):
    """Whether the decoding kernel applies is read again only after a tensor changes: an in-place
    edit, a bias added, a conversion to another dtype (the same tensors with new data)."""
    needs_numba()
    torch.manual_seed(0)
    net = RotorNetwork(64, 64, hidden=64).eval()
    walks = []
    real = RotorNetwork._decoder_applies
    monkeypatch.setattr(RotorNetwork, "_decoder_applies", lambda self: walks.append(1) or real(self))
    x = torch.randn(1, 64)
    with torch.no_grad():
        first = net(x)
        assert torch.equal(net(x), first) and len(walks) == 1
        net.branch_weights.mul_(1.5)                               # an in-place edit: a new state
        changed = net(x)
        assert len(walks) == 2 and not torch.equal(changed, first)
        net.double()                                               # same tensors, float64 data
        y = net(x.double())
        assert len(walks) == 3 and y.dtype == torch.float64
        torch.testing.assert_close(y, net._fused_forward(x.double()), rtol=1e-10, atol=1e-10)
        gadget = net.output_gadget
        gadget.bias = torch.nn.Parameter(torch.ones(64, dtype=torch.float64))
        assert not net._structure_of_call(True, False)[1]          # a bias: the kernel cannot run it
        assert dispatch.plan(gadget.n, 1, CPU, torch.float64, "inference", network=True,
                             decodes=False).path is P.STACKED_MATRICES
        torch.testing.assert_close(net(x.double()), net._fused_forward(x.double()))
    assert len(walks) == 4
