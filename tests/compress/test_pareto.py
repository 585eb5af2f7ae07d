"""The size / quality front: the share of q/k/v kept, seeds grouped, the front against a brute-force
check, refused mixes of subsets and conflicting scores, the table, the plot and the command line."""
import json
import re

import numpy as np
import pytest

from galinear.compress.report import pareto

DENSE = 552960


def entry(tag, seed, log_ppl, layers=(12, 13, 14, 15), method="rotor", params=2607, dataset="wikitext2",
          windows=8, of=148, distill=False):
    e = {"method": method, "tag": tag, "seed": seed, "layers": list(layers), "dataset": dataset,
         "log_ppl": log_ppl, "params_per_layer": params, "dense_params_per_layer": DENSE, "windows": windows}
    if dataset == "wikitext2":
        e.update(of=of, window=2048, tokens=15220)
    if distill:
        e["distill"] = {"steps": 60, "valid_kl": 0.2}
    return e


def original(log_ppl=3.0866, dataset="wikitext2", windows=8, of=148):
    e = {"method": "original", "dataset": dataset, "log_ppl": log_ppl, "windows": windows, "tokens": 15220}
    if dataset == "wikitext2":
        e.update(of=of, window=2048)
    return e


def run(folder, entries):
    """A run folder holding results.json with ``entries`` (keyed as galinear compress keys them)."""
    folder.mkdir(parents=True, exist_ok=True)
    keyed = {}
    for e in entries:
        if e["method"] == "original":
            keyed[f"original|{e['dataset']}"] = e
        else:
            layers = "+".join(map(str, e["layers"]))
            keyed[f"{e['tag']}|s{e['seed']}|{layers}|{e['dataset']}"] = e
    (folder / "results.json").write_text(json.dumps({"entries": keyed, "fingerprint": "x", "key_parts": {}}))
    return str(folder)


def by_tag(points):
    return {p.tag: p for p in points}


def test_kept_for_one_four_and_all_layers(tmp_path):
    folder = run(tmp_path / "r", [
        original(),
        entry("one", 0, 3.2, layers=(15,), params=2607),
        entry("four", 0, 3.4, params=2607),
        entry("all", 0, 5.0, layers=range(30), params=2607),
    ])
    points = by_tag(pareto.collect([folder]))
    # 1 layer: (2607 + 29 * 552960) / (30 * 552960) = 16038447 / 16588800
    assert points["one"].kept == pytest.approx(16038447 / 16588800, rel=1e-12)
    # 4 layers: (4 * 2607 + 26 * 552960) / (30 * 552960) = 14387388 / 16588800
    assert points["four"].kept == pytest.approx(14387388 / 16588800, rel=1e-12)
    # all 30: 2607 / 552960
    assert points["all"].kept == pytest.approx(2607 / 552960, rel=1e-12)
    assert points["original"].kept == 1.0 and points["original"].log_ppl == 3.0866
    assert points["four"].objective == "qkv" and points["four"].layers == (12, 13, 14, 15)
    with pytest.raises(ValueError, match="layers-total"):
        pareto.collect([folder], layers_total=20)


def test_seeds_are_grouped_with_sample_std(tmp_path):
    scores = [3.4199, 3.4082, 3.4141]
    tag = "rotor-h512-conv256-v16-p4-lr0.05-objattention-kd60-v10-p4-lr0.001"
    folder = run(tmp_path / "r", [entry(tag, s, v, distill=True) for s, v in enumerate(scores)]
                 + [entry("kron-cf-t1", 0, 3.7, method="kron-cf", params=2496),
                    entry("rotor-h512-objlogits", 0, 3.6)])
    points = by_tag(pareto.collect([folder]))
    rotor = points[tag]
    assert rotor.seeds == (0, 1, 2)
    assert rotor.log_ppl == pytest.approx(np.mean(scores), abs=1e-15)
    assert rotor.std == pytest.approx(np.std(scores, ddof=1), abs=1e-15)
    assert rotor.distilled and rotor.objective == "attention" and rotor.name == "rotor + distillation"
    kron = points["kron-cf-t1"]
    assert kron.std is None and kron.objective == "qkv" and not kron.distilled and kron.name == "Kron*"
    assert points["rotor-h512-objlogits"].objective == "logits"


def test_other_datasets_are_skipped(tmp_path):
    folder = run(tmp_path / "r", [original(), original(2.6, dataset="wikipedia"), entry("a", 0, 3.5),
                                  entry("a", 0, 2.9, dataset="wikipedia")])
    points = by_tag(pareto.collect([folder]))
    assert points["a"].log_ppl == 3.5 and points["original"].log_ppl == 3.0866
    points = by_tag(pareto.collect([folder], dataset="wikipedia"))
    assert points["a"].log_ppl == 2.9 and points["original"].log_ppl == 2.6


