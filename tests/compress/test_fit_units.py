"""The seed rule of the compression fits and their checkpointed units."""
import os

import pytest

torch = pytest.importorskip("torch")

from galinear.compress.fitting import seeds
from galinear.compress.storage import checkpoints


def test_fit_seed_is_the_documented_rule_and_keeps_units_apart():
    assert seeds.fit_seed(0) == 0
    assert seeds.fit_seed(2, 15, 1) == 2 * 1_000_003 + 15 * 131 + 1
    assert seeds.fit_seed(1, 0, seeds.DISTILL_SLOT) == 1_000_003 + 17
    assert seeds.fit_seed(0, 3, seeds.O_PROJ_SLOT) == 3 * 131 + 7
    drawn = {seeds.fit_seed(s, layer, slot) for s in range(3) for layer in range(40)
             for slot in (0, 1, 2, seeds.O_PROJ_SLOT, seeds.DISTILL_SLOT)}
    assert len(drawn) == 3 * 40 * 5


def test_a_unit_is_saved_once_and_read_back_once(tmp_path, capsys, monkeypatch):
    """The Store reads each checkpoint of a layer's units once (:meth:`Store.saved_unit`); a damaged
    one is a miss, removed, and the unit is fitted again."""
    from galinear.compress import MethodSpec
    from galinear.compress.storage.store import Store
    from galinear.testing.compression import tiny_config

    store = Store(tiny_config(tmp_path, targets=("q_proj", "k_proj")), "0123456789abcdef")
    spec = MethodSpec("lr1")
    assert store.saved_unit(spec, 0, (), 1) == {} and not store.unit_done(spec, 0, (), 1)
    records = {p: {"state": torch.nn.Linear(2, 2).state_dict(), "stats": {"calls": 1}} for p in ("q_proj", "k_proj")}
    store.save_unit(spec, 0, (), 1, records)
    paths = [store.unit_path(spec, 0, (), 1, p) for p in ("q_proj", "k_proj")]
    assert all(p.endswith(".safetensors") and os.path.exists(p) for p in paths)
    reads = []
    real = checkpoints.load
    monkeypatch.setattr(checkpoints, "load", lambda path, **kw: reads.append(path) or real(path, **kw))
    back = Store(store.config, store.key).saved_unit(spec, 0, (), 1)
    assert sorted(reads) == sorted(paths) and set(back) == {"q_proj", "k_proj"}  # each file once
    assert torch.equal(back["q_proj"]["state"]["weight"], records["q_proj"]["state"]["weight"])
    with open(paths[1], "wb") as f:  # a damaged file: a miss, removed
        f.write(b"not a state file")
    fresh = Store(store.config, store.key)
    assert set(fresh.saved_unit(spec, 0, (), 1)) == {"q_proj"} and not os.path.exists(paths[1])
    assert not fresh.unit_done(spec, 0, (), 1)
    assert "recomputing" in capsys.readouterr().err
    assert checkpoints.cached(str(tmp_path / "c.safetensors"), lambda: {"x": torch.ones(1)})["x"].item() == 1.0
    assert checkpoints.cached(str(tmp_path / "c.safetensors"), lambda: pytest.fail("computed again"))["x"].item() == 1.0


@pytest.mark.parametrize("objective", ["qkv", "attention"])
def test_a_layer_reads_its_checkpoints_once(tiny, tmp_path, monkeypatch, objective):
    """Fitting a layer set reads each unit's checkpoint once, whether the units are missing (first
    run) or all on disk (a rerun takes them back, bit for bit, and captures nothing)."""
    from galinear.compress import Study
    from galinear.testing.compression import tiny_config
    from galinear.testing.models import TEXTS

    pytest.importorskip("transformers")
    study = Study(tiny_config(tmp_path, datasets=("a",), layer_sets=((0, 2),), methods=("lr1",), epochs=0.5,
                              objective=objective), tiny, texts=TEXTS)
    spec = study.config.method_spec("lr1")
    units = [study.store.unit_path(spec, 0, prefix, layer, p)
             for prefix, layer in (((), 0), ((0,), 2)) for p in ("q_proj", "k_proj", "v_proj")]
    reads = []
    real = checkpoints.load
    monkeypatch.setattr(checkpoints, "load", lambda path, **kw: reads.append(path) or real(path, **kw))
    first = study.fit_layer_set(spec, 0, (0, 2))
    assert sorted(r for r in reads if r in units) == sorted(units)  # missing: each looked for once
    reads.clear()
    captured = []
    monkeypatch.setattr(type(study.captures), "pair", lambda *a, **k: captured.append(a) or pytest.fail("captured"))
    again = study.fit_layer_set(spec, 0, (0, 2))
    assert sorted(r for r in reads if r in units) == sorted(units) and not captured  # on disk: each read once
    for key, module in first.replacements.items():
        for name, value in module.state_dict().items():
            assert torch.equal(value, again.replacements[key].state_dict()[name])
