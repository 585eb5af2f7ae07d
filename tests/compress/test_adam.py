"""The one Adam loop of the compression fits, the seed rule and the checkpointed unit."""
import math
import os

import pytest

torch = pytest.importorskip("torch")

from galinear.compress.fitting import adam, fit


def test_fit_seed_is_the_documented_rule_and_keeps_units_apart():
    assert fit.fit_seed(0) == 0
    assert fit.fit_seed(2, 15, 1) == 2 * 1_000_003 + 15 * 131 + 1
    assert fit.fit_seed(1, 0, fit.DISTILL_SLOT) == 1_000_003 + 17
    assert fit.fit_seed(0, 3, fit.O_PROJ_SLOT) == 3 * 131 + 7
    seeds = {fit.fit_seed(s, layer, slot) for s in range(3) for layer in range(40)
             for slot in (0, 1, 2, fit.O_PROJ_SLOT, fit.DISTILL_SLOT)}
    assert len(seeds) == 3 * 40 * 5


def test_batches_cover_every_row_once_a_pass_and_resume():
    batches = adam.Batches(10, 4, seed=3)
    first = [batches.next() for _ in range(3)]  # 4 + 4 + 2 rows: one pass
    assert sorted(torch.cat(first).tolist()) == list(range(10)) and len(first[-1]) == 2
    state = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in batches.state().items()}
    ahead = [batches.next() for _ in range(4)]
    again = adam.Batches(10, 4, seed=99)
    again.restore(state)
    assert all(torch.equal(a, b) for a, b in zip(ahead, [again.next() for _ in range(4)]))


def _problem(seed=0):
    """A regression on fixed data; ``seed`` initialises the module and the batch order."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    y = x @ torch.randn(6, 3, generator=g)
    torch.manual_seed(seed)
    module = torch.nn.Linear(6, 3)
    batches = adam.Batches(48, 8, seed)

    def loss(step):
        idx = batches.next()
        return torch.nn.functional.mse_loss(module(x[idx]), y[idx])

    def validate():
        with torch.no_grad():
            return float(torch.nn.functional.mse_loss(module(x[48:]), y[48:]))

    return module, batches, loss, validate


def test_a_resumed_run_ends_with_the_same_floats():
    settings = dict(lr=0.05, steps=40, eval_every=5)
    module, _, loss, validate = _problem()
    ref = adam.train(list(module.parameters()), loss, modules={"m": module}, validate=validate,
                     plateau=adam.Plateau(patience=2), **settings)
    reference = {k: v.clone() for k, v in module.state_dict().items()}

    module, batches, loss, validate = _problem()
    saved = {}

    def stop_at_15(run):
        if run.step == 15:
            saved.update(run.state(), modules={k: v.clone() for k, v in module.state_dict().items()},
                         batches=batches.state())
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        adam.train(list(module.parameters()), loss, modules={"m": module}, validate=validate,
                   plateau=adam.Plateau(patience=2), on_check=stop_at_15, **settings)
    module, batches, loss, validate = _problem(seed=5)  # other initial values and order: all from the state
    module.load_state_dict(saved["modules"])
    batches.restore(saved["batches"])
    run = adam.train(list(module.parameters()), loss, modules={"m": module}, validate=validate,
                     plateau=adam.Plateau(patience=2), resume=saved, **settings)
    assert run.curve == ref.curve and run.step == ref.step and run.plateau.best_step == ref.plateau.best_step
    assert all(torch.equal(v, reference[k]) for k, v in module.state_dict().items())


def test_fixed_steps_follow_the_cosine_schedule_and_a_bad_loss_is_named():
    module, _, loss, _ = _problem()
    run = adam.train(list(module.parameters()), loss, lr=0.1, steps=4, modules={"m": module}, cosine=True)
    assert run.step == 4 and run.lr_used == pytest.approx(0.1 * (1 + math.cos(math.pi * 3 / 4)) / 2) and not module.training
    with pytest.raises(FloatingPointError, match="non-finite thing at step 1"):
        adam.train(list(module.parameters()), lambda step: loss(step) * float("nan"), lr=0.1, steps=4,
                   modules={"m": module}, nonfinite="non-finite thing at step {step}")
    with pytest.raises(ValueError, match="adam"):
        adam.train(list(module.parameters()), loss, lr=0.1, steps=4, modules={"m": module}, optimizer="sgd")


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
    real = fit.load
    monkeypatch.setattr(fit, "load", lambda path, **kw: reads.append(path) or real(path, **kw))
    back = Store(store.config, store.key).saved_unit(spec, 0, (), 1)
    assert sorted(reads) == sorted(paths) and set(back) == {"q_proj", "k_proj"}  # each file once
    assert torch.equal(back["q_proj"]["state"]["weight"], records["q_proj"]["state"]["weight"])
    with open(paths[1], "wb") as f:  # a damaged file: a miss, removed
        f.write(b"not a state file")
    fresh = Store(store.config, store.key)
    assert set(fresh.saved_unit(spec, 0, (), 1)) == {"q_proj"} and not os.path.exists(paths[1])
    assert not fresh.unit_done(spec, 0, (), 1)
    assert "recomputing" in capsys.readouterr().err
    assert fit.cached(str(tmp_path / "c.safetensors"), lambda: {"x": torch.ones(1)})["x"].item() == 1.0
    assert fit.cached(str(tmp_path / "c.safetensors"), lambda: pytest.fail("computed again"))["x"].item() == 1.0


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
    real = fit.load
    monkeypatch.setattr(fit, "load", lambda path, **kw: reads.append(path) or real(path, **kw))
    first = study.fit_layer_set(spec, 0, (0, 2))
    assert sorted(r for r in reads if r in units) == sorted(units)  # missing: each looked for once
    reads.clear()
    captured = []
    monkeypatch.setattr(type(study.captures), "pair", lambda *a, **k: captured.append(a) or pytest.fail("captured"))
    again = study.fit_layer_set(spec, 0, (0, 2))
    assert sorted(r for r in reads if r in units) == sorted(units) and not captured  # on disk: each read once
    for key, module in first["replacements"].items():
        for name, value in module.state_dict().items():
            assert torch.equal(value, again["replacements"][key].state_dict()[name])
