"""Fits that stop on a validation plateau, learning curves, user texts, and the BOS convention."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study
from galinear.compress.fitting import converge
from galinear.data.text import load_text_file  # noqa: E402
from galinear.lm.perplexity import heldout_log_perplexity  # noqa: E402
from galinear.lm.windows import bos_token, split_windows  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, random_text, reference_log_perplexity, tiny_llama  # noqa: E402


class BosTokenizer(CharTokenizer):
    """A character tokenizer that, like Gemma's, wants a BOS token (id 63) in front."""

    add_bos_token = True
    bos_token_id = 63

    def __call__(self, text, add_special_tokens=False):
        ids = super().__call__(text)["input_ids"]
        return {"input_ids": ([63] if add_special_tokens else []) + ids}


class ProbedTokenizer(BosTokenizer):
    """No add_bos_token attribute: the convention is found by tokenising with and without specials."""

    add_bos_token = None


def test_fit_stops_on_a_plateau_and_keeps_the_best_parameters():
    torch.manual_seed(0)
    x = torch.randn(2000, 8)
    weight = torch.randn(3, 8)
    noise = torch.randn(2000, 8) * 0.0  # the target is exactly linear: Adam converges, then plateaus
    module = torch.nn.Linear(8, 3, bias=False)
    valid = torch.randn(300, 8)
    stats = converge.fit_until_converged(module, x, x + noise, weight, valid_inputs=valid, valid_target_inputs=valid,
                                         lr=0.05, max_steps=3000, eval_every=10, patience=3, batch_size=64)
    curve = np.array(stats["curve"])
    assert stats["stopped"] == "plateau" and stats["steps"] < 3000
    assert curve[0, 0] == 0 and all(s % 10 == 0 for s in curve[1:, 0])
    assert stats["valid_mse"] == pytest.approx(curve[:, 1].min())
    # the module holds the parameters of the best evaluation
    got = float(((valid @ module.weight.detach().T - valid @ weight.T) ** 2).mean())
    assert got == pytest.approx(stats["valid_mse"], rel=1e-5)
    assert stats["best_step"] == int(curve[curve[:, 1].argmin(), 0])


def test_fit_stops_at_the_budget():
    module = torch.nn.Linear(4, 2, bias=False)
    x = torch.randn(100, 4)
    stats = converge.fit_until_converged(module, x, x, torch.randn(2, 4), valid_inputs=x, valid_target_inputs=x,
                                         lr=1e-4, max_steps=7, eval_every=5, patience=50)
    assert stats["stopped"] == "max_steps" and stats["steps"] == 7 and [c[0] for c in stats["curve"]] == [0, 5, 7]


def test_study_until_converged_writes_learning_curves(tmp_path, tiny):
    config = tiny_config(tmp_path, methods=("lr1", "lr1-cf"), layer_sets=((1,),), datasets=("a",),
                         until_converged=True, max_steps=30, eval_every=5, patience=2)
    study = Study(config, tiny, texts=TEXTS)
    w = study.windows["a"]
    assert len(w.valid) and not (w.positions(w.valid) & w.positions(w.heldout))
    study.run()
    data = json.loads((tmp_path / "learning_curves.json").read_text())
    runs = {r["method"]: r for r in data["runs"]}
    assert set(runs) == {"lr1", "lr1-cf"}
    assert len(runs["lr1"]["curves"]["q_proj"]) >= 2 and len(runs["lr1-cf"]["curves"]["q_proj"]) == 1
    assert os.path.exists(tmp_path / "learning_curves.png")
    table = (tmp_path / "results.md").read_text()
    assert "LR1*" in table and "closed form" in table and "best step" in table


def test_validation_windows_do_not_change_the_split():
    tokens = np.arange(3000) % 50
    plain = split_windows(tokens, 32, 16, 0.2, seed=3, group=2, max_train=10, max_heldout=6)
    more = split_windows(tokens, 32, 16, 0.2, seed=3, group=2, max_train=10, max_heldout=6, max_valid=4)
    assert np.array_equal(plain.train, more.train) and np.array_equal(plain.heldout, more.heldout)
    assert len(more.valid) == 4 and not set(more.valid) & set(more.train)
    assert not (more.positions(more.valid) & more.positions(more.heldout))


