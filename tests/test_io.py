"""galinear._io: state files read with no code run, written atomically.

Each refusal is fed a pickle whose unpickling would create a marker file
(galinear.testing.payloads); the marker must never be written.
"""
from pathlib import Path

import numpy as np
import pytest
import torch

from galinear import _io
from galinear.testing.payloads import write_payload


@pytest.mark.parametrize("kind", ["torch", "pickle"])
def test_state_loader_refuses_payload(tmp_path, kind):
    write_payload(tmp_path / "state.pt", tmp_path / "marker", kind)
    with pytest.raises(_io.PickleRefusedError, match=r"state\.pt.*could run code.*delete it"):
        _io.load_state(tmp_path / "state.pt", fix="delete it")
    assert not (tmp_path / "marker").exists()


def test_old_pickles_are_refused_where_the_restricted_loader_is_not_safe(tmp_path, monkeypatch):
    """torch < 2.6 had escapes from weights_only=True: there even a plain-tensor pickle is refused."""
    torch.save({"weight": torch.ones(2)}, tmp_path / "old.pt")
    assert torch.equal(_io.load_state(tmp_path / "old.pt")["weight"], torch.ones(2))
    monkeypatch.setattr(torch, "__version__", "2.5.1")
    with pytest.raises(_io.PickleRefusedError, match=r"old\.pt: .*torch 2\.5\.1 \(< 2\.6\).*refused; regenerate"):
        _io.load_state(tmp_path / "old.pt", fix="regenerate")


def test_state_round_trip_keeps_structure_and_bits(tmp_path):
    model = torch.nn.Linear(5, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(4, 5)).sum().backward()
    optimizer.step()
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": torch.get_rng_state(),
             "numbers": [1, 2.5, float("nan"), None, True, "text"], "pair": (1, 2), "array": np.arange(4),
             "int keys": {0: "a", 3: "b"}, "view": torch.arange(10.0)[2:5]}
    _io.save_state(tmp_path / "s.pt", state)
    back = _io.load_state(tmp_path / "s.pt")
    for name, tensor in state["model"].items():
        assert torch.equal(back["model"][name], tensor) and back["model"][name].dtype == tensor.dtype
    assert torch.equal(back["rng"], state["rng"]) and back["rng"].dtype == torch.uint8
    assert back["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]
    assert torch.equal(back["optimizer"]["state"][0]["exp_avg"], state["optimizer"]["state"][0]["exp_avg"])
    assert back["numbers"][:2] == [1, 2.5] and np.isnan(back["numbers"][2]) and back["numbers"][3:] == [None, True, "text"]
    assert back["pair"] == (1, 2) and back["int keys"] == {0: "a", 3: "b"}
    np.testing.assert_array_equal(back["array"], np.arange(4))
    assert torch.equal(back["view"], torch.tensor([2.0, 3.0, 4.0]))
    assert [p.name for p in tmp_path.iterdir()] == ["s.pt"]  # no temporary file left


def test_atomic_write_leaves_old_file_on_interrupt(tmp_path):
    path = tmp_path / "out.json"
    _io.save_json(path, {"old": 1})

    def interrupted(tmp):
        Path(tmp).write_text('{"half')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _io.atomic_write(path, interrupted)
    assert _io.load_json(path) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_json_nested_100000_deep_is_one_line_not_a_recursion_error(tmp_path):
    from safetensors.torch import save_file

    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.json").write_text(deep)
    with pytest.raises(_io.CorruptFileError, match=r"deep\.json: nests brackets more than 200 deep.*; rewrite it"):
        _io.load_json(tmp_path / "deep.json", fix="rewrite it")
    save_file({"x": torch.zeros(1)}, str(tmp_path / "deep.pt"), metadata={"format": _io.STATE_FORMAT, "galinear": deep})
    with pytest.raises(_io.CorruptFileError, match=r"deep\.pt: nests brackets more than 200 deep"):
        _io.load_state(tmp_path / "deep.pt")
    text = '{"a": "[[[[", "b": [' + "[" * 150 + "]" * 150 + "]}"
    assert _io.parse_json(text, "x")["a"] == "[[[["  # brackets inside strings do not count