def brute_force(points):
    def dominates(q, p):
        return q.kept <= p.kept and q.log_ppl <= p.log_ppl and (q.kept < p.kept or q.log_ppl < p.log_ppl)

    return [p for p in points if not any(dominates(q, p) for q in points if q is not p)]


def point(kept, log_ppl, i):
    return pareto.Point("rotor", "rotor", f"t{i}", "qkv", False, (1,), (0,), log_ppl, None, 10, kept,
                        (8, 148, 2048), ("r",))


def test_front_matches_a_brute_force_check_ties_included():
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(0, 25))
        # few distinct values so that ties on one axis or on both occur often
        kept = rng.integers(1, 6, size=n) / 5 if trial % 2 else rng.random(n)
        log_ppl = rng.integers(0, 6, size=n) / 2 if trial % 3 else rng.random(n)
        points = [point(float(k), float(v), i) for i, (k, v) in enumerate(zip(kept, log_ppl))]
        got = pareto.front(points)
        want = brute_force(points)
        assert {id(p) for p in got} == {id(p) for p in want}
        assert len(got) == len(want)
        assert [p.kept for p in got] == sorted(p.kept for p in got)


def test_front_keeps_exact_ties_and_drops_dominated():
    a, b, c, d = point(0.5, 3.0, 0), point(0.5, 3.0, 1), point(0.5, 3.2, 2), point(0.7, 3.0, 3)
    assert {p.tag for p in pareto.front([a, b, c, d])} == {"t0", "t1"}
    assert pareto.front([]) == []


def test_different_wikitext_subsets_are_refused_unless_allowed(tmp_path):
    eight = run(tmp_path / "eight", [original(), entry("a", 0, 3.5)])
    full = run(tmp_path / "full", [original(3.09, windows=148), entry("b", 0, 3.45, windows=148)])
    with pytest.raises(ValueError) as info:
        pareto.collect([eight, full])
    message = str(info.value)
    assert eight in message and full in message and "--wikitext-windows" in message
    assert "8 of 148 windows" in message and "148 of 148 windows" in message
    points = pareto.collect([eight, full], mixed_subsets=True)
    assert {p.tag for p in points} == {"original", "a", "b"}
    assert by_tag(points)["original"].log_ppl == 3.0866  # the first folder's
    assert "evaluated on" in pareto.table(points)


def test_conflicting_duplicates_and_originals_raise(tmp_path):
    first = run(tmp_path / "one", [original(), entry("a", 0, 3.5), entry("a", 1, 3.6)])
    same = run(tmp_path / "same", [original(), entry("a", 0, 3.5), entry("b", 0, 3.3)])
    points = by_tag(pareto.collect([first, same]))
    assert points["a"].seeds == (0, 1) and points["a"].log_ppl == pytest.approx(3.55) and "b" in points
    other = run(tmp_path / "other", [original(), entry("a", 0, 3.51)])
    with pytest.raises(ValueError, match=re.escape("disagree on entry 'a|s0|12+13+14+15|wikitext2'")) as info:
        pareto.collect([first, other])
    assert first in str(info.value) and other in str(info.value)
    moved = run(tmp_path / "moved", [original(3.2), entry("c", 0, 3.5)])
    with pytest.raises(ValueError, match="disagree on the original model"):
        pareto.collect([first, moved])


def test_table_marks_the_front_and_the_seed_spread(tmp_path):
    folder = run(tmp_path / "r", [original(), entry("good", 0, 3.40), entry("good", 1, 3.42),
                                  entry("bad", 0, 3.95, params=5000), entry("full", 0, 3.9, layers=range(30))])
    text = pareto.table(pareto.collect([folder]))
    rows = text.splitlines()[2:]
    assert text.startswith("| method | objective |") and len(rows) == 4
    cells = [row.strip("|").split(" | ") for row in rows]
    # by share kept, descending: original, bad (more parameters than good), good, full
    assert [c[-1].strip() for c in cells] == ["yes", "", "yes", "yes"]
    assert cells[0][:7] == [" original", "-", "-", "-", "-", "-", "100"] and cells[0][7] == "3.0866"
    assert cells[1][5:8] == ["5,000", "86.8", "3.9500"]
    assert cells[2][3:8] == ["12-15", "0,1", "2,607", "86.7", "3.4100 ± 0.0141"]
    assert cells[3][3:8] == ["0-29", "0", "2,607", "0.471", "3.9000"]
    assert "±" not in rows[1] and "±" not in rows[3]


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the front plot needs matplotlib")
    folder = run(tmp_path / "r", [original(), entry("a", 0, 3.40), entry("a", 1, 3.42),
                                  entry("a-kd", 0, 3.3, distill=True), entry("k", 0, 3.7, method="kron-cf")])
    path = pareto.plot(pareto.collect([folder]), str(tmp_path / "front.png"))
    with open(path, "rb") as handle:
        head = handle.read(8)
    assert head == b"\x89PNG\r\n\x1a\n" and (tmp_path / "front.png").stat().st_size > 1000


