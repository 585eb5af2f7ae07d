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


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's name, so every test is reproducible."""
    seed = sum(map(ord, request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)


@pytest.fixture
def no_loading(monkeypatch):
    """Loading a model, a data set or a text fails the test: the checks must come first."""
    from galinear.compress import models
    from galinear.data import text
    from galinear.train import data

    def loaded(*args, **kwargs):
        raise AssertionError("a model or data set was loaded before the input was checked")

    monkeypatch.setattr(models, "load_model", loaded)
    monkeypatch.setattr(data, "image_tensors", loaded)
    monkeypatch.setattr(text, "check_available", lambda name: None)  # corpora need not be installed
    monkeypatch.setattr(text, "load_text", loaded)
