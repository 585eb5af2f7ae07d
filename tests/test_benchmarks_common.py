"""benchmarks/_common.py: the round-robin timer (against fake clocks), the tables, the header and
the result files; and every file under benchmarks/ parses and imports (their work runs under
``if __name__ == "__main__"`` only)."""
from __future__ import annotations

import ast
import importlib.util
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load_common():
    """benchmarks/_common.py, loaded from the checkout (benchmarks are not part of the package)."""
    spec = importlib.util.spec_from_file_location("_common", BENCHMARKS / "_common.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_common", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


common = _load_common()


class FakeClock:
    """A clock that moves only when a contender says how long it took."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


def _scripted(clock, log, name, durations):
    """A contender that logs its name and advances the clock by the next of ``durations``."""
    durations = iter(durations)

    def call():
        log.append(name)
        clock.advance(next(durations))

    return call


# ------------------------------------------------------------------------------------- timer
def test_round_robin_order_and_statistics():
    clock, log = FakeClock(), []
    contenders = {
        "a": _scripted(clock, log, "a", [50.0, 1.0, 3.0, 2.0, 10.0]),  # warm-up 50, then samples 1, 3, 2, 10
        "b": _scripted(clock, log, "b", [50.0, 4.0, 4.0, 4.0, 4.0]),
        "c": _scripted(clock, log, "c", [50.0, 9.0, 7.0, 8.0, 6.0]),
    }
    timings = common.round_robin(contenders, 4, warmup=1, clock=clock)
    assert log == ["a", "b", "c"] * 5  # one warm-up round, then every round times every contender in order
    assert list(timings) == ["a", "b", "c"]
    assert timings["a"].samples == (1.0, 3.0, 2.0, 10.0)  # the warm-up is not a sample
    assert timings["a"].best == 1.0
    assert timings["a"].median == 2.5
    assert timings["a"].mean == 4.0
    assert timings["b"].samples == (4.0,) * 4 and timings["b"].calls == 1
    assert (timings["c"].best, timings["c"].median) == (6.0, 7.5)
    assert common.statistic(timings, "best") == {"a": 1.0, "b": 4.0, "c": 6.0}
    assert common.statistic(timings) == {"a": 2.5, "b": 4.0, "c": 7.5}


def test_round_robin_without_warmup_times_the_first_call():
    clock, log = FakeClock(), []
    timings = common.round_robin({"a": _scripted(clock, log, "a", [5.0, 1.0])}, 2, warmup=0, clock=clock)
    assert log == ["a", "a"] and timings["a"].samples == (5.0, 1.0)


def test_setup_is_untimed_and_feeds_the_call():
    clock, log = FakeClock(), []

    def setup():
        log.append("setup")
        clock.advance(100.0)  # a forward pass, say: outside the timed region
        return len(log)

    def call(state):
        log.append(("call", state))
        clock.advance(2.0)

    timings = common.round_robin({"x": common.Contender(call, setup=setup)}, 2, warmup=1, clock=clock)
    assert log == ["setup", ("call", 1), "setup", ("call", 3), "setup", ("call", 5)]
    assert timings["x"].samples == (2.0, 2.0)


def test_sync_brackets_the_timed_call():
    clock, log = FakeClock(), []

    def sync():
        log.append("sync")
        clock.advance(0.5)  # waiting for queued device work: the second wait is part of the call

    timings = common.round_robin({"a": _scripted(clock, log, "a", [1.0, 1.0])}, 1, sync=sync, clock=clock)
    assert log == ["a", "sync", "a", "sync"]  # no sync around the warm-up
    assert timings["a"].samples == (1.5,)


def test_min_sample_seconds_loops_short_calls():
    clock, log = FakeClock(), []
    tick = 1 / 1024  # exact in binary, so the counts below are exact
    contender = _scripted(clock, log, "a", [tick] * 1000)
    timings = common.round_robin({"a": contender}, 2, warmup=1, min_sample_seconds=1 / 64, clock=clock)
    # calibration: 1 call lasts less than a tenth of 1/64 s, 10 calls do; 10 calls take 10/1024 s,
    # so a sample of 1/64 s needs 16 calls
    assert timings["a"].calls == 16
    assert len(log) == 1 + 1 + 10 + 2 * 16
    assert timings["a"].samples == (tick, tick)  # seconds per call


def test_contender_threads_are_set_and_restored():
    numba = pytest.importorskip("numba")
    before = numba.get_num_threads()
    seen = []
    common.round_robin({"a": common.Contender(lambda: seen.append(numba.get_num_threads()), threads=1)}, 2)
    assert seen == [1, 1, 1] and numba.get_num_threads() == before


@pytest.mark.parametrize("kwargs, message", [
    (dict(repeats=0), "repeats must be at least 1"),
    (dict(repeats=1, warmup=-1), "warmup must be 0 or more"),
])
def test_round_robin_refuses_bad_counts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        common.round_robin({"a": lambda: None}, **kwargs)


def test_round_robin_refuses_no_contenders():
    with pytest.raises(ValueError, match="no contenders"):
        common.round_robin({}, 3)


def test_timing_median_matches_statistics():
    samples = (0.3, 0.1, 0.2, 0.9)
    timing = common.Timing(samples)
    assert timing.median == statistics.median(samples) and timing.best == 0.1
    assert timing.mean == pytest.approx(0.375)


def test_statistic_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="unknown statistic 'p90'"):
        common.statistic({"a": common.Timing((1.0,))}, "p90")


# ------------------------------------------------------------------------------------ tables
def test_markdown_table_formats_cells():
    text = common.markdown_table(
        ["name", "n", "ms", "ratio", "note"],
        [["alpha", 4096, 1.23456, common.ratio(1.5, suffix="x"), None],
         ["|B| ~ 1", 12, 1234.5, common.ratio(None), "ok"]],
        formats={"ms": ".2f"})
    assert text == ("| name | n | ms | ratio | note |\n"
                    "|---|---|---|---|---|\n"
                    "| alpha | 4096 | 1.23 | 1.50x | - |\n"
                    "| \\|B\\| ~ 1 | 12 | 1234.50 | - | ok |")


def test_markdown_table_default_float_and_callable_formats():
    text = common.markdown_table(["t", "u"], [[0.012345, 3], [250.4, 4]], formats=[None, lambda v: f"<{v}>"])
    assert text.splitlines()[2:] == ["| 0.012 | <3> |", "| 250 | <4> |"]


def test_markdown_table_header_alone_and_row_by_row():
    assert common.markdown_table(["a", "|b|"], []) == "| a | \\|b\\| |\n|---|---|"
    assert common.markdown_row([1, 2.5, None], [None, ".1f", None], missing="—") == "| 1 | 2.5 | — |"


@pytest.mark.parametrize("call, message", [
    (lambda: common.markdown_table(["a", "b"], [[1]]), "a row has 1 cells for 2 columns"),
    (lambda: common.markdown_table(["a"], [[1]], formats=[None, None]), "2 formats for 1 columns"),
    (lambda: common.markdown_table(["a"], [[1]], formats={"b": ".2f"}), "formats name columns the table lacks"),
    (lambda: common.markdown_row([1, 2], [None]), "1 formats for 2 cells"),
])
def test_markdown_table_refuses_mismatched_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("value, digits, text", [
    (None, 3, "-"), (0.012345, 3, "0.012"), (1.23456, 3, "1.23"), (1.23456, 1, "1.2"), (99.994, 3, "99.99"),
    (1234.5, 3, "1,234"), (-0.5, 2, "-0.50"), (12.7, 0, "13"),
])
def test_number(value, digits, text):
    assert common.number(value, digits) == text


def test_ratio():
    assert common.ratio(1.2345) == "1.23"
    assert common.ratio(1.2345, 1, suffix="x") == "1.2x"
    assert common.ratio(0.5, bold=True) == "**0.50**"
    assert common.ratio(None, bold=True, missing="fails") == "fails"


# ---------------------------------------------------------------------------------- metadata
def test_header_from_metadata():
    meta = {"command": "python benchmarks/x.py --quick ", "date": "2026-01-02 03:04 UTC",
            "machine": {"cpu": "Some CPU", "logical_cpus": 8, "python": "3.11.7"},
            "numpy": "2.4.6", "numba": "0.68.1", "numba_threads": 1, "torch": "2.13.0", "torch_threads": 4,
            "repeats": 5}
    assert common.header(meta) == ("Command: `python benchmarks/x.py --quick`; 2026-01-02 03:04 UTC; Some CPU, "
                                   "8 logical CPUs; python 3.11.7, numpy 2.4.6, numba 0.68.1 (1 thread), "
                                   "torch 2.13.0 (4 threads).")


def test_metadata_records_the_machine_and_versions():
    import numpy as np

    meta = common.metadata("python benchmarks/x.py", packages=("numpy",), thread_counts=False, repeats=3)
    assert meta["command"] == "python benchmarks/x.py" and meta["repeats"] == 3
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", meta["date"])
    assert meta["numpy"] == np.__version__
    assert set(meta["machine"]) == {"cpu", "logical_cpus", "python"} and meta["machine"]["logical_cpus"] >= 1
    assert "torch_threads" not in meta and "numba_threads" not in meta


def test_command_line():
    assert common.command_line("/x/benchmarks/bench_a.py", [], make_target="bench-a") == \
        "make bench-a  (= python benchmarks/bench_a.py)"
    assert common.command_line("bench_a.py", ["--note", "two words"], make_target="bench-a") == \
        "python benchmarks/bench_a.py --note 'two words'"


# ------------------------------------------------------------------------------------- files
def test_write_results(tmp_path):
    json_path, md_path = common.write_results(tmp_path / "deeper" / "bench_x", {"rows": [1, 2.5]}, "| a |")
    assert json_path == tmp_path / "deeper" / "bench_x.json" and md_path == tmp_path / "deeper" / "bench_x.md"
    assert json.loads(json_path.read_text()) == {"rows": [1, 2.5]}
    assert md_path.read_text() == "| a |\n"
    assert sorted(p.name for p in json_path.parent.iterdir()) == ["bench_x.json", "bench_x.md"]  # no temporary left


def test_busy_process_is_killed_on_exit():
    with common.BusyProcess() as busy:
        assert busy.process.poll() is None
    assert busy.process.poll() is not None
    assert busy.wall > 0 and (busy.cpu is None or busy.cpu >= 0)


def test_dense_cayley_is_the_geometric_product():
    np = pytest.importorskip("numpy")
    from galinear import Algebra

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 5, 8))
    want = Algebra(3).gp(a, b, method="table")
    np.testing.assert_allclose(np.einsum("bi,bj,ijk->bk", a, b, common.dense_cayley(3)), want, atol=1e-12)


# ------------------------------------------------------------------------------ every script
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def test_benchmarks_folder_is_found():
    assert len(SCRIPTS) > 15, f"expected the benchmark scripts under {BENCHMARKS}"


def _runs_under_main(tree) -> bool:
    return any(isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
               and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__" for node in tree.body)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_parses_and_runs_under_main(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    if path.name != "_common.py":
        assert _runs_under_main(tree), f"{path.name}: no `if __name__ == \"__main__\":`; its work would run on import"


def _top_level_names(tree) -> set:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def test_names_imported_from_sibling_scripts_exist():
    """``from _common import x`` (or from another script of the folder): x is defined there."""
    trees = {path.stem: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in SCRIPTS}
    defined = {stem: _top_level_names(tree) for stem, tree in trees.items()}
    missing = [f"{stem}.py:{node.lineno}: {node.module}.{alias.name}"
               for stem, tree in trees.items() for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module in trees
               for alias in node.names if alias.name not in defined[node.module]]
    assert not missing, "names imported from benchmark scripts that do not define them:\n" + "\n".join(missing)
    assert set(common.__all__) <= defined["_common"]


@pytest.mark.slow
def test_every_benchmark_imports():
    """Each script imported (not run) in one fresh process: every name it imports exists."""
    code = (
        "import importlib.util, pathlib, sys\n"
        "for path in sys.argv[1:]:\n"
        "    name = pathlib.Path(path).stem\n"
        "    spec = importlib.util.spec_from_file_location(name, path)\n"
        "    module = sys.modules.setdefault(name, importlib.util.module_from_spec(spec))\n"
        "    spec.loader.exec_module(module)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *map(str, SCRIPTS)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
