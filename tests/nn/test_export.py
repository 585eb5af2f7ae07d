"""galinear.nn.freeze: the inference form of the rotor layers, and the exports it makes work with
torch's defaults (ONNX through the default dynamo exporter and the legacy one, checked with
onnxruntime; torch.export; torch.jit.trace)."""
import importlib.util
import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from galinear import nn as gnn  # noqa: E402
from galinear.nn import FrozenLinear, FrozenNetwork, freeze  # noqa: E402

_ONNX_MISSING = [name for name in ("onnx", "onnxruntime", "onnxscript") if importlib.util.find_spec(name) is None]
needs_onnx = pytest.mark.skipif(bool(_ONNX_MISSING), reason="the ONNX export tests need "
                                + ", ".join(_ONNX_MISSING) + ": pip install galinear[onnx]")
needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="the compressed-model export needs transformers")


def _relative(got, want) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.abs(got - want).max() / np.abs(want).max())


def _rotor_linear():
    torch.manual_seed(0)
    return gnn.RotorLinear(24, 12, bias=True).eval()   # chunks that overlap and wrap around


def _rotor_network():
    torch.manual_seed(1)
    return gnn.RotorNetwork(16, 8, hidden=16).eval()


def _compressed_llama():
    """A tiny random Llama whose layer 0 q/k/v are the paper's rotor networks (method ``rotor``),
    wrapped to map token ids to logits."""
    from galinear.compress.methods import catalogue as methods
    from galinear.lm import models
    from galinear.testing.models import tiny_llama

    model = tiny_llama(layers=2)
    torch.manual_seed(2)
    spec = methods.MethodSpec(name="rotor")
    for proj in models.PROJECTIONS:
        dense = models.projection(model, 0, proj)
        models.set_projection(model, 0, proj, methods.build_module(spec, dense.in_features, dense.out_features).eval())

    class Logits(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, ids):  # an explicit mask: the legacy exporter has no ONNX op for the packed-sequence check
            return self.lm(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits

    return Logits(model).eval()


# ---------------------------------------------------------------------- freeze itself
def test_freeze_replaces_every_rotor_layer_and_keeps_the_map():
    torch.manual_seed(3)
    model = torch.nn.Sequential(gnn.RotorLinear(16, 16), torch.nn.ReLU(), gnn.RotorNetwork(16, 8, hidden=16),
                                gnn.LowRankLinear(8, 8, rank=2)).eval()
    x = torch.randn(5, 16)
    with torch.no_grad():
        want = model(x)
    low_rank = model[3]
    assert freeze(model) is model
    assert isinstance(model[0], FrozenLinear) and isinstance(model[2], FrozenNetwork)
    assert model[3] is low_rank and not model.training            # exportable layers are kept as they are
    assert not any(p.requires_grad for p in model.parameters())
    assert not list(model[0].parameters()) and not list(model[2].parameters())
    assert _relative(model(x), want) < 1e-5


def test_freeze_of_a_rotor_layer_returns_its_form_and_leaves_it_trainable():
    layer = _rotor_linear().train()
    frozen = freeze(layer)
    assert isinstance(frozen, FrozenLinear) and layer.training and layer.left_bivectors.requires_grad
    x = torch.randn(7, 24, dtype=torch.float64)
    with torch.no_grad():
        want = layer.eval()(x)
    got = frozen(x)
    assert got.dtype == torch.float64                             # the input's dtype, as the layer gives
    assert _relative(got, want) < 1e-6


def test_givens_control_and_shared_layers():
    torch.manual_seed(4)
    shared = gnn.GivensLinear(8, 8)
    model = torch.nn.Sequential(shared, gnn.GivensNetwork(8, 8, hidden=8), shared).eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        want = model(x)
    freeze(model)
    assert isinstance(model[0], FrozenLinear) and model[0] is model[2] and isinstance(model[1], FrozenNetwork)
    assert _relative(model(x), want) < 1e-5


def test_frozen_forms_refuse_bad_input_and_bad_parameters():
    frozen = freeze(_rotor_linear())
    with pytest.raises(ValueError, match="in_features=24"):
        frozen(torch.randn(2, 5))
    network = _rotor_network()
    with torch.no_grad():
        network.branch_weights[0, 0] = float("nan")
    with pytest.raises(ValueError, match="branch_weights"):
        freeze(network)


def test_frozen_state_dict_round_trips():
    network = _rotor_network()
    frozen = freeze(network)
    again = freeze(_rotor_network())           # same shapes, same seed: overwritten below anyway
    with torch.no_grad():
        for value in again.state_dict().values():
            value.zero_()
    again.load_state_dict(frozen.state_dict())
    x = torch.randn(4, 16)
    assert torch.equal(again(x), frozen(x))


# ---------------------------------------------------------------------- torch.export and jit.trace
@pytest.mark.parametrize("make", [_rotor_linear, _rotor_network], ids=["RotorLinear", "RotorNetwork"])
def test_torch_export_and_jit_trace_of_frozen_layers(make):
    frozen = freeze(make())
    x = torch.randn(2, 3, frozen.in_features)
    want = frozen(x)
    program = torch.export.export(frozen, (x,))
    assert _relative(program.module()(x), want) < 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(frozen, (x,))
    assert _relative(traced(x), want) < 1e-6


# ---------------------------------------------------------------------- ONNX, both exporters
def _onnx_outputs(module, args, dynamo: bool):
    import onnxruntime

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            program = torch.onnx.export(module, args, verbose=False)   # torch's default exporter
            data = program.model_proto.SerializeToString()
        else:
            buffer = io.BytesIO()
            torch.onnx.export(module, args, buffer, dynamo=False)
            data = buffer.getvalue()
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    feeds = {item.name: arg.numpy() for item, arg in zip(session.get_inputs(), args)}
    return session.run(None, feeds)[0]


_MODELS = {
    "RotorLinear": (_rotor_linear, lambda: (torch.randn(2, 5, 24),)),
    "RotorNetwork": (_rotor_network, lambda: (torch.randn(3, 16),)),
    "compressed-llama": (_compressed_llama, lambda: (torch.randint(0, 64, (1, 9)),)),
}


@needs_onnx
@pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "legacy"])
@pytest.mark.parametrize("name", list(_MODELS))
def test_onnx_export_matches_torch(name, dynamo):
    if name == "compressed-llama" and importlib.util.find_spec("transformers") is None:
        pytest.skip("the compressed-model export needs transformers")
    make, inputs = _MODELS[name]
    torch.manual_seed(5)
    args = inputs()
    module = make()
    with torch.no_grad():
        want = module(*args)
    module = freeze(module)
    got = _onnx_outputs(module, args, dynamo)
    assert got.shape == tuple(want.shape)
    assert _relative(got, want.numpy()) < 1e-5


@needs_onnx
@needs_transformers
def test_frozen_compressed_model_has_no_rotor_layer_left():
    wrapped = freeze(_compressed_llama())
    names = {type(m).__name__ for m in wrapped.modules()}
    assert "RotorNetwork" not in names and "RotorLinear" not in names and "FrozenNetwork" in names
