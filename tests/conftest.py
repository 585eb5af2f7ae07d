"""Shared fixtures: a seeded random generator and a hypothesis profile sized for CI.

The default profile "ci" is derandomized, so every run draws the same examples;
HYPOTHESIS_PROFILE=thorough explores 500 fresh examples per property (`make test-thorough`
runs every property test that way). A property sets no example count of its own, or one
derived from the profile's (``settings.default.max_examples``), so both profiles reach it.
"""
import os

import numpy as np
import pytest

os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".cache", "numba"))

try:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci", max_examples=40, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile("thorough", max_examples=500, deadline=None)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # hypothesis is a test extra; tests that need it import it themselves
    pass


def pytest_configure(config):
    """Under pytest-xdist each worker gets its share of the cores for torch's and numba's pools
    (``make test`` runs 2 workers on 2 cores: 1 thread each). Two workers with a pool of every
    core each would put two spinning OpenMP pools on each core, the contention that
    docs/performance.md ("Threads") measures. Tests about thread counts set them themselves."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not os.environ.get("PYTEST_XDIST_WORKER") or workers < 2:
        return
    share = max(1, (os.cpu_count() or 1) // workers)
    import torch

    try:
        from galinear import _numba

        _numba.set_threads(share)  # first: starting numba's pool may change torch's count
    except ImportError:  # numba missing: torch's threads only
        pass
    torch.set_num_threads(share)


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's name, so every test is reproducible."""
    seed = sum(map(ord, request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)


@pytest.fixture
def benchmark_script():
    """load(name): the script benchmarks/<name>.py as a module, loaded from the checkout (benchmarks
    are not part of the package)."""
    import importlib.util
    from pathlib import Path

    def load(name: str):
        path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def no_loading(monkeypatch):
    """Loading a model, a data set or a text fails the test: the checks must come first."""
    from galinear.lm import models
    from galinear.data import text
    from galinear.train import data

    def loaded(*args, **kwargs):
        raise AssertionError("a model or data set was loaded before the input was checked")

    monkeypatch.setattr(models, "load_model", loaded)
    monkeypatch.setattr(data, "image_tensors", loaded)
    monkeypatch.setattr(text, "check_available", lambda name: None)  # corpora need not be installed
    monkeypatch.setattr(text, "load_text", loaded)


def _file_seconds() -> dict:
    import json

    try:
        with open(os.path.join(os.path.dirname(__file__), "durations.json"), encoding="utf-8") as handle:
            return json.load(handle)["seconds"]
    except (OSError, ValueError, KeyError):
        return {}


def pytest_collection_modifyitems(config, items):
    """Longest test files first (tests/durations.json, measured): pytest-xdist's ``--dist loadfile``
    hands files out in this order, so the long ones start at once on both workers instead of
    leaving one worker alone with a long file at the end. Tests keep their order within a file;
    files not measured come last, in collection order."""
    seconds = _file_seconds()
    if not seconds:
        return
    position = {}
    for item in items:
        position.setdefault(item.nodeid.split("::")[0], len(position))
    items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::")[0], 0.0),
                                 position[item.nodeid.split("::")[0]]))
