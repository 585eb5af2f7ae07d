"""Learned rotations: orthogonal at any parameters, gradients against central differences in float64
at random and special points, and a calibration interrupted and resumed ends bit for bit where an
uninterrupted one ends."""
import numpy as np
import pytest
import torch
from torch.func import functional_call

from galinear.quantize.calibrate import train_rotation
from galinear.quantize.rotations import Rotation, times_stages
from galinear.testing import assert_gradient_matches_fd, assert_orthogonal, rotor_cases

WIDTH, CHUNK = 32, 16  # two chunks of Cl(4), where equal angles exist


def _points(family, rotation):
    """{case: flat parameter vector} at the special points of the family."""
    size = rotation.num_parameters()
    rng = np.random.default_rng(0)
    if family == "rotor":  # per chunk a left and a right bivector of Cl(4), from galinear's rotor cases
        cases = rotor_cases(4, pairs=2 * rotation.chunks, seed=1)
        return {name: torch.tensor(b.reshape(-1)) for name, b in cases.items()}
    points = {"random": rng.standard_normal(size), "zero": np.zeros(size), "tiny": 1e-12 * rng.standard_normal(size),
              "large": 1e3 * rng.standard_normal(size) / np.sqrt(size), "equal_angles": np.full(size, 0.7)}
    return {name: torch.tensor(p) for name, p in points.items()}


def _as_parameters(rotation, flat):
    out, at = {}, 0
    for name, p in rotation.named_parameters():
        out[name] = flat[at:at + p.numel()].reshape(p.shape)
        at += p.numel()
    return out


def _check_gradients(family, cases, directions):
    rotation = Rotation(family, WIDTH, seed=0, chunk=CHUNK, dtype=torch.float64)
    weight = torch.randn(WIDTH, WIDTH, dtype=torch.float64, generator=torch.Generator().manual_seed(2))

    def loss(flat):
        Q = functional_call(rotation, _as_parameters(rotation, flat), ())
        return (weight * Q).sum() + (Q[:, :3] ** 2 * weight[:, :3]).sum()

    for name, point in _points(family, rotation).items():
        if cases is not None and name not in cases:
            continue
        with torch.no_grad():
            assert_orthogonal(functional_call(rotation, _as_parameters(rotation, point), ()).numpy(), atol=1e-9)
        try:
            assert_gradient_matches_fd(loss, point, rtol=1e-6, directions=directions)
        except AssertionError as error:
            raise AssertionError(f"{family}, {name}: {error}") from None


@pytest.mark.parametrize("family", ["cayley", "butterfly", "rotor"])
def test_gradients_match_central_differences_at_random_and_zero(family):
    _check_gradients(family, ("random", "zero"), directions=3)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["cayley", "butterfly", "rotor"])
def test_gradients_match_central_differences_at_every_special_point(family):
    _check_gradients(family, None, directions=12)


def _problem(seed=0):
    torch.manual_seed(seed)
    weights, stats = [], []
    for _ in range(3):
        layer, entry = {}, {}
        for name, shape in (("q_proj", (16, WIDTH)), ("o_proj", (WIDTH, 16)), ("down_proj", (WIDTH, 24))):
            x = torch.randn(64, shape[1]) @ (torch.eye(shape[1]) + torch.randn(shape[1], shape[1]) / 3)
            layer[name] = torch.randn(*shape)
            entry[name] = {"hessian": x.double().t() @ x.double(), "rows": x[:32], "count": 64}
        entry["gate_proj"] = entry["q_proj"]
        weights.append(layer)
        stats.append(entry)
    return weights, stats


@pytest.mark.parametrize("family", ["cayley", "rotor"])
def test_an_interrupted_calibration_resumes_bit_exact(tmp_path, family):
    options = dict(wbits=3, abits=4, steps=6, lr=0.05, layers_per_step=2, seed=5, rows_per_step=8,
                   checkpoint_every=2)
    straight = Rotation(family, WIDTH, seed=1, chunk=CHUNK)
    result = train_rotation(straight, *_problem(), checkpoint=str(tmp_path / "a.safetensors"), **options)
    assert result["steps"] == 6 and result["history"][-1] < result["history"][0] * 1.5

    resumed = Rotation(family, WIDTH, seed=1, chunk=CHUNK)
    path = str(tmp_path / "b.safetensors")
    first = train_rotation(resumed, *_problem(), checkpoint=path, stop_after=4, **options)  # interrupted after 4
    assert first["steps"] == 4
    fresh = Rotation(family, WIDTH, seed=1, chunk=CHUNK)  # a new process: nothing kept but the file
    second = train_rotation(fresh, *_problem(), checkpoint=path, **options)
    assert second["resumed_from"] == 4 and second["history"] == result["history"]
    for a, b in zip(straight.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") or p.suffix not in (".safetensors",)]


def test_a_checkpoint_of_other_settings_is_refused(tmp_path):
    path = str(tmp_path / "c.safetensors")
    train_rotation(Rotation("cayley", WIDTH, seed=1), *_problem(), wbits=4, steps=1, checkpoint=path)
    with pytest.raises(ValueError, match="other settings.*delete it"):
        train_rotation(Rotation("cayley", WIDTH, seed=1), *_problem(), wbits=3, steps=1, checkpoint=path)


def test_rotor_layers_compose_chunk_rotors_across_chunks():
    """Two layers of chunk rotors: orthogonal, twice the parameters, not block-diagonal (the shuffle
    mixes the chunks), the Hadamard start at zero, and the stages applied to a matrix give the same product as the learned factor."""
    one = Rotation("rotor", WIDTH, seed=0, chunk=CHUNK, dtype=torch.float64)
    two = Rotation("rotor", WIDTH, seed=0, chunk=CHUNK, dtype=torch.float64, layers=2)
    assert two.num_parameters() == 2 * one.num_parameters()
    assert torch.equal(two.matrix(), one.matrix())  # at zero: the Hadamard start, like every learned family
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in two.parameters():
            p.copy_(0.4 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    learned = two.learned().detach()
    assert_orthogonal(learned.numpy(), atol=1e-12)
    assert float(learned[:CHUNK, CHUNK:].abs().max()) > 1e-3  # chunks mixed
    x = torch.randn(5, WIDTH, dtype=torch.float64, generator=generator)
    torch.testing.assert_close(times_stages(x, two.learned_stages()), x @ learned, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="only the rotor family has layers"):
        Rotation("butterfly", WIDTH, chunk=CHUNK, layers=2)
    with pytest.raises(ValueError, match="--rotor-layers must be an integer >= 1"):
        Rotation("rotor", WIDTH, chunk=CHUNK, layers=0)


def test_rotor_layers_gradients_match_central_differences():
    rotation = Rotation("rotor", WIDTH, seed=0, chunk=CHUNK, dtype=torch.float64, layers=2)
    weight = torch.randn(WIDTH, WIDTH, dtype=torch.float64, generator=torch.Generator().manual_seed(2))

    def loss(flat):
        Q = functional_call(rotation, _as_parameters(rotation, flat), ())
        return (weight * Q).sum() + (Q[:, :3] ** 2 * weight[:, :3]).sum()

    size = rotation.num_parameters()
    for point in (torch.tensor(np.random.default_rng(0).standard_normal(size)), torch.zeros(size, dtype=torch.float64)):
        assert_gradient_matches_fd(loss, point, rtol=1e-6, directions=3)
