"""RotorNetwork's permutations are checked wherever they can enter (load_state_dict, an in-place
change before a call), and every valid permutation gives the same outputs on every path."""
import pytest
import torch


@pytest.mark.parametrize("bad, message", [
    (torch.full((16,), 10 ** 6), "holds 1000000, outside 0..15"),
    (torch.full((16,), -1), "holds -1, outside"),
    (torch.zeros(16, dtype=torch.long), "repeats an index"),
    (torch.arange(16.0), "must be an integer tensor"),
    (torch.arange(8), r"must have shape \(16,\)"),
])
def test_state_dict_permutations_are_checked_before_they_are_installed(bad, message):
    from galinear.nn import RotorNetwork

    net = RotorNetwork(32, 32, hidden=16).eval()
    before = net.input_permutation.clone()
    state = {**net.state_dict(), "input_permutation": bad}
    with pytest.raises(ValueError, match="input_permutation.*" + message):
        net.load_state_dict(state)
    assert torch.equal(net.input_permutation, before)
    hidden = {**net.state_dict(), "hidden_permutations": net.hidden_permutations.flip(0).clone()}
    hidden["hidden_permutations"][1, 2, 0] = hidden["hidden_permutations"][1, 2, 1]
    with pytest.raises(ValueError, match=r"hidden_permutations \(row 5\) is not a permutation.*repeats"):
        net.load_state_dict(hidden)


def test_a_permutation_changed_in_place_is_refused_at_the_next_call():
    from galinear.nn import RotorNetwork

    net = RotorNetwork(32, 32, hidden=16)
    x = torch.randn(3, 32)
    for mode in ("train", "eval"):
        getattr(net, mode)()
        with torch.no_grad():
            net.input_permutation.zero_()
            with pytest.raises(ValueError, match="input_permutation is not a permutation.*repeats an index"):
                net(x)
            net.input_permutation.copy_(torch.randperm(16))


def test_reversed_and_other_permutations_install_and_every_path_agrees():
    """A valid permutation (reversed, say) is accepted; the compiled decoding path, the fused matrices
    and the autograd path (independent implementations of the permutation) agree on it."""
    from galinear.nn import RotorNetwork

    torch.manual_seed(0)
    net = RotorNetwork(32, 32, hidden=16, dtype=torch.float64).eval()
    state = net.state_dict()
    state["input_permutation"] = torch.arange(15, -1, -1)
    state["hidden_permutations"] = torch.stack([torch.randperm(16) for _ in range(6)]).reshape(2, 3, 16)
    net.load_state_dict(state)
    x = torch.randn(5, 32, dtype=torch.float64)
    with torch.no_grad():
        decoded = net(x)                  # compiled kernel (5 rows <= the inference batch)
        fused = net._fused_forward(x)     # assembled matrices, permutations folded into rows
    reference = net(x.requires_grad_())   # per-block autograd path, permutation by indexing
    torch.testing.assert_close(decoded, reference.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fused, reference.detach(), rtol=1e-12, atol=1e-12)


def test_permutation_check_accepts_exactly_the_permutations():
    from hypothesis import given, settings, strategies as st

    from galinear.nn.network import check_permutations

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.integers(-3, 9), min_size=1, max_size=8))
    def check(values):
        tensor = torch.tensor(values)
        is_permutation = sorted(values) == list(range(len(values)))
        try:
            check_permutations("p", tensor, (len(values),))
            accepted = True
        except ValueError:
            accepted = False
        assert accepted == is_permutation

    check()
