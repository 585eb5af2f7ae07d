"""Shared fixtures: a seeded random generator and a hypothesis profile sized for CI; every test
ends with the thread counts it started with (:func:`pytest_runtest_protocol`).

The default profile "ci" is derandomized, so every run draws the same examples;
HYPOTHESIS_PROFILE=thorough explores 500 fresh examples per property (`make test-thorough`
runs every property test that way). A property sets no example count of its own, or one
derived from the profile's (``settings.default.max_examples``), so both profiles reach it.
"""
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".cache", "numba"))

from galinear.optim import threads  # noqa: E402  (light: torch and numba are read from sys.modules)

TESTS = Path(__file__).resolve().parent
#: Test folders and files (relative to tests/) that need only the core install: numpy, sympy,
#: numba and the test extra, no torch. Their tests get the ``core`` mark, and ``make test-core``
#: runs them (``pytest -m core``) in a fresh venv without torch. A test among them that needs torch
#: starts with ``pytest.importorskip("torch")``, so that it skips there; one parametrized with
#: ``target="torch"`` (or ``"triton"``, a galinear.compile target) skips without that package.
CORE_TESTS = (
    "core",
    "symbolic",
    "compiler",
    "data",
    "commands/test_cli_tour.py",
    "commands/test_codegen_expr.py",
    "commands/test_config_options.py",
    "kernels/test_rotor_chain.py",
    "kernels/test_spinor_kernels.py",
    "test_benchmarks_common.py",
    "test_blades.py",
    "test_cache_trust.py",
    "test_import_graph.py",
    "test_matrix_rep.py",
    "test_test_layout.py",
)
#: Values of a test's ``target`` parameter that need a package of an extra.
TARGET_PACKAGES = {"torch": "torch", "triton": "triton"}


def _relative(path) -> str | None:
    try:
        return Path(path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return None


def is_core_test(path) -> bool:
    """Whether the test file ``path`` is in :data:`CORE_TESTS`."""
    relative = _relative(path)
    return relative is not None and any(relative == c or relative.startswith(c + "/") for c in CORE_TESTS)


def pytest_ignore_collect(collection_path, config):
    """With ``-m core`` (or ``-m "core and ..."``), the files outside :data:`CORE_TESTS` are not
    collected: none of their tests could run, and their module-level imports need torch."""
    expression = (config.getoption("markexpr", "") or "").strip()
    if expression != "core" and not expression.startswith("core and "):
        return None
    relative = _relative(collection_path)
    if relative in (None, ".") or collection_path.name in ("conftest.py", "__init__.py"):
        return None
    if is_core_test(collection_path) or any(c.startswith(relative + "/") for c in CORE_TESTS):
        return None
    return True

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
    try:
        from galinear import _numba

        _numba.set_threads(share)  # first: starting numba's pool may change torch's count
    except ImportError:  # numba missing: torch's threads only
        pass
    try:
        import torch
    except ImportError:  # the core install (make test-core): numba's threads only
        return
    torch.set_num_threads(share)


@pytest.hookimpl(hookwrapper=True)  # the old style: pytest >= 7 (setup.cfg)
def pytest_runtest_protocol(item, nextitem):
    """Every test ends with the thread settings it started with (pytest_configure's under
    pytest-xdist), whatever it or its fixtures set and left. A test that leaves torch at every
    core (a ``--threads auto`` run keeps the count its governor chose last) makes the later tests
    of its worker spin two OpenMP pools against the other worker: a tiny distillation then takes
    25 s instead of half a second."""
    with threads.kept():
        yield


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


@pytest.hookimpl(tryfirst=True)  # the marks first, then ``-m`` selects by them
def pytest_collection_modifyitems(config, items):
    """The ``core`` mark on the tests of :data:`CORE_TESTS`, and a skip on those whose ``target``
    parameter needs a package that is not installed (:data:`TARGET_PACKAGES`).

    Longest test files first (tests/durations.json, measured): pytest-xdist's ``--dist loadfile``
    hands files out in this order, so the long ones start at once on both workers instead of
    leaving one worker alone with a long file at the end. Tests keep their order within a file;
    files not measured come last, in collection order."""
    import importlib.util

    from galinear._extras import install_command, extra_of

    missing = {target: package for target, package in TARGET_PACKAGES.items()
               if importlib.util.find_spec(package) is None}
    for item in items:
        if is_core_test(item.path):
            item.add_marker(pytest.mark.core)
        target = getattr(getattr(item, "callspec", None), "params", {}).get("target")
        if isinstance(target, str) and target in missing:
            item.add_marker(pytest.mark.skip(
                reason=f"the {target} target needs {missing[target]} ({install_command(extra_of(missing[target]))})"))
    seconds = _file_seconds()
    if not seconds:
        return
    position = {}
    for item in items:
        position.setdefault(item.nodeid.split("::")[0], len(position))
    items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::")[0], 0.0),
                                 position[item.nodeid.split("::")[0]]))
