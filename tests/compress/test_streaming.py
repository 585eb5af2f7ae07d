"""Captures kept on disk in shards: the same rows, and fits identical bit for bit to the in-memory path."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from galinear.compress.fitting import activations, converge, projection
from galinear.compress.methods import catalogue as methods
from galinear.lm import models  # noqa: E402
from galinear.compress.fitting.activations import CaptureShards  # noqa: E402
from galinear.testing.models import tiny_llama  # noqa: E402


def _windows(count=7, length=24, seed=0):
    return np.random.default_rng(seed).integers(0, 64, (count, length))


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """Layer 1's attention input of a tiny Llama over 7 windows: in memory, and in shards of 2 windows."""
    model = tiny_llama()
    ids = _windows()
    whole = activations.capture(model, 1, ids)
    shards = activations.capture_to_shards(model, 1, ids, str(tmp_path_factory.mktemp("cap") / "c"), shard_windows=2)
    valid_ids = _windows(3, 24, seed=1)
    valid = activations.capture(model, 1, valid_ids)
    valid_shards = activations.capture_to_shards(model, 1, valid_ids, str(tmp_path_factory.mktemp("cap") / "v"),
                                                 shard_windows=1)
    return model, whole, shards, valid, valid_shards


def test_shards_hold_the_rows_of_capture(captured):
    _, whole, shards, _, _ = captured
    index = json.loads(open(os.path.join(shards.folder, "capture.json")).read())
    assert index["rows"] == [48, 48, 48, 24]  # 7 windows of 24 tokens, 2 windows a shard: memory bounded by 48 rows
    assert sorted(f for f in os.listdir(shards.folder) if f.endswith(".safetensors")) == [
        f"shard-{k:05d}.safetensors" for k in range(4)]
    assert len(shards) == len(whole) and shards.shape == tuple(whole.shape)
    assert torch.equal(shards.to_tensor(), whole)
    assert torch.equal(shards[5:100], whole[5:100]) and torch.equal(shards[-1], whole[-1])
    idx = torch.tensor([167, 0, 47, 48, 48, 3, -2, 100])  # across shards, repeated, negative
    assert torch.equal(shards[idx], whole[idx])
    view = shards.view(40, 130)
    assert len(view) == 90 and torch.equal(view[torch.arange(90).flip(0)], whole[40:130].flip(0))


def test_o_proj_input_shards(tmp_path):
    model, ids = tiny_llama(), _windows(3)
    shards = activations.capture_to_shards(model, 2, ids, str(tmp_path / "o"), where="o_in", shard_windows=2,
                                           batch_size=2)
    assert torch.equal(shards.to_tensor(), activations.capture(model, 2, ids, where="o_in", batch_size=2))


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(1, 9), min_size=1, max_size=5), data=st.data())
def test_rows_of_any_index_equal_tensor_indexing(tmp_path_factory, counts, data):
    rows = torch.randn(sum(counts), 3, dtype=torch.float64)
    parts = list(torch.split(rows, counts))
    shards = activations.write_shards(str(tmp_path_factory.mktemp("h") / "s"), iter(parts))
    n = len(rows)
    idx = torch.tensor(data.draw(st.lists(st.integers(-n, n - 1), max_size=20)), dtype=torch.long)
    assert torch.equal(shards[idx], rows[idx])
    a, b = sorted(data.draw(st.tuples(st.integers(0, n), st.integers(0, n))))
    assert torch.equal(shards.view(a, b).to_tensor(), rows[a:b])


def test_bad_index_and_damaged_shard_are_named(captured, tmp_path):
    _, whole, shards, _, _ = captured
    with pytest.raises(IndexError, match="row numbers must lie in"):
        shards[torch.tensor([len(whole)])]
    with pytest.raises(IndexError, match="integer tensor"):
        shards[torch.tensor([0.5])]
    copy = activations.write_shards(str(tmp_path / "c"), iter([whole[:10], whole[10:20]]))
    path = os.path.join(copy.folder, "shard-00001.safetensors")
    open(path, "wb").write(open(path, "rb").read()[:30])
    with pytest.raises(ValueError, match="shard-00001.safetensors.*capture again"):
        CaptureShards(copy.folder)[torch.tensor([15])]
    with pytest.raises(ValueError, match="capture.json.*missing"):
        CaptureShards(str(tmp_path))


def _module(name, seed=0):
    torch.manual_seed(seed)
    return methods.build_module(methods.MethodSpec(name, hidden=16), 32, 16)


@pytest.mark.parametrize("name", ["lr1", "rotor"])
def test_fixed_budget_fit_from_shards_is_identical(captured, name):
    model, whole, shards, _, _ = captured
    orig = models.projection(model, 1, "k_proj")
    a, b = _module(name), _module(name)
    sa = projection.fit_projection(a, whole, whole, orig.weight, lr=0.05, epochs=2.5, batch_size=40, seed=3)
    sb = projection.fit_projection(b, shards, shards, orig.weight, lr=0.05, epochs=2.5, batch_size=40, seed=3)
    assert sa == sb and sa["steps"] == 12  # round(2.5 * ceil(168 / 40))
    for (key, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(va, vb), key


def test_converged_fit_from_shards_is_identical(captured):
    model, whole, shards, valid, valid_shards = captured
    orig = models.projection(model, 1, "k_proj")
    a, b = _module("lr1"), _module("lr1")
    settings_ = dict(lr=0.05, batch_size=32, seed=5, max_steps=30, eval_every=3, patience=2)
    sa = converge.fit_until_converged(a, whole, whole, orig.weight, valid_inputs=valid, valid_target_inputs=valid,
                                      **settings_)
    sb = converge.fit_until_converged(b, shards.view(0, 150), shards.view(0, 150), orig.weight,
                                      valid_inputs=valid_shards, valid_target_inputs=valid_shards, **settings_)
    # the in-memory fit on the same 150 rows
    c = _module("lr1")
    sc = converge.fit_until_converged(c, whole[:150], whole[:150], orig.weight, valid_inputs=valid,
                                      valid_target_inputs=valid, **settings_)
    assert sb == sc and sa["curve"] != sc["curve"]  # the view changes the rows, and only that
    assert len(sb["curve"]) > 3
    for va, vb in zip(c.state_dict().values(), b.state_dict().values()):
        assert torch.equal(va, vb)
