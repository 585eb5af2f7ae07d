"""The seed rule of the compression fits and their checkpointed units."""
import os

import pytest

torch = pytest.importorskip("torch")

from galinear.compress.fitting import fit


def test_fit_seed_is_the_documented_rule_and_keeps_units_apart():
    assert fit.fit_seed(0) == 0
    assert fit.fit_seed(2, 15, 1) == 2 * 1_000_003 + 15 * 131 + 1
    assert fit.fit_seed(1, 0, fit.DISTILL_SLOT) == 1_000_003 + 17
    assert fit.fit_seed(0, 3, fit.O_PROJ_SLOT) == 3 * 131 + 7
    seeds = {fit.fit_seed(s, layer, slot) for s in range(3) for layer in range(40)
             for slot in (0, 1, 2, fit.O_PROJ_SLOT, fit.DISTILL_SLOT)}
    assert len(seeds) == 3 * 40 * 5


def test_a_unit_is_saved_once_and_read_back_once(tmp_path, capsys, monkeypatch):
    """The Store reads each checkpoint of a unit once (the checks before a fit and the fit share
    the read); a damaged one is a miss, removed, and the unit is fitted again."""
    from galinear.compress import MethodSpec
    from galinear.compress.storage.store import Store
    from galinear.testing.compression import tiny_config

    store = Store(tiny_config(tmp_path, targets=("q_proj", "k_proj")), "0123456789abcdef")
    spec = MethodSpec("lr1")
    assert store.unit_records(spec, 0, (), 1) is None and not store.unit_done(spec, 0, (), 1)
    records = {p: {"state": torch.nn.Linear(2, 2).state_dict(), "stats": {"calls": 1}} for p in ("q_proj", "k_proj")}
    store.save_unit(spec, 0, (), 1, records)
    paths = [store.unit_path(spec, 0, (), 1, p) for p in ("q_proj", "k_proj")]
    assert all(p.endswith(".safetensors") and os.path.exists(p) for p in paths)
    reads = []
    real = fit.load
    monkeypatch.setattr(fit, "load", lambda path, **kw: reads.append(path) or real(path, **kw))
    fresh = Store(store.config, store.key)
    assert fresh.unit_done(spec, 0, (), 1)
    back = fresh.unit_records(spec, 0, (), 1, ("q_proj",))
    assert fresh.unit_records(spec, 0, (), 1) is not None
    assert sorted(reads) == sorted(paths)  # two checks and a read: each file once
    assert torch.equal(back["q_proj"]["state"]["weight"], records["q_proj"]["state"]["weight"])
    with open(paths[1], "wb") as f:  # a damaged file: a miss, removed
        f.write(b"not a state file")
    assert Store(store.config, store.key).unit_records(spec, 0, (), 1) is None and not os.path.exists(paths[1])
    assert "recomputing" in capsys.readouterr().err
    assert fit.cached(str(tmp_path / "c.safetensors"), lambda: {"x": torch.ones(1)})["x"].item() == 1.0
    assert fit.cached(str(tmp_path / "c.safetensors"), lambda: pytest.fail("computed again"))["x"].item() == 1.0