def test_command_line(tmp_path, capsys):
    missing = str(tmp_path / "nothing")
    with pytest.raises(SystemExit) as info:
        pareto.main([missing])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert missing in err and "no results.json" in err and "galinear compress --out" in err
    folder = run(tmp_path / "r", [original(), entry("a", 0, 3.4)])
    assert pareto.main([folder, "--md", str(tmp_path / "t.md")]) == 0
    out = capsys.readouterr().out
    assert "| rotor |" in out and (tmp_path / "t.md").read_text() == out
    with pytest.raises(SystemExit) as info:
        pareto.main([folder, "--dataset", "shakespeare"])
    assert info.value.code == 2 and "no shakespeare entries" in capsys.readouterr().err


def test_damaged_entries_are_named(tmp_path):
    bad = entry("a", 0, 3.4)
    del bad["params_per_layer"]
    folder = run(tmp_path / "r", [original(), bad])
    with pytest.raises(ValueError, match=re.escape("entry 'a|s0|12+13+14+15|wikitext2' lacks")):
        pareto.collect([folder])
    with pytest.raises(ValueError, match="finite log_ppl"):
        pareto.collect([run(tmp_path / "n", [entry("a", 0, float("nan"))])])


def test_per_layer_share_compares_budgets_at_one_layer_set(tmp_path):
    small = run(tmp_path / "s", [original(), entry("a", 0, 3.5, params=2_000, layers=[12, 13])])
    large = run(tmp_path / "l", [original(), entry("b", 0, 3.4, params=20_000, layers=[12, 13])])
    points = pareto.collect([small, large], per_layer=True)
    shares = {p.tag: p.kept for p in points}
    assert shares == {"original": 1.0, "a": 2_000 / DENSE, "b": 20_000 / DENSE}
    other = run(tmp_path / "o", [original(), entry("c", 0, 3.3, params=2_000, layers=[0, 1, 2])])
    with pytest.raises(ValueError, match="one layer set"):
        pareto.collect([small, other], per_layer=True)
    assert len(pareto.collect([small, other])) == 3


@pytest.mark.parametrize("field, value, message", [
    ("layers", [-1], "layers = [-1], not a non-empty list of layer indices >= 0"),
    ("layers", [1.5], "not a non-empty list of layer indices"),
    ("layers", [], "not a non-empty list of layer indices"),
    ("layers", [3, 3], "not a list of distinct layer indices"),
    ("params_per_layer", "1e400", "params_per_layer = inf, not an integer >= 0"),
    ("params_per_layer", 2607.5, "params_per_layer = 2607.5, not an integer >= 0"),
    ("seed", True, "seed = True, not an integer >= 0"),
    ("windows", [8], "windows = [8], not a count of windows"),
    ("windows", {"n": 8}, "windows = {'n': 8}, not a count of windows"),
    ("of", 0, "of = 0, not a count of windows"),
])
def test_impossible_entries_are_one_line_errors(tmp_path, capsys, field, value, message):
    """Values `galinear compress` never writes (a negative layer, 1e400 parameters, windows as a
    list or a mapping) are refused naming the field, not read as layer -1 or raised as OverflowError."""
    e = entry("a", 0, 3.4)
    e[field] = 123456789 if value == "1e400" else value
    folder = run(tmp_path / "r", [original(), e])
    path = tmp_path / "r" / "results.json"
    if value == "1e400":  # a number JSON reads as float infinity
        path.write_text(path.read_text().replace("123456789", "1e400"))
    with pytest.raises(SystemExit) as info:
        pareto.main([folder])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert message in err and "rerun `galinear compress`" in err


@pytest.mark.parametrize("kind, message", [("folder", "is a folder, not a regular file"),
                                           ("fifo", "is a FIFO (named pipe), not a regular file"),
                                           ("zero", "is a device, not a regular file"),
                                           ("dangling", "which does not exist")])
def test_a_results_json_that_is_not_a_file_is_named_as_such(tmp_path, capsys, kind, message):
    import os

    folder = tmp_path / "r"
    folder.mkdir()
    path = folder / "results.json"
    {"folder": lambda: path.mkdir(), "fifo": lambda: os.mkfifo(path), "zero": lambda: path.symlink_to("/dev/zero"),
     "dangling": lambda: path.symlink_to(tmp_path / "gone")}[kind]()
    with pytest.raises(SystemExit) as info:
        pareto.main([str(folder)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1 and message in err and "results.json" in err


def test_md_and_png_given_a_folder_are_refused_before_reading(tmp_path, capsys):
    folder = run(tmp_path / "r", [original(), entry("a", 0, 3.4)])
    for flag in ("--md", "--png"):
        with pytest.raises(SystemExit) as info:
            pareto.main([folder, flag, str(tmp_path)])
        err = capsys.readouterr().err
        assert info.value.code == 2 and f"{flag} {tmp_path} is a folder; give the file to write" in err
        assert ".tmp" not in err