# ---------------------------------------------------------------------------------------------- texts
def test_text_files(tmp_path):
    plain = tmp_path / "mine.txt"
    plain.write_text("hello world\n", encoding="utf-8")
    assert load_text_file(str(plain)) == "hello world\n"
    folder = tmp_path / "books"
    folder.mkdir()
    (folder / "b.txt").write_text("second", encoding="utf-8")
    (folder / "a.txt").write_text("first", encoding="utf-8")
    assert load_text_file(str(folder)) == "first\n\nsecond"
    records = tmp_path / "rows.jsonl"
    records.write_text('{"text": "one", "id": 1}\n\n{"text": "two"}\n', encoding="utf-8")
    assert load_text_file(str(records), "text") == "one\ntwo"
    with pytest.raises(ValueError, match="--text-field"):
        load_text_file(str(records))
    with pytest.raises(ValueError, match="no field 'body'"):
        load_text_file(str(records), "body")
    with pytest.raises(ValueError, match="not found"):
        load_text_file(str(tmp_path / "missing.txt"))


def test_text_option_split_is_leak_free(tmp_path, tiny):
    import argparse

    from galinear.commands import compress

    path = tmp_path / "story.txt"
    path.write_text(random_text(3000, 7), encoding="utf-8")
    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    args = parser.parse_args(["--text", str(path), "--layers", "1", "--methods", "lr1", "--baseline-fit", "both",
                              "--train-windows", "3", "--eval-windows", "2", "--window", "32", "--stride", "16",
                              "--out", str(tmp_path / "run"), "--fixed-steps", "--wikitext", "off"])
    config = compress.config_from_args(args)
    assert config.datasets == ("story",) and config.methods == ("lr1", "lr1-cf")
    assert config.text_files == (("story", str(path)),)
    config.progress = config.verbose = False
    config.group = 2
    study = Study(config, tiny)
    w = study.windows["story"]
    assert not (w.positions(w.train) & w.positions(w.heldout))
    study.run()
    text = (tmp_path / "run" / "results.md").read_text()
    assert "Wikitext" not in text and "story" in text  # the built-in texts are not named


# ---------------------------------------------------------------------------------------------- BOS
def test_bos_convention():
    assert bos_token(CharTokenizer()) is None
    assert bos_token(BosTokenizer()) == 63
    assert bos_token(ProbedTokenizer()) == 63


def test_windows_with_bos_score_every_heldout_token_once():
    model = tiny_llama(layers=2, seed=4)
    tokens = np.asarray(CharTokenizer()(TEXTS["a"])["input_ids"])
    w = split_windows(tokens, 24, 8, 0.3, seed=1, group=3, max_heldout=3, bos=63)
    ids = w.batch(w.heldout)
    assert ids.shape == (len(w.heldout), 25) and (ids[:, 0] == 63).all()
    assert np.array_equal(ids[:, 1:], np.stack([tokens[s:s + 24] for s in w.heldout]))
    res = heldout_log_perplexity(model, w)
    assert res["tokens"] == len(w.positions(w.heldout))  # with a BOS even a run's first token is scored
    reference = reference_log_perplexity(model, [(w.batch([s])[0], w.score_from(i)) for i, s in enumerate(w.heldout)])
    assert res["log_ppl"] == pytest.approx(reference, abs=1e-5)


def test_study_with_a_bos_tokenizer(tmp_path):
    from galinear.lm.models import LoadedModel

    loaded = LoadedModel(tiny_llama(), BosTokenizer(), "tiny-bos")
    study = Study(tiny_config(tmp_path, methods=("lr1", "lr1-cf"), layer_sets=((1,),), datasets=("a",)),
                  loaded, texts=TEXTS)
    assert study.windows["a"].bos == 63
    x, _ = study.captures.original(1)
    assert len(x) == len(study.windows["a"].train) * 33
    entries = study.run()["entries"]
    assert all(np.isfinite(e["log_ppl"]) for e in entries.values())


def test_run_name_of_a_gguf_path_is_not_doubled():
    from galinear.lm.sources import run_name

    assert run_name("/models/x.gguf") == "x.gguf"
    assert run_name("/models/x.gguf", "x.gguf") == "x.gguf"
    assert run_name("/models/folder", "x.gguf") == "folder-x.gguf"
    assert run_name("/models/folder/") == "folder"
