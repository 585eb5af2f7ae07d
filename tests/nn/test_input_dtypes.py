"""Rotor layers return the input's dtype (computed in the layer's float32), pass gradients back in
it, and accept numpy integer widths."""
import numpy as np
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_rotor_layers_return_the_input_dtype_at_every_batch_size(dtype, grad):
    """RotorLinear(512, 512) in eval with a bfloat16 input returned float32 for 1 token, raised for 8
    and returned float32 for 64. Now: the input's dtype, computed in the layer's float32."""
    from galinear.nn import RotorLinear, RotorNetwork

    torch.manual_seed(0)
    layers = [RotorLinear(512, 512).eval(), RotorLinear(48, 40).eval(), RotorNetwork(32, 24, hidden=16).eval()]
    for layer in layers:
        for tokens in (1, 8, 64, 300):
            x = torch.randn(tokens, layer.in_features).to(dtype)
            with torch.set_grad_enabled(grad):
                y = layer(x)
                want = layer(x.float())  # the float32 computation the rule promises, cast back
            assert y.dtype == dtype and y.shape == (tokens, layer.out_features)
            # one unit in the last place of the narrow dtype: float32 sums may differ in their last
            # bit between calls (threaded reductions), which can move the rounding by one step
            eps = torch.finfo(dtype).eps
            torch.testing.assert_close(y, want.to(dtype), rtol=eps, atol=eps)
    dense = layers[1].dense_weight().double()  # an independent reference: the dense matrix in float64
    x = torch.randn(8, 48, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(layers[1](x.to(dtype)).double(), x.to(dtype).double() @ dense.T,
                                   **({"rtol": 2e-2, "atol": 2e-2} if dtype != torch.float64 else
                                      {"rtol": 1e-5, "atol": 1e-5}))


def test_gradients_flow_back_in_the_input_dtype():
    from galinear.nn import RotorNetwork

    net = RotorNetwork(32, 32, hidden=16)
    x = torch.randn(4, 32, dtype=torch.bfloat16, requires_grad=True)
    net(x).float().square().sum().backward()
    assert x.grad.dtype == torch.bfloat16 and torch.isfinite(x.grad.float()).all()
    assert net.input_gadget.left_bivectors.grad is not None


def test_numpy_integer_widths_are_accepted():
    """`np.int64(8)` widths were refused ("must be a positive integer, got np.int64(8)")."""
    from galinear.nn import RotorLinear, RotorNetwork

    torch.manual_seed(1)
    a = RotorLinear(np.int64(16), np.int32(8), chunk_size=np.int64(8))
    torch.manual_seed(1)
    b = RotorLinear(16, 8, chunk_size=8)
    assert type(a.in_features) is int and a.extra_repr() == b.extra_repr()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    net = RotorNetwork(np.int64(8), np.uint8(8), hidden=np.int64(8), hidden_layers=np.int64(1), breadth=np.int16(2))
    assert (net.hidden, net.hidden_layers, net.breadth) == (8, 1, 2) and net(torch.randn(2, 8)).shape == (2, 8)
    for bad in (True, 8.0, np.float64(8), "8", 0, np.int64(-2)):
        with pytest.raises(ValueError, match="in_features must be a positive integer"):
            RotorLinear(bad, 8)
