"""The numba kernels of a RotorNetwork stage's branch sum (galinear.rotor_kernels.branches) against a
float64 torch autograd reference, and their thread-count independence."""
import numpy as np
import pytest
import torch

from galinear import _numba
from galinear.rotor_kernels import branches

EPS = 1e-5
SLOPE = 0.3


def _case(S, T, B, Kp, H, dtype, seed=0):
    """y, scale, slot, weights, output gradient; slot sends k to (7 k + 3) mod H, then a random
    permutation per branch: with S Kp > H several coordinates share a slot, with S Kp < H some
    slots receive none. Token 0 is zero (normalised values exactly 0)."""
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((S, T, B, Kp)).astype(dtype)
    y[:, 0] = 0.0
    scale = (rng.random((B, S * Kp)) + 0.5).astype(dtype)
    dest = (np.arange(S * Kp) * 7 + 3) % H
    slot = np.stack([rng.permutation(H)[dest] for _ in range(B)]).astype(np.int64)
    weights = (rng.random(B) + 0.5).astype(dtype)
    grad = rng.standard_normal((T, H)).astype(dtype)
    return y, scale, slot, weights, grad


def _reference(y, scale, slot, weights, grad, H):
    """(out, grad_y, grad_scale, grad_weights, grad_slope) in float64 torch autograd, the
    placement a scatter-add of every branch's coordinates."""
    S, T, B, Kp = y.shape
    K = S * Kp
    y64 = torch.tensor(y, dtype=torch.float64, requires_grad=True)
    s64 = torch.tensor(scale, dtype=torch.float64, requires_grad=True)
    w64 = torch.tensor(weights, dtype=torch.float64, requires_grad=True)
    a64 = torch.tensor([SLOPE], dtype=torch.float64, requires_grad=True)
    coords = y64.permute(1, 2, 0, 3).reshape(T, B, K) * s64                      # (T, B, K)
    index = torch.as_tensor(slot).unsqueeze(0).expand(T, B, K)
    hidden = coords.new_zeros(T, B, H).scatter_add(2, index, coords)
    mean = hidden.mean(-1, keepdim=True)
    variance = ((hidden - mean) ** 2).mean(-1, keepdim=True)
    normed = (hidden - mean) / torch.sqrt(variance + EPS)
    activated = torch.where(normed > 0, normed, a64 * normed)
    out = (activated * w64.view(1, B, 1)).sum(1)
    grads = torch.autograd.grad(out, [y64, s64, w64, a64], torch.tensor(grad, dtype=torch.float64))
    return [out.detach().numpy()] + [g.numpy() for g in grads]


def _kernels(y, scale, slot, weights, grad, H):
    out = branches.stage_forward(y, scale, slot, weights, SLOPE, EPS, H)
    grad_y, grad_scale, grad_weights, grad_slope = branches.stage_backward(y, scale, slot, weights, SLOPE, EPS, grad)
    return [out, grad_y, grad_scale, grad_weights, np.array([grad_slope])]


# (S, T, B, Kp, H): several coordinates per slot (S Kp > H); slots that no coordinate reaches
# (S Kp < H); a permutation (S Kp = H) over several token blocks with a partial last one; a
# permutation for five branches (the output sums a group of four branches and one of one); a
# permutation of 10 coordinates (indices read four at a time, then the last two); a permutation
# of more than 2^16 coordinates (the gather, indices read one at a time)
SHAPES = [(3, 70, 3, 8, 10), (2, 9, 2, 4, 12), (2, 150, 3, 32, 64), (2, 40, 5, 8, 16), (2, 20, 2, 5, 10),
          (1, 3, 1, 65540, 65540)]


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 5e-6)])
@pytest.mark.parametrize("shape", SHAPES)
def test_kernels_match_the_dense_reference(shape, dtype, tol):
    """Outputs and every gradient, relative to the largest entry of each."""
    *dims, H = shape
    case = _case(*dims, H, dtype)
    # both layouts of the kernels are covered: a permutation normalises in the coordinates' order
    permutation = dims[0] * dims[3] == H and 4 * H <= 1 << 16
    assert branches._layout(case[2], case[1], H, case[0].shape)[0] == permutation
    for name, got, want in zip(["out", "grad_y", "grad_scale", "grad_weights", "grad_slope"],
                               _kernels(*case, H), _reference(*case, H)):
        assert got.shape == want.shape, name
        assert got.dtype == (np.float64 if name in ("grad_scale", "grad_weights", "grad_slope") else dtype), name
        error = np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1.0)
        assert error <= tol, (name, error)
    assert not np.any(_kernels(*case, H)[0][0]), "a zero row normalises to exactly 0"


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 5e-6)])
def test_a_constant_row_normalises_to_exactly_zero(dtype, tol):
    """Slots that each receive one coordinate with factor 1 and a token of equal values: its
    variance is exactly 0 (LayerNorm gives 0, where PReLU's derivative is the slope)."""
    y, scale, slot, weights, grad = _case(1, 3, 2, 16, 16, dtype)
    scale[:] = 1
    y[:, 1] = 0.75
    results = _kernels(y, scale, slot, weights, grad, 16)
    assert not np.any(results[0][1])
    for got, want in zip(results, _reference(y, scale, slot, weights, grad, 16)):
        assert np.abs(got.astype(np.float64) - want).max() <= tol * max(np.abs(want).max(), 1.0)


def test_the_gather_plan_adds_the_coordinates_of_a_slot_in_increasing_order():
    """Slot h's first coordinate is its smallest k; the others follow in increasing k; a slot
    reached by no coordinate reads offset 0 with factor 0."""
    slot = np.array([[2, 0, 2, 3, 2, 0]], dtype=np.int64)
    scale = np.arange(1.0, 7.0).reshape(1, 6)
    source, first_offset, first_factor, extra_slot, extra_offset, extra_factor, counts = branches.gather_plan(
        slot, scale, 5, (2, 4, 1, 3))  # S = 2 parts of Kp = 3: k = s 3 + q at offset s (4 * 1 * 3) + q
    assert source.tolist() == [[1, -1, 0, 3, -1]]
    assert first_offset.tolist() == [[1, 0, 0, 12, 0]]
    assert first_factor.tolist() == [[2.0, 0.0, 1.0, 4.0, 0.0]]
    assert counts.tolist() == [3]
    assert extra_slot.tolist() == [[2, 2, 0]]
    assert extra_offset.tolist() == [[2, 13, 14]]
    assert extra_factor.tolist() == [[3.0, 5.0, 6.0]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_and_two_threads_give_the_same_bits(dtype):
    """Every job sums its tokens alone and the jobs are added in a fixed order."""
    if _numba.numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba started with one thread (NUMBA_NUM_THREADS=1): nothing to compare")
    case = _case(2, 300, 3, 16, 24, dtype, seed=1)  # 5 token blocks, the last partial
    before = _numba.numba.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            _numba.set_threads(threads)
            results.append(_kernels(*case, 24))
    finally:
        _numba.set_threads(before)
    for one, two in zip(*results):
        assert one.tobytes() == two.tobytes()
