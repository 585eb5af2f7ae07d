"""benchmarks/bench_compress_fit.py: a smoke run on a tiny random Llama saved to disk (every method
fits one layer through the study's own code), the subprocess command line, the tables' ratios and
the answers to its two questions, and its refusals of bad settings."""
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from galinear.testing.folders import tiny_model_folder  # noqa: E402


@pytest.fixture
def bench(benchmark_script):
    """benchmarks/bench_compress_fit.py, loaded from the checkout."""
    return benchmark_script("bench_compress_fit")


def test_quick_run_fits_one_layer_with_every_method(bench, tmp_path, capsys):
    folder = tiny_model_folder(tmp_path / "model", layers=2)
    rows = bench.main(["--quick", "--no-write", "--in-process", "--model", folder, "--layer", "1", "--threads", "1",
                       "--hidden", "64"])
    assert [r["kind"] for r in rows] == ["capture", "rotor", "kron", "givens", "lr", "lr-cf"]
    capture, *fits = rows
    assert capture["rows"] == {"train": 512, "test": 1024, "valid": 512}  # 1 training, 2 test, 1 validation window
    by = {r["kind"]: r for r in fits}
    # the tiny model: q 32 -> 32, k and v 32 -> 16 (4 heads of 8, 2 key-value heads)
    dense = 32 * 32 + 2 * 32 * 16
    assert all(r["dense_parameters"] == dense for r in fits)
    assert by["lr"]["parameters"] == by["lr-cf"]["parameters"] == (32 + 32) + 2 * (32 + 16)  # rank 1
    assert by["lr"]["share"] == pytest.approx(160 / dense)
    assert by["givens"]["parameters"] == by["rotor"]["parameters"]  # the control: the same network, Givens gadgets
    for kind in ("rotor", "kron", "givens", "lr"):
        assert by[kind]["steps"] == by[kind]["asked_steps"] == 2, kind
        assert by[kind]["step_seconds"] == pytest.approx(by[kind]["loop_seconds"] / 2)
    assert by["lr-cf"]["steps"] == 0 and by["lr-cf"]["step_seconds"] is None
    assert by["rotor"]["size"] == "hidden 64" and by["kron"]["size"] == "1 term" and by["lr"]["size"] == "rank 1"
    for r in fits:
        assert r["fit_seconds"] > 0 and r["fit_cpu_seconds"] > 0 and r["peak_rss_bytes"] > 0
        assert all(math.isfinite(v) and v >= 0 for v in r["test_rel_mse"].values())
    answers = bench.answers(rows)
    assert [a["question"] for a in answers] == ["rotor fit <= 1 x kron fit", "givens fit <= 1.5 x rotor fit"]
    assert answers[0]["fit_ratio"] == pytest.approx(by["rotor"]["fit_seconds"] / by["kron"]["fit_seconds"])
    assert answers[1]["fit_ratio"] == pytest.approx(by["givens"]["fit_seconds"] / by["rotor"]["fit_seconds"])
    out = capsys.readouterr().out
    assert "| question |" in out and "capture s (wall)" in out


def test_child_command_carries_every_setting(bench):
    parser = bench.build_parser()
    args = parser.parse_args(["--model", "/some/model", "--layer", "3", "--steps", "5", "--eval-every", "4",
                              "--train-windows", "2", "--valid-windows", "1", "--budget", "0.02", "--hidden", "128",
                              "--repeats", "3", "--warmup", "1"])
    command = bench.child_command(args, "givens", 2, "/work/folder")
    again = parser.parse_args(command[2:])
    assert again.child == ["givens", "2"] and again.work == "/work/folder"
    for name in ("model", "layer", "steps", "eval_every", "train_windows", "valid_windows", "budget", "hidden",
                 "repeats", "warmup"):
        assert getattr(again, name) == getattr(args, name), name
    assert parser.parse_args(bench.child_command(parser.parse_args([]), "kron", 1, "/w")[2:]).budget is None


def _row(kind, threads, fit, step):
    return {"kind": kind, "method": kind, "size": "-", "threads": threads, "parameters": 10, "share": 0.01,
            "steps": 4 if step else 0, "fit_seconds": fit, "fit_cpu_seconds": fit, "step_seconds": step,
            "peak_rss_bytes": 2**20}


def test_tables_take_ratios_at_the_same_thread_count(bench):
    rows = [_row("rotor", 1, 3.0, 0.5), _row("kron", 1, 2.0, 0.25), _row("givens", 1, 4.0, 1.0),
            _row("lr-cf", 1, 1.0, None), _row("rotor", 2, 1.0, 0.2), _row("kron", 2, 4.0, 0.8)]
    answers = bench.answers(rows)
    assert [(a["question"], a["threads"], a["holds"]) for a in answers] == [
        ("rotor fit <= 1 x kron fit", 1, False), ("givens fit <= 1.5 x rotor fit", 1, True),
        ("rotor fit <= 1 x kron fit", 2, True)]  # no Givens row at 2 threads: no answer there
    assert answers[0]["fit_ratio"] == pytest.approx(1.5) and answers[0]["step_ratio"] == pytest.approx(2.0)
    assert answers[1]["fit_ratio"] == pytest.approx(4 / 3) and answers[2]["fit_ratio"] == pytest.approx(0.25)
    lines = bench.table(rows).splitlines()
    assert "| rotor | - | 1 | 10 | 1.00 | 4 | 3.00 | 3.00 | 0.500 | 1.50x | 2.00x | 1 |" in lines
    assert "| rotor | - | 2 | 10 | 1.00 | 4 | 1.00 | 1.00 | 0.200 | 0.25x | 0.25x | 1 |" in lines
    assert "| lr-cf | - | 1 | 10 | 1.00 | - | 1.00 | 1.00 | - | 0.50x | - | 1 |" in lines


@pytest.mark.parametrize("argv,message", [
    (["--steps", "0"], "--steps must be at least 1"),
    (["--warmup", "-1"], "--warmup must be 0 or more"),
    (["--layer", "-2"], "--layer must be 0 or more"),
    (["--budget", "1.5"], "--budget must be a fraction in (0, 1]"),
    (["--methods", "rotor", "rotor"], "method rotor is given twice"),
])
def test_bad_settings_are_refused_before_anything_runs(bench, argv, message):
    with pytest.raises(SystemExit, match=message.replace("(", r"\(").replace(")", r"\)")):
        bench.main([*argv, "--no-write"])


@pytest.mark.parametrize("value", ["0", "x", "-1"])
def test_thread_counts_are_counts_or_auto(bench, value, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--threads", value, "--no-write"])
    assert "expected a thread count of at least 1 or 'auto'" in capsys.readouterr().err
    assert bench.build_parser().parse_args(["--threads", "1", "auto"]).threads == [1, "auto"]


def test_threads_auto_fits_under_the_governor_and_removes_it(bench, tmp_path):
    from galinear.optim import threads as thread_policy

    folder = tiny_model_folder(tmp_path / "model", layers=2)
    rows = bench.main(["--quick", "--no-write", "--in-process", "--model", folder, "--layer", "1", "--threads",
                          "auto", "--methods", "kron", "--hidden", "64"])
    fit = rows[-1]
    assert fit["threads"] == "auto" and fit["steps"] == 2 and fit["chosen"].startswith("threads")
    assert thread_policy.active() is None
