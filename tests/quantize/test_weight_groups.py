"""Weight groups (``--group-size``): one grid per run of G input columns of each output channel, for
round-to-nearest, GPTQ and the distillation's straight-through weights, checked against per-channel
quantization of each run cut out on its own."""
import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from galinear.quantize import calibrate
from galinear.quantize.config import QuantizeConfig
from galinear.quantize.gptq import gptq_quantize, hessian_of, layer_error
from galinear.quantize.pipeline import quantize_model
from galinear.quantize.quantizers import check_group_size, quantize_weight, weight_grid
from galinear.testing.models import tiny_llama

matrices = arrays("float64", st.tuples(st.integers(1, 6), st.integers(1, 20)),
                  elements=st.floats(-100, 100, allow_nan=False, width=64))


@settings(max_examples=40, deadline=None)
@given(matrices, st.integers(2, 8), st.booleans(), st.integers(2, 9))
def test_each_run_is_quantized_as_a_channel_of_its_own(w, bits, symmetric, group):
    w = torch.as_tensor(w)
    q = quantize_weight(w, bits, symmetric, group_size=group)
    for start in range(0, w.shape[1], group):  # the last run may be shorter
        run = w[:, start:start + group]
        assert torch.equal(q[:, start:start + group], quantize_weight(run, bits, symmetric))
    scale, zero = weight_grid(w, bits, symmetric, group)
    assert scale.shape == zero.shape == w.shape
    assert torch.all((q - w).abs() <= scale / 2 * (1 + 1e-9) + 1e-12)  # half a step of the run's grid


@pytest.mark.parametrize("symmetric", [True, False])
def test_one_group_as_wide_as_the_row_is_one_grid_per_channel(symmetric):
    w = torch.randn(7, 24, dtype=torch.float64)
    assert torch.equal(quantize_weight(w, 3, symmetric, group_size=24), quantize_weight(w, 3, symmetric))
    assert torch.equal(quantize_weight(w, 3, symmetric, group_size=100), quantize_weight(w, 3, symmetric))
    torch.manual_seed(0)
    h = hessian_of(torch.randn(256, 24, dtype=torch.float64))
    for act_order in (False, True):
        assert torch.equal(gptq_quantize(w, h, 3, symmetric, act_order=act_order, group_size=24),
                           gptq_quantize(w, h, 3, symmetric, act_order=act_order))


@pytest.mark.parametrize("act_order", [False, True])
def test_gptq_groups_stay_on_their_grids_and_beat_rtn_groups_and_channels(act_order):
    torch.manual_seed(0)
    w = torch.randn(48, 96, dtype=torch.float64)
    w[:, 5] *= 20  # an outlier column: its group's grid is coarse, the others' are not
    mix = torch.randn(96, 96, dtype=torch.float64) / 10 + torch.eye(96, dtype=torch.float64)
    h = hessian_of(torch.randn(2048, 96, dtype=torch.float64) @ mix)
    q = gptq_quantize(w, h, 2, act_order=act_order, group_size=32)
    scale, zero = weight_grid(w, 2, True, 32)  # set on the original weights, in column order
    codes = q / scale + zero
    assert torch.allclose(codes, codes.round(), atol=1e-6)
    assert torch.all(codes.round() >= 0) and torch.all(codes.round() <= 3)
    rtn_groups = layer_error(quantize_weight(w, 2, group_size=32), w, h)
    assert layer_error(q, w, h) < 0.8 * rtn_groups
    assert rtn_groups < layer_error(quantize_weight(w, 2), w, h)  # the outlier spoils one group, not every row


def test_straight_through_weights_pass_gradients_with_groups():
    w = torch.randn(4, 10, dtype=torch.float64, requires_grad=True)
    q = quantize_weight(w, 4, straight_through=True, group_size=4)
    assert torch.equal(q.detach(), quantize_weight(w.detach(), 4, group_size=4))
    q.pow(2).sum().backward()
    assert w.grad is not None and torch.isfinite(w.grad).all() and w.grad.abs().sum() > 0


@pytest.mark.parametrize("group", [0, 1, -64, 2.5, True, "64"])
def test_a_bad_group_size_names_the_option(group):
    with pytest.raises(ValueError, match=r"--group-size: a weight group is an integer number >= 2 of input columns, "
                                         r"got .*; give --group-size 64 or 128"):
        check_group_size(group)
    with pytest.raises(ValueError, match="--group-size"):
        QuantizeConfig(group_size=group).check()


def test_the_error_objective_refuses_groups():
    with pytest.raises(ValueError, match=r"--objective error takes one grid per output channel; give --objective "
                                         r"distill with --group-size"):
        QuantizeConfig(group_size=64, objective="error").check()


def test_a_grouped_model_and_its_calibration_checkpoint(tmp_path):
    """The whole pipeline with groups: every decoder matrix on its group grids, the learned rotation's
    checkpoint named and keyed by the group size (a per-channel checkpoint is never resumed as grouped)."""
    original = tiny_llama(2)
    generator = torch.Generator().manual_seed(0)
    calib = [torch.randint(0, 64, (32,), generator=generator) for _ in range(3)]
    results = {}
    for group in (None, 16):
        model = copy.deepcopy(original)
        config = QuantizeConfig(wbits=3, method="rtn", steps=1, tokens_per_step=16, group_size=group,
                                out_dir=str(tmp_path))
        results[group] = quantize_model(model, config, "rotor", seed=0, calib=calib)
        weight = calibrate.models.projection(model, 0, "q_proj").weight.detach()
        runs = weight.reshape(weight.shape[0], -1, group or weight.shape[1])
        distinct = [[len(torch.unique(run)) for run in row] for row in runs]
        assert max(max(row) for row in distinct) <= 2 ** 3  # every run on one 3-bit grid
        if group:  # and the runs of a row on grids of their own
            assert max(len(torch.unique(row)) for row in weight) > 2 ** 3
    names = sorted(p.name for p in (tmp_path / "calibration").iterdir())
    assert names == ["rotor-distill-w3a16-s0.safetensors", "rotor-distill-w3g16a16-s0.safetensors"]
    assert results[16]["training"]["history"] != results[None]["training"]["history"]


def test_gptq_on_fewer_tokens_than_a_layer_is_wide_warns_with_the_fix():
    """GPTQ's Hessians from fewer tokens than the widest input are singular: a warning naming the
    count and the option, and none once the calibration covers the width."""
    import warnings

    model = tiny_llama(2)  # widest input: the MLP's intermediate width
    widest = max(p.weight.shape[1] for p in model.modules() if isinstance(p, torch.nn.Linear))
    generator = torch.Generator().manual_seed(0)
    few = [torch.randint(0, 64, (16,), generator=generator) for _ in range(2)]
    with pytest.warns(UserWarning, match=rf"GPTQ calibrates on 32 tokens, fewer than the widest layer input "
                                         rf"\({widest}\).*give --calib-windows \d+ or more"):
        calibrate.quantize_weights(copy.deepcopy(model), 4, "gptq", windows=few)
    enough = [torch.randint(0, 64, (widest,), generator=generator)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calibrate.quantize_weights(copy.deepcopy(model), 4, "gptq", windows=enough)
