"""Simulated (fake) quantizers: the half-step bound, idempotence, bit-width refusals, GPTQ against RTN."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from galinear.quantize.gptq import gptq_quantize, hessian_of, layer_error
from galinear.quantize.quantizers import (
    check_bits, fake_quantize, quantize_activation, quantize_heads, quantize_weight, search_clip_ratio, weight_grid,
)

matrices = arrays("float64", st.tuples(st.integers(1, 6), st.integers(1, 12)),
                  elements=st.floats(-100, 100, allow_nan=False, width=64))


@settings(max_examples=30, deadline=None)
@given(matrices, st.integers(2, 8), st.booleans())
def test_rtn_error_is_at_most_half_a_step(w, bits, symmetric):
    w = torch.as_tensor(w)
    scale, zero = weight_grid(w, bits, symmetric)
    q = quantize_weight(w, bits, symmetric)
    assert torch.all((q - w).abs() <= scale / 2 * (1 + 1e-9) + 1e-12)
    codes = q / scale + zero
    assert torch.allclose(codes, codes.round(), atol=1e-6)  # on the grid
    assert torch.all(codes.round() >= 0) and torch.all(codes.round() <= 2 ** bits - 1)


@settings(max_examples=30, deadline=None)
@given(matrices, st.integers(2, 8), st.booleans())
def test_quantizing_twice_changes_nothing(w, bits, symmetric):
    w = torch.as_tensor(w)
    scale, zero = weight_grid(w, bits, symmetric)
    once = fake_quantize(w, scale, zero, bits)
    assert torch.equal(fake_quantize(once, scale, zero, bits), once)


@pytest.mark.parametrize("bits", [1, 9, 2.5, True, "4"])
def test_weight_bits_out_of_range_are_refused(bits):
    with pytest.raises(ValueError, match=r"--wbits: weight bit width must be an integer in 2\.\.8.*give --wbits 4"):
        check_bits(bits)


def test_activation_bits_16_is_floating_point_and_17_is_refused():
    x = torch.randn(4, 8)
    assert quantize_activation(x, 16) is x
    with pytest.raises(ValueError, match=r"--abits.*2\.\.16"):
        quantize_activation(x, 17)


def test_activation_and_kv_quantizers_are_per_row_and_per_head():
    x = torch.randn(5, 16)
    x[0] *= 1000  # one loud token does not spoil the others' grids
    q = quantize_activation(x, 8)
    assert torch.allclose(q[1:], x[1:], atol=x[1:].abs().max() / 100)
    kv = torch.randn(3, 4 * 8)
    kv[:, :8] *= 1000  # one loud head
    assert (quantize_heads(kv, 8, head_dim=8)[:, 8:] - kv[:, 8:]).abs().max() < 0.05


def test_clip_search_clips_gaussian_tokens_at_low_bits():
    torch.manual_seed(0)
    x = torch.randn(256, 512)  # each token's largest entry is a rare tail value: clipping it pays
    assert search_clip_ratio(x, 3) < 1.0
    assert search_clip_ratio(x, 16) == 1.0


def test_gptq_beats_rtn_on_a_layers_output_error():
    torch.manual_seed(0)
    w = torch.randn(48, 96)
    mix = torch.randn(96, 96) / 10 + torch.eye(96)
    x = torch.randn(2048, 96) @ mix  # correlated inputs, as a layer sees them
    h = hessian_of(x)
    rtn = layer_error(quantize_weight(w, 3), w, h)
    for act_order in (False, True):
        assert layer_error(gptq_quantize(w, h, 3, act_order=act_order), w, h) < 0.8 * rtn
    with pytest.raises(ValueError, match="--damp"):
        gptq_quantize(w, h, 3, damp=2.0)
