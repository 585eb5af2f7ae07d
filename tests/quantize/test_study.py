"""The study behind ``galinear quantize`` end to end on a tiny saved Llama: its rows, its resume, and
finished rows scored again (the accuracy column or more WikiText-2 windows added to a finished
study) without training any rotation again."""
import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lm_eval", reason="lm-eval is not installed: pip install galinear[eval]")

from galinear.quantize.config import QuantizeConfig  # noqa: E402
from galinear.quantize.study import _rescored, run  # noqa: E402
from galinear.testing.folders import tiny_model_folder  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tiny_model_folder(tmp_path_factory.mktemp("model"))
    # one token a character: the next-sentence items need more positions than the tiny model's 128
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    config["max_position_embeddings"] = 2048
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    return path


def _config(folder, out, **changes):
    settings = dict(model=folder, wbits=4, abits=8, kvbits=8, rotations=("none", "hadamard", "rotor"), seeds=(0,),
                    steps=2, lr=0.01, tokens_per_step=16, calib_windows=2, window=32, wikitext_windows=2,
                    wikitext_window=32, heldout_windows=1, accuracy_items=0, threads=1, out_dir=str(out),
                    progress=False)
    return QuantizeConfig(**{**settings, **changes})


def _key(row):
    return row["family"], row["seed"]


def test_finished_rows_are_scored_again_without_training_again(folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    out = tmp_path / "study"
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:  # the study runs at its threads=1 and gives the process back its own count
        first = {_key(r): r for r in run(_config(folder, out), log=lambda line: None)["rows"]}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert list(first) == [("float (not quantized)", None), ("none", 0), ("hadamard", 0), ("rotor", 0)]
    assert first[("rotor", 0)]["training"]["steps"] == 2 and all(r["acc"] is None for r in first.values())
    # every row names where it was made: a learned rotation made on another CPU differs (study.machine)
    assert all(r["machine"]["threads"] == 1 and r["machine"]["torch"] == torch.__version__
               and r["machine"]["cpu_capability"] for r in first.values())
    checkpoints = {name: (out / "calibration" / name).read_bytes() for name in os.listdir(out / "calibration")}
    assert list(checkpoints) == ["rotor-distill-w4a8kv8-s0.safetensors"]

    lines = []
    second = run(_config(folder, out, accuracy_items=3), log=lines.append)
    assert not [line for line in lines if "warning" in line], lines
    rows = {_key(r): r for r in second["rows"]}
    assert list(rows) == list(first)
    for key, row in rows.items():
        before = first[key]
        # the model made again is the model first made: the same numbers to the last bit
        assert row["wikitext_ln_ppl"] == before["wikitext_ln_ppl"] and row["heldout_ln_ppl"] == before["heldout_ln_ppl"]
        assert 0.0 <= row["acc"] <= 1.0 and 0.0 <= row["acc_norm"] <= 1.0
        assert row["scored"] == {"wikitext_windows": 2, "accuracy_items": 3}
        assert row["rescored_from"] == {"wikitext_windows": 2, "accuracy_items": 0}
        # the calibration is the first run's: its time and its training record are kept
        assert row.get("calibration_seconds") == before.get("calibration_seconds")
        assert row.get("training") == before.get("training")
    assert {name: (out / "calibration" / name).read_bytes() for name in checkpoints} == checkpoints
    assert "| rotor | 0 |" in second["table"] and "| - |" not in second["table"].split("| rotor | 0 |")[1][:60]

    # the same scoring again: every row is read back, nothing is made again
    lines = []
    third = run(_config(folder, out, accuracy_items=3), log=lines.append)
    assert third["rows"] == second["rows"] and sum("(from " in line for line in lines) == 3

    # more windows: scored again, and the number moves with the windows
    more = {_key(r): r for r in run(_config(folder, out, wikitext_windows=3), log=lambda line: None)["rows"]}
    assert more[("rotor", 0)]["wikitext_ln_ppl"] != first[("rotor", 0)]["wikitext_ln_ppl"]
    assert more[("rotor", 0)]["acc"] is None

    # a rerun asking for fewer rows keeps the others in the file, each with how it was scored
    fewer = run(_config(folder, out, rotations=("hadamard",), wikitext_windows=3), log=lambda line: None)
    assert [_key(r) for r in fewer["rows"]] == [("float (not quantized)", None), ("hadamard", 0)]
    with open(out / "results.json") as f:
        kept = {_key(r): r for r in json.load(f)["rows"]}
    assert set(kept) == set(first) and kept[("rotor", 0)] == more[("rotor", 0)]

    # a setting that changes how the models are made is still refused
    with pytest.raises(ValueError, match=r"other settings \(steps differ\)"):
        run(_config(folder, out, steps=3), log=lambda line: None)


def test_a_row_made_again_elsewhere_names_both_machines():
    here = {"torch": "2.13.0+cpu", "cpu": "B", "cpu_capability": "AVX512", "threads": 2}
    there = {**here, "cpu": "A", "cpu_capability": "AVX2"}
    training = {"steps": 12, "resumed_from": 12, "history": [1.0]}
    old = {"family": "rotor", "seed": 0, "wikitext_ln_ppl": 4.75, "scored": {"wikitext_windows": 6},
           "calibration_seconds": 40.0, "training": {"steps": 12, "resumed_from": 0}, "machine": there}
    new = {"family": "rotor", "seed": 0, "wikitext_ln_ppl": 4.85, "scored": {"wikitext_windows": 6},
           "calibration_seconds": 1.0, "training": training, "machine": here}
    lines = []
    row = _rescored(old, dict(new), lines.append)
    assert row["calibrated_on"] == there and row["machine"] == here and row["calibration_seconds"] == 40.0
    assert len(lines) == 1 and "4.85" in lines[0] and "'AVX2'" in lines[0] and "'AVX512'" in lines[0]
    # the same machine: the warning says only that the number moved
    lines = []
    _rescored({**old, "machine": here}, dict(new), lines.append)
    assert len(lines) == 1 and "made before on" not in lines[0]
    # the same number: nothing to say
    lines = []
    _rescored({**old, "wikitext_ln_ppl": 4.85}, dict(new), lines.append)
    assert lines == []
