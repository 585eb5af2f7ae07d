"""--wikitext-windows: a stated subset of the WikiText-2 windows, spread evenly over the split,
scored exactly as the whole split is, never mistaken for the whole split in a report or a cache."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study  # noqa: E402
from galinear.compress.study.config import check  # noqa: E402
from galinear.lm import wikitext  # noqa: E402
from galinear.lm.models import LoadedModel  # noqa: E402
from galinear.lm.perplexity import stream_log_perplexity  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, random_text, tiny_llama  # noqa: E402


@settings(max_examples=80, deadline=None)
@given(total=st.integers(1, 300), count=st.integers(1, 320))
def test_spread_picks_evenly_spaced_windows_first_and_last_included(total, count):
    bounds = [(i * 10, i * 10 + 10) for i in range(total)]
    picked = wikitext.spread(bounds, count)
    if count >= total:
        assert picked == bounds
        return
    index = [bounds.index(b) for b in picked]
    assert index == sorted(set(index)) and len(index) == count  # distinct, in order, exactly count
    assert index[0] == 0 and (count == 1 or index[-1] == total - 1)
    gaps = np.diff(index)
    assert count < 3 or gaps.max() - gaps.min() <= 1  # as even as integers allow


def test_spread_refuses_a_bad_count_and_keeps_all_for_none():
    bounds = [(0, 4), (4, 8), (8, 9)]
    assert wikitext.spread(bounds, None) == bounds
    for bad in (0, -2, True):
        with pytest.raises(ValueError, match="positive integer"):
            wikitext.spread(bounds, bad)


def test_subset_log_ppl_is_the_pooled_nll_of_the_chosen_windows():
    model = tiny_llama(layers=2, seed=3, dtype=torch.float64)
    ids = np.asarray(CharTokenizer()(random_text(200, 6))["input_ids"], dtype=np.int64)
    length = 16
    every = wikitext.window_bounds(len(ids), length)
    res = stream_log_perplexity(model, ids, length, windows=4)
    assert res["windows"] == 4 and res["of"] == len(every)
    total, count = 0.0, 0
    for s, e in wikitext.spread(every, 4):  # independent: torch's cross entropy window by window
        w = torch.as_tensor(ids[s:e])
        with torch.no_grad():
            logits = model(input_ids=w[None]).logits[0]
        total += float(torch.nn.functional.cross_entropy(logits[:-1], w[1:], reduction="sum"))
        count += len(w) - 1
    assert res["tokens"] == count and abs(res["log_ppl"] - total / count) < 1e-11
    whole = stream_log_perplexity(model, ids, length)
    assert whole["windows"] == whole["of"] == len(every) and whole["log_ppl"] != res["log_ppl"]


def test_study_says_it_scored_a_subset_and_never_reuses_another_subset(tmp_path, tiny, monkeypatch):
    short = random_text(900, 12)
    monkeypatch.setattr(wikitext, "read_file", lambda path=None: short)
    config = tiny_config(tmp_path / "run", datasets=("a",), layer_sets=((1,),), methods=("lr1",), wikitext="file",
                         wikitext_window=40, wikitext_windows=3)
    study = Study(config, tiny, texts=TEXTS)
    entries = study.run()["entries"]
    ids = np.asarray(CharTokenizer()(short)["input_ids"])
    every = wikitext.window_bounds(len(ids), 40)
    assert len(every) > 3
    original = entries["original|wikitext2"]
    assert original["windows"] == 3 and original["of"] == len(every)
    assert abs(original["log_ppl"] - stream_log_perplexity(tiny.model, ids, 40, windows=3)["log_ppl"]) < 1e-12
    table = open(tmp_path / "run" / "results.md", encoding="utf-8").read()
    assert f"a subset: 3 of the {len(every)} windows" in table and "not the standard measure" in table
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["wikitext"]["windows"] == 3 and summary["wikitext"]["of"] == len(every)
    # the same folder with the whole split is another study: refused (galinear.compress.study.folders) ...
    config.wikitext_windows = None
    with pytest.raises(ValueError, match="holds the results of another study .*wikitext_windows 3 there, null here"):
        Study(config, tiny, texts=TEXTS)
    # ... and in a folder without a study record (an older galinear's) the subset's numbers are not taken for it
    (tmp_path / "run" / "study.json").unlink()
    again = Study(config, tiny, texts=TEXTS).run()["entries"]["original|wikitext2"]
    assert again["windows"] == len(every) and abs(
        again["log_ppl"] - stream_log_perplexity(tiny.model, ids, 40)["log_ppl"]) < 1e-12


def test_a_bad_window_count_is_refused_before_loading(tmp_path):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="wikitext_windows must be a positive integer"):
            check(tiny_config(tmp_path, wikitext_windows=bad))


def test_window_options_with_auto_and_no_file_are_refused(tmp_path, monkeypatch):
    """--wikitext auto skips the evaluation when the packaged split is missing; the options that size it
    would then do nothing, so they are refused before loading, naming the file and the fixes."""
    monkeypatch.setattr(wikitext, "data_path", lambda: str(tmp_path / "missing" / wikitext.FILE))
    tiny = LoadedModel(tiny_llama(), CharTokenizer(), "tiny")
    check(tiny_config(tmp_path, wikitext="auto"), tiny, TEXTS)  # nothing asked of the evaluation: it is skipped
    for options in ({"wikitext_windows": 4}, {"wikitext_window": 64}):
        with pytest.raises(ValueError, match="--wikitext auto it is skipped here: .*missing"):
            check(tiny_config(tmp_path, wikitext="auto", **options), tiny, TEXTS)
