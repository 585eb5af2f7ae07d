"""The optimiser loop (galinear.optim.loop): AdamW and Adam under the schedule against torch's
optimisers driven by hand, the mini-batch order, resumed runs with the same floats, and its hooks
(stop rule, step callback, loss number, non-finite loss)."""
import math

import pytest

torch = pytest.importorskip("torch")

from galinear._util import cosine_schedule
from galinear.optim import loop as optimise


def _problem(seed=0):
    """A regression on fixed data; ``seed`` initialises the module and the batch order."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    y = x @ torch.randn(6, 3, generator=g)
    torch.manual_seed(seed)
    module = torch.nn.Linear(6, 3)
    batches = optimise.Batches(48, 8, seed)

    def loss(step):
        idx = batches.next()
        return torch.nn.functional.mse_loss(module(x[idx]), y[idx])

    def validate():
        with torch.no_grad():
            return float(torch.nn.functional.mse_loss(module(x[48:]), y[48:]))

    return module, batches, loss, validate


def test_batches_cover_every_row_once_a_pass_and_resume():
    batches = optimise.Batches(10, 4, seed=3)
    first = [batches.next() for _ in range(3)]  # 4 + 4 + 2 rows: one pass
    assert sorted(torch.cat(first).tolist()) == list(range(10)) and len(first[-1]) == 2
    state = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in batches.state().items()}
    ahead = [batches.next() for _ in range(4)]
    again = optimise.Batches(10, 4, seed=99)
    again.restore(state)
    assert all(torch.equal(a, b) for a, b in zip(ahead, [again.next() for _ in range(4)]))


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-13)])
@pytest.mark.parametrize("name, grad_clip", [("adamw", 0.0), ("adamw", 0.05), ("adam", 0.0), ("adam", 0.05)])
def test_steps_match_torch_driven_by_hand_with_the_schedule(dtype, tol, name, grad_clip):
    torch.manual_seed(0)
    target = torch.randn(5, 3, dtype=dtype)
    ours = torch.nn.Parameter(torch.randn(5, 3, dtype=dtype))
    reference = torch.nn.Parameter(ours.detach().clone())
    optimizer = optimise.make_optimizer(name, [ours], 0.1, weight_decay=0.01, betas=(0.8, 0.9))
    scheduler = optimise.cosine_scheduler(optimizer, 7, 2)
    kind = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    by_hand = kind([reference], lr=0.1, weight_decay=0.01, betas=(0.8, 0.9))
    rates, states = [], []

    def keep(run):
        rates.append(run.lr_used)
        states.append(ours.detach().clone())

    run = optimise.train(optimizer, lambda step: ((ours - target) ** 2).sum(), steps=9, scheduler=scheduler,
                         grad_clip=grad_clip, clip_params=[ours], on_step=keep)
    assert run.step == 9 and len(states) == 9  # past the end of the schedule, where the rate stays 0
    for step in range(9):
        for group in by_hand.param_groups:
            group["lr"] = 0.1 * cosine_schedule(step, 7, 2)
        by_hand.zero_grad()
        ((reference - target) ** 2).sum().backward()
        if grad_clip:
            norm = reference.grad.norm()
            reference.grad.mul_(min(1.0, grad_clip / (float(norm) + 1e-6)))
        by_hand.step()
        assert torch.allclose(states[step], reference, atol=tol, rtol=0), step
    # warm-up (step + 1) / 2 for two steps, then a cosine from 1 to 0 over five, held at 0
    expected = [0.05, 0.1] + [0.05 * (1 + math.cos(math.pi * t / 5)) for t in range(5)] + [0.0, 0.0]
    assert rates == pytest.approx(expected, abs=1e-12)


def test_the_schedule_state_resumes():
    parameter = torch.nn.Parameter(torch.ones(2))
    optimizer = optimise.make_optimizer("adamw", [parameter], 1.0)
    scheduler = optimise.cosine_scheduler(optimizer, 10)
    optimise.train(optimizer, lambda step: parameter.sum(), steps=4, scheduler=scheduler)
    again = optimise.make_optimizer("adamw", [torch.nn.Parameter(parameter.detach().clone())], 1.0)
    again_scheduler = optimise.cosine_scheduler(again, 10)
    again.load_state_dict(optimizer.state_dict())
    again_scheduler.load_state_dict(scheduler.state_dict())
    assert again.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"] == pytest.approx(cosine_schedule(4, 10))


def test_a_run_restored_by_its_caller_goes_on_from_start_with_the_same_floats():
    """A caller with its own checkpoint (optimiser and schedule states) passes the steps taken."""
    def setup(seed):
        module, batches, loss, _ = _problem(seed)
        optimizer = optimise.make_optimizer("adamw", module.parameters(), 0.05, betas=(0.9, 0.95))
        return module, batches, loss, optimizer, optimise.cosine_scheduler(optimizer, 12, 3)

    def go(module, loss, optimizer, scheduler, steps, seen, start=0):
        return optimise.train(optimizer, loss, steps=steps, scheduler=scheduler, start=start, grad_clip=0.5,
                              clip_params=list(module.parameters()), on_step=lambda run: seen.append(run.step))

    module, _, loss, optimizer, scheduler = setup(0)
    straight = go(module, loss, optimizer, scheduler, 12, [])
    reference = {k: v.clone() for k, v in module.state_dict().items()}

    module, batches, loss, optimizer, scheduler = setup(0)
    seen = []
    go(module, loss, optimizer, scheduler, 5, seen)
    saved = {"module": {k: v.clone() for k, v in module.state_dict().items()}, "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(),
             "batches": {k: (v.clone() if hasattr(v, "clone") else v) for k, v in batches.state().items()}}
    module, batches, loss, optimizer, scheduler = setup(5)  # other initial values and order: all from the state
    module.load_state_dict(saved["module"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    batches.restore(saved["batches"])
    run = go(module, loss, optimizer, scheduler, 12, seen, start=5)
    assert seen == list(range(1, 13)) and run.step == 12 and len(run.recent) == 7
    assert run.recent == straight.recent[-7:]
    assert all(torch.equal(v, reference[k]) for k, v in module.state_dict().items())


def test_a_resumed_run_ends_with_the_same_floats():
    settings = dict(steps=40, eval_every=5)

    def train(module, loss, validate, **extra):
        return optimise.train(optimise.make_optimizer("adam", module.parameters(), 0.05), loss, modules={"m": module},
                              validate=validate, plateau=optimise.Plateau(patience=2), **settings, **extra)

    module, _, loss, validate = _problem()
    ref = train(module, loss, validate)
    reference = {k: v.clone() for k, v in module.state_dict().items()}

    module, batches, loss, validate = _problem()
    saved = {}

    def stop_at_15(run):
        if run.step == 15:
            saved.update(run.state(), modules={k: v.clone() for k, v in module.state_dict().items()},
                         batches=batches.state())
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(module, loss, validate, on_check=stop_at_15)
    module, batches, loss, validate = _problem(seed=5)  # other initial values and order: all from the state
    module.load_state_dict(saved["modules"])
    batches.restore(saved["batches"])
    run = train(module, loss, validate, resume=saved)
    assert run.curve == ref.curve and run.step == ref.step and run.plateau.best_step == ref.plateau.best_step
    assert all(torch.equal(v, reference[k]) for k, v in module.state_dict().items())
    assert min(v for _, v in run.curve) == run.plateau.best and run.curve[0][0] == 0


def test_fixed_steps_follow_the_cosine_schedule_and_end_in_eval_mode():
    module, _, loss, _ = _problem()
    optimizer = optimise.make_optimizer("adam", module.parameters(), 0.1)
    run = optimise.train(optimizer, loss, steps=4, scheduler=optimise.cosine_scheduler(optimizer, 4),
                         modules={"m": module})
    assert run.step == 4 and run.lr_used == pytest.approx(0.1 * (1 + math.cos(math.pi * 3 / 4)) / 2)
    assert not module.training and run.stopped == "max_steps" and run.curve == []
    with pytest.raises(ValueError, match="'adam' or 'adamw'"):
        optimise.make_optimizer("sgd", module.parameters(), 0.1)


def test_the_stop_rule_ends_the_run_before_a_step():
    module, _, loss, _ = _problem()
    calls = []

    def counted(step):
        calls.append(step)
        return loss(step)

    run = optimise.train(optimise.make_optimizer("adam", module.parameters(), 0.1), counted, steps=10,
                         stop=lambda run: run.step >= 3)
    assert run.step == 3 and calls == [1, 2, 3] and len(run.recent) == 3
    again = optimise.train(optimise.make_optimizer("adam", module.parameters(), 0.1), counted, steps=10,
                           stop=lambda run: True)
    assert again.step == 0 and calls == [1, 2, 3] and math.isnan(again.final_loss)


def test_the_loss_number_and_a_non_finite_loss():
    module, _, loss, _ = _problem()
    optimizer = optimise.make_optimizer("adam", module.parameters(), 0.1)
    run = optimise.train(optimizer, loss, steps=3, loss_value=lambda value: 2.0 * value.item())
    doubled = list(run.recent)
    module, _, loss, _ = _problem()
    plain = optimise.train(optimise.make_optimizer("adam", module.parameters(), 0.1), loss, steps=3)
    assert doubled == [2.0 * v for v in plain.recent] and all(v > 0 for v in doubled)

    with pytest.raises(FloatingPointError, match="non-finite thing at step 1"):
        optimise.train(optimizer, lambda step: loss(step) * float("nan"), steps=4,
                       nonfinite="non-finite thing at step {step}")
    told = []

    def message(step, value):
        told.append((step, value))
        return f"loss {value} at step {step}"

    numbers = iter([0.5, math.inf, 0.25])  # what a distributed run averages over its ranks, say
    with pytest.raises(FloatingPointError, match="loss inf at step 2"):
        optimise.train(optimizer, loss, steps=3, nonfinite=message, loss_value=lambda value: next(numbers))
    assert told == [(2, math.inf)]
