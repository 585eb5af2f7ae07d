"""The train commands' optimiser (galinear.train.optim) against torch's AdamW driven by hand."""
import math

import pytest
import torch

from galinear._util import cosine_schedule
from galinear.train.optim import cosine_adamw, optimiser_step


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-13)])
@pytest.mark.parametrize("grad_clip", [0.0, 0.05])
def test_steps_match_adamw_with_the_schedule_set_by_hand(dtype, tol, grad_clip):
    torch.manual_seed(0)
    target = torch.randn(5, 3, dtype=dtype)
    ours = torch.nn.Parameter(torch.randn(5, 3, dtype=dtype))
    reference = torch.nn.Parameter(ours.detach().clone())
    optimizer, scheduler = cosine_adamw([ours], 0.1, 7, 2, weight_decay=0.01, betas=(0.8, 0.9))
    by_hand = torch.optim.AdamW([reference], lr=0.1, weight_decay=0.01, betas=(0.8, 0.9))
    rates = []
    for step in range(9):  # past the end of the schedule, where the rate stays 0
        rates.append(optimizer.param_groups[0]["lr"])
        optimiser_step(((ours - target) ** 2).sum(), optimizer, scheduler, [ours], grad_clip)
        for group in by_hand.param_groups:
            group["lr"] = 0.1 * cosine_schedule(step, 7, 2)
        by_hand.zero_grad()
        ((reference - target) ** 2).sum().backward()
        if grad_clip:
            norm = reference.grad.norm()
            reference.grad.mul_(min(1.0, grad_clip / (float(norm) + 1e-6)))
        by_hand.step()
        assert torch.allclose(ours, reference, atol=tol, rtol=0), step
    # warm-up (step + 1) / 2 for two steps, then a cosine from 1 to 0 over five, held at 0
    expected = [0.05, 0.1] + [0.05 * (1 + math.cos(math.pi * t / 5)) for t in range(5)] + [0.0, 0.0]
    assert rates == pytest.approx(expected, abs=1e-12)


def test_the_schedule_state_resumes():
    parameter = torch.nn.Parameter(torch.ones(2))
    optimizer, scheduler = cosine_adamw([parameter], 1.0, 10, 0)
    for _ in range(4):
        optimiser_step(parameter.sum(), optimizer, scheduler)
    again, again_scheduler = cosine_adamw([torch.nn.Parameter(parameter.detach().clone())], 1.0, 10, 0)
    again.load_state_dict(optimizer.state_dict())
    again_scheduler.load_state_dict(scheduler.state_dict())
    assert again.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"] == pytest.approx(cosine_schedule(4, 10))
