"""The one Adam loop of the compression fits, the seed rule and the checkpointed unit."""
import math
import os

import pytest

torch = pytest.importorskip("torch")

from galinear.compress import adam, fit  # noqa: E402


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


def test_a_unit_is_fitted_once_and_read_back(tmp_path, capsys):
    paths = {"a": str(tmp_path / "a.pt"), "b": str(tmp_path / "b.pt")}
    calls = []

    def modules():
        torch.manual_seed(0)
        return {"a": torch.nn.Linear(2, 2), "b": torch.nn.Linear(2, 1)}

    def fit_all(mods):
        calls.append(1)
        for m in mods.values():
            with torch.no_grad():
                m.weight.fill_(len(calls))
        return {k: {"state": m.state_dict(), "stats": {"calls": len(calls)}} for k, m in mods.items()}

    first = fit.fit_unit(paths, modules(), fit_all)
    again = modules()
    second = fit.fit_unit(paths, again, fit_all)
    assert len(calls) == 1 and second["b"]["stats"] == {"calls": 1}
    assert torch.equal(again["a"].weight, torch.ones(2, 2)) and first["a"]["stats"] == {"calls": 1}
    with open(paths["b"], "wb") as f:  # a damaged file: the whole unit is fitted again
        f.write(b"not a state file")
    third = fit.fit_unit(paths, modules(), fit_all)
    assert len(calls) == 2 and third["a"]["stats"] == {"calls": 2} and os.path.exists(paths["b"])
    assert "recomputing" in capsys.readouterr().err
    assert fit.cached(str(tmp_path / "c.pt"), lambda: {"x": torch.ones(1)})["x"].item() == 1.0
    assert fit.cached(str(tmp_path / "c.pt"), lambda: pytest.fail("computed again"))["x"].item() == 1.0
