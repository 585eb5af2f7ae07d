"""How learned rotations follow their loss (galinear.quantize.optimise): the line-search descent never
raises the loss it follows, converges on a smooth problem, stops where no trial helps, resumes bit
for bit, and is refused where it cannot run; distillation with it follows every calibration window."""
import copy
import math

import pytest
import torch

from galinear.quantize import calibrate, optimise
from galinear.quantize.config import QuantizeConfig
from galinear.quantize.pipeline import prepare
from galinear.quantize.rotations import Rotation
from galinear.testing.models import tiny_llama

SETTINGS = {"objective": "fit"}


def _target(family="rotor", width=32, chunk=16, seed=5, scale=0.2):
    """A matrix of the family at random parameters, so that the fit can reach it exactly."""
    rotation = Rotation(family, width, seed=0, chunk=chunk, dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in rotation.parameters():
            if p.requires_grad:
                p.copy_(scale * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return rotation.matrix().detach()


def _fit(family="rotor"):
    target = _target(family)
    rotation = Rotation(family, 32, seed=0, chunk=16, dtype=torch.float64)
    return rotation, lambda: (rotation.matrix() - target).pow(2).sum()


@pytest.mark.parametrize("family", ["rotor", "butterfly", "cayley"])
def test_descent_never_raises_the_loss_and_converges_on_a_reachable_target(family):
    rotation, loss = _fit(family)
    first = float(loss().detach())
    result = optimise.descend(rotation, loss, SETTINGS, steps=200, lr=0.01)
    history = result["history"]
    assert all(b < a for a, b in zip(history, history[1:]))  # every step taken lowered the loss
    last = float(loss().detach())
    assert last < 1e-6 * first, (family, first, last)
    assert len(result["line_search"]["trials"]) == result["steps"] == len(history)


def test_adam_on_the_same_problem_moves_every_parameter_by_about_the_rate():
    """The contrast the descent answers: Adam's first step moves each parameter by its rate whatever the
    size of its gradient, including parameters whose gradient is almost nothing."""
    rotation, loss = _fit()
    params = [p for p in rotation.parameters() if p.requires_grad]
    optimise.adam(rotation, lambda step: loss(), SETTINGS, steps=1, lr=0.01)
    moved = torch.cat([p.detach().abs().flatten() for p in params])
    torch.testing.assert_close(moved, torch.full_like(moved, 0.01), rtol=1e-3, atol=1e-5)


def test_descent_stops_where_no_trial_lowers_the_loss():
    rotation = Rotation("rotor", 32, seed=0, chunk=16, dtype=torch.float64)
    params = [p for p in rotation.parameters() if p.requires_grad]
    # a loss with its minimum at the start: every trial along -g raises it once the rate is far too large
    loss = lambda: sum((p - 0.0).pow(2).sum() for p in params) + 1.0  # noqa: E731
    with torch.no_grad():
        params[0].view(-1)[0] = 1e-3
    result = optimise.descend(rotation, loss, SETTINGS, steps=10, lr=10.0, halvings=2)
    assert result["line_search"]["stopped"] and result["steps"] == 1 and result["line_search"]["trials"] == [3]
    assert float(params[0].detach().view(-1)[0]) == 1e-3  # it stayed where the step started
    with torch.no_grad():
        params[0].zero_()
    flat = optimise.descend(rotation, loss, SETTINGS, steps=10, lr=0.1)  # a zero gradient: nothing to follow
    assert flat["line_search"]["stopped"] and flat["line_search"]["trials"] == [0]


def test_descent_resumes_bit_for_bit(tmp_path):
    rotation, loss = _fit()
    whole = optimise.descend(rotation, loss, SETTINGS, steps=7, lr=0.01, checkpoint=str(tmp_path / "a.safetensors"),
                             checkpoint_every=2)
    path = str(tmp_path / "b.safetensors")
    interrupted, loss2 = _fit()
    first = optimise.descend(interrupted, loss2, SETTINGS, steps=7, lr=0.01, checkpoint=path, checkpoint_every=2,
                             stop_after=4)
    assert first["steps"] == 4
    again, loss3 = _fit()  # a new process: nothing kept but the file
    second = optimise.descend(again, loss3, SETTINGS, steps=7, lr=0.01, checkpoint=path, checkpoint_every=2)
    assert second["resumed_from"] == 4 and second["history"] == whole["history"]
    assert second["line_search"] == whole["line_search"]
    for a, b in zip(rotation.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="other settings"):
        optimise.descend(again, loss3, {"objective": "other"}, steps=7, lr=0.01, checkpoint=path)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_descent_refuses_a_rate_that_is_not_a_positive_number(bad):
    rotation, loss = _fit()
    with pytest.raises(ValueError, match="--lr must be a positive number"):
        optimise.descend(rotation, loss, SETTINGS, steps=2, lr=bad)


def _windows(count=3, length=10):
    generator = torch.Generator().manual_seed(4)
    return [torch.randint(0, 64, (length,), generator=generator) for _ in range(count)]


def test_distillation_by_descent_lowers_the_every_window_loss_and_resumes_bit_exact(tmp_path):
    base = tiny_llama(2)
    # (at 5 bits the tiny model's loss is smooth enough for five steps that each lower it)
    options = dict(wbits=5, abits=8, steps=5, lr=0.05, seed=2, tokens_per_step=8, checkpoint_every=2,
                   optimizer="descent")

    def fresh():
        model = copy.deepcopy(base)
        return model, prepare(model, "rotor", 0, chunk=16)

    model, straight = fresh()
    whole = calibrate.distill_rotation(model, straight, _windows(), checkpoint=str(tmp_path / "a.safetensors"),
                                       **options)
    history = whole["history"]
    assert len(history) == 5 and all(b < a for a, b in zip(history, history[1:]))
    assert whole["calibration_kl"]["kept"] == "trained"
    model, resumed = fresh()
    path = str(tmp_path / "b.safetensors")
    first = calibrate.distill_rotation(model, resumed, _windows(), checkpoint=path, stop_after=2, **options)
    assert "calibration_kl" not in first  # interrupted: nothing chosen yet
    model, again = fresh()
    second = calibrate.distill_rotation(model, again, _windows(), checkpoint=path, **options)
    assert second["resumed_from"] == 2 and second["history"] == history
    assert second["calibration_kl"] == whole["calibration_kl"]
    for a, b in zip(straight.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    # the same checkpoint is not taken for Adam's: the optimizer is one of its settings
    model, other = fresh()
    with pytest.raises(ValueError, match="other settings"):
        calibrate.distill_rotation(model, other, _windows(), checkpoint=path, **{**options, "optimizer": "adam"})


def test_an_unknown_optimizer_and_descent_without_distillation_are_refused():
    with pytest.raises(ValueError, match="--optimizer: unknown optimizer 'sgd'; choose adam or descent"):
        QuantizeConfig(optimizer="sgd").check()
    with pytest.raises(ValueError, match="--optimizer descent .* give --objective distill"):
        QuantizeConfig(optimizer="descent", objective="error").check()
    model = tiny_llama(2)
    with pytest.raises(ValueError, match="--optimizer: unknown optimizer"):
        calibrate.distill_rotation(model, prepare(model, "rotor", 0, chunk=16), _windows(), wbits=4,
                                   optimizer="lbfgs")
