"""Rotor layers under DistributedDataParallel: two gloo ranks match one process on the same global batches.

Every registered sandwich backend, RotorNetwork and a chunked RotorLinear (2 x 2 overlapping,
wrapping chunks), each with decomposition "exact" and the warm-started "power", float64, SGD. Each
rank sees half of every global batch; DDP averages the gradients, which equals the gradient of
the mean loss over the whole batch, so the parameters must agree with a single process to
rounding (1e-12), with DDP's buffer broadcast on and off. The warm starts of the power method
agree to 1e-12 too; the exact method keeps none.
"""
import os
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from galinear.nn import RotorLinear, RotorNetwork  # noqa: E402
from galinear.nn.functional import available_sandwich_backends  # noqa: E402

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")

STEPS, BATCH, LR = 4, 8, 0.2


def _configs():
    out = []
    for backend in available_sandwich_backends("cpu", torch.float64):
        for decomposition in ("exact", "power"):
            out.append(("network", backend, decomposition, True))
        out.append(("network", backend, "power", False))  # no buffer broadcast: every rank updates alike
        for decomposition in ("exact", "power"):  # power: warm starts updated in forward, broadcast by DDP
            out.append(("chunked", backend, decomposition, True))
    return out


def _build(kind, backend, decomposition):
    torch.manual_seed(0)
    if kind == "network":
        return RotorNetwork(8, 6, hidden=8, backend=backend, decomposition=decomposition, dtype=torch.float64)
    return RotorLinear(12, 10, chunk_size=8, bias=True, backend=backend, decomposition=decomposition,
                       dtype=torch.float64)


def _batches(module):
    g = torch.Generator().manual_seed(1)
    target = torch.randn(module.out_features, module.in_features, generator=g, dtype=torch.float64)
    xs = [torch.randn(BATCH, module.in_features, generator=g, dtype=torch.float64) for _ in range(STEPS)]
    return [(x, x @ target.T) for x in xs]


def _train(module, batches, rank=0, size=1):
    opt = torch.optim.SGD(module.parameters(), lr=LR)
    share = BATCH // size
    for x, y in batches:
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        opt.zero_grad()
        torch.nn.functional.mse_loss(module(x), y).backward()
        opt.step()
    with torch.no_grad():  # one more training-mode forward: warm starts of the final bivectors
        getattr(module, "module", module)(batches[0][0][:2])


def _state(module):
    inner = getattr(module, "module", module)
    return {k: v.detach().clone() for k, v in inner.state_dict().items()}


def _worker(rank, size, rendezvous, folder, configs):
    torch.set_num_threads(1)
    # the ranks meet in a file of the fixture's own folder, not on a TCP port: a port picked free
    # beforehand can be taken by another test's ranks before rank 0 listens on it
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=size)
    try:
        states = []
        for kind, backend, decomposition, broadcast in configs:
            module = _build(kind, backend, decomposition)
            batches = _batches(module)
            with warnings.catch_warnings():  # newer torch renames broadcast_buffers (same meaning here)
                warnings.simplefilter("ignore", FutureWarning)
                ddp = torch.nn.parallel.DistributedDataParallel(module, broadcast_buffers=broadcast)
            _train(ddp, batches, rank, size)
            states.append(_state(ddp))
        torch.save(states, os.path.join(folder, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def one_process():
    """{config: (state before, state after)} of one process training on the whole batches."""
    out = {}
    for config in _configs():
        module = _build(*config[:3])
        start = _state(module)
        _train(module, _batches(module))
        out[config] = start, _state(module)
    return out


@pytest.fixture(scope="module")
def ranks(one_process, tmp_path_factory):
    # one_process first: the ranks then load the kernels it compiled from the numba cache instead
    # of both compiling them (a cold cache, as in a fresh clone)
    folder = tmp_path_factory.mktemp("ddp")
    configs = _configs()
    rendezvous = "file://" + str(folder / "rendezvous")
    mp.start_processes(_worker, args=(2, rendezvous, str(folder), configs), nprocs=2, start_method="spawn")
    states = [torch.load(folder / f"rank{r}.pt", weights_only=True) for r in range(2)]
    return dict(zip(configs, zip(*states)))


def test_every_backend_is_tested():
    assert {"dense", "factored"} <= set(available_sandwich_backends("cpu", torch.float64))
    assert len(_configs()) == 5 * len(available_sandwich_backends("cpu", torch.float64))


@pytest.mark.parametrize("config", _configs(), ids=lambda c: "-".join(map(str, c)))
def test_ddp_matches_one_process(one_process, ranks, config):
    decomposition = config[2]
    start, reference = one_process[config]
    assert any("warm_start" in k for k in reference) == (decomposition == "power")
    for state in ranks[config]:
        assert state.keys() == reference.keys()
        for k in reference:
            error = (state[k] - reference[k]).abs().max()
            assert torch.allclose(state[k], reference[k], rtol=0, atol=1e-12), (k, error)
    # the steps moved the parameters and, for the power method, its warm starts (the comparison is
    # not of untouched tensors)
    moved = ("bivectors", "warm_start")
    assert all(not torch.equal(reference[k], start[k]) for k in reference if any(m in k for m in moved))
