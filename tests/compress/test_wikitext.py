"""The WikiText-2 measure: the packaged split and its checksum, the token cache, and the windowed ln PPL
against a token-by-token computation (tiny models, short windows)."""
import hashlib
import json
import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study  # noqa: E402
from galinear.lm import wikitext  # noqa: E402
from galinear.lm.perplexity import stream_log_perplexity  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, random_text, reference_log_perplexity, tiny_llama  # noqa: E402


def test_packaged_split_matches_its_checksum_and_notice():
    path = wikitext.data_path()
    with open(path, "rb") as handle:
        raw = handle.read()
    assert len(raw) == 1_290_547 and hashlib.sha256(raw).hexdigest() == wikitext.SHA256
    text = wikitext.read_file()
    assert "\r" not in text and text.startswith(" = Robert Boulter = \n")
    notice = open(os.path.join(os.path.dirname(path), "README.md"), encoding="utf-8").read()
    assert wikitext.SHA256 in notice and "CC BY-SA 3.0" in notice and "GFDL" in notice


def test_damaged_or_missing_file_is_refused_with_the_fix(tmp_path):
    raw = bytearray(open(wikitext.data_path(), "rb").read())
    raw[1000] ^= 1
    damaged = tmp_path / "wiki.test.raw"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="damaged or changed.*SHA-256.*reinstall galinear"):
        wikitext.read_file(str(damaged))
    with pytest.raises(ValueError, match="not found.*--wikitext off"):
        wikitext.read_file(str(tmp_path / "nothing.raw"))
    with pytest.raises(ValueError, match="source must be one of"):
        wikitext.check_source("wiki")


def test_the_split_is_never_calibration_text(tmp_path):
    copy = tmp_path / "copy.raw"
    shutil.copyfile(wikitext.data_path(), copy)
    with pytest.raises(ValueError, match="is the WikiText-2 test split"):
        wikitext.check_not_wikitext([str(copy)])
    other = tmp_path / "notes.txt"
    other.write_text(random_text(3000))
    wikitext.check_not_wikitext([str(other)])  # any other text passes
    config = tiny_config(tmp_path / "run", datasets=("copy",), text_files=(("copy", str(copy)),))
    with pytest.raises(ValueError, match="calibrating on it would leak"):
        Study(config, texts=None)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 400), length=st.integers(2, 64), bos=st.booleans())
def test_windows_cover_every_token_once(n, length, bos):
    b = 7 if bos else None
    if n < (1 if bos else 2):
        with pytest.raises(ValueError) if n < 1 else _nothing():
            bounds = wikitext.window_bounds(n, length, b)
            assert bounds == []
        return
    bounds = wikitext.window_bounds(n, length, b)
    covered = np.concatenate([np.arange(s, e) for s, e in bounds])
    tail = n - len(covered)  # only a last window that would predict nothing is dropped
    assert np.array_equal(covered, np.arange(n - tail)) and tail in (0, 1) and (tail == 0 or not bos)
    assert all(e - s == length for s, e in bounds[:-1]) and 0 < bounds[-1][1] - bounds[-1][0] <= length


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-11)])
@pytest.mark.parametrize("bos", [None, 63])
def test_windowed_log_ppl_equals_token_by_token(dtype, tol, bos):
    """Every window scored in one forward == each predicted token scored from its own prefix."""
    model = tiny_llama(layers=2, seed=5, dtype=dtype)
    ids = np.asarray(CharTokenizer()(random_text(90, 4))["input_ids"], dtype=np.int64)
    length = 16
    res = stream_log_perplexity(model, ids, length, bos)
    windows = len(wikitext.window_bounds(len(ids), length, bos))
    assert res["windows"] == windows == -(-len(ids) // length)
    assert res["tokens"] == len(ids) - (0 if bos is not None else windows)  # every token but each window's first
    cut = [ids[s:s + length] for s in range(0, len(ids), length)]  # consecutive windows, the last shorter
    direct = reference_log_perplexity(model, [(w if bos is None else np.r_[bos, w], 1) for w in cut])
    assert abs(res["log_ppl"] - direct) <= tol * max(1.0, abs(direct))
    assert abs(res["nll_sum"] / res["tokens"] - res["log_ppl"]) < 1e-15
    # an independent float64 computation, window by window with torch's cross entropy
    total, count = 0.0, 0
    for s, e in wikitext.window_bounds(len(ids), length, bos):
        w = ids[s:e] if bos is None else np.concatenate([[bos], ids[s:e]])
        with torch.no_grad():
            logits = model(input_ids=torch.as_tensor(w)[None]).logits[0].double()
        total += float(torch.nn.functional.cross_entropy(logits[:-1], torch.as_tensor(w[1:]), reduction="sum"))
        count += len(w) - 1
    assert abs(total / count - res["log_ppl"]) <= tol * max(1.0, abs(direct))


def test_window_length_follows_the_model_context():
    model = tiny_llama(layers=1)
    assert model.config.max_position_embeddings == 128
    assert wikitext.window_length(model, 2048) == 128
    assert wikitext.window_length(model, 2048, bos=1) == 127
    assert wikitext.window_length(model, 64) == 64
    with pytest.raises(ValueError, match="integer >= 2"):
        wikitext.window_length(model, 1)


def test_token_ids_are_cached_per_tokenizer(tmp_path, monkeypatch):
    from galinear.lm import windows

    text = random_text(5000, 9)
    ids = wikitext.token_ids(CharTokenizer(), text, str(tmp_path))
    assert np.array_equal(ids, CharTokenizer()(text)["input_ids"])
    files = os.listdir(tmp_path)
    assert len(files) == 1

    def no_tokenising(*args, **kwargs):
        raise AssertionError("the cached ids should be used")

    monkeypatch.setattr(windows, "tokenize", no_tokenising)
    assert np.array_equal(wikitext.token_ids(CharTokenizer(), text, str(tmp_path)), ids)
    monkeypatch.undo()
    other = wikitext.token_ids(CharTokenizer(vocab=50), text, str(tmp_path))  # another tokenizer: another file
    assert len(os.listdir(tmp_path)) == 2 and not np.array_equal(other, ids)
    with open(tmp_path / files[0], "r+b") as handle:  # a damaged cache is rebuilt
        handle.write(b"garbage!")
    assert np.array_equal(wikitext.token_ids(CharTokenizer(), text, str(tmp_path)), ids)


def test_study_reports_wikitext_first(tmp_path, tiny, monkeypatch):
    """With the measure on, the original and every compressed model are scored on the split (here a
    short stand-in text so the tiny test runs fast), and the report names it first."""
    short = random_text(700, 11)
    monkeypatch.setattr(wikitext, "read_file", lambda path=None: short)
    config = tiny_config(tmp_path / "run", datasets=("a",), layer_sets=((1,),), methods=("lr1",), wikitext="file",
                         wikitext_window=40)
    study = Study(config, tiny, texts=TEXTS)
    assert study.eval_datasets == ["wikitext2", "a"] and study.wikitext.window == 40
    entries = study.run()["entries"]
    original = entries["original|wikitext2"]
    ids = np.asarray(CharTokenizer()(short)["input_ids"])
    assert original["tokens"] == len(ids) - len(wikitext.window_bounds(len(ids), 40)) and original["window"] == 40
    assert abs(original["log_ppl"] - stream_log_perplexity(tiny.model, ids, 40)["log_ppl"]) < 1e-12
    compressed = [e for k, e in entries.items() if k.endswith("|wikitext2") and e["method"] == "lr1"]
    assert len(compressed) == 1 and compressed[0]["log_ppl"] != original["log_ppl"]
    table = open(tmp_path / "run" / "results.md", encoding="utf-8").read()
    assert "ln PPL WikiText-2 test | ln PPL a" in table and "non-overlapping windows of 40 tokens" in table
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["wikitext"]["window"] == 40
    # off: the texts only
    off = Study(tiny_config(tmp_path / "off", datasets=("a",), layer_sets=((1,),), methods=("lr1",)), tiny, texts=TEXTS)
    assert off.eval_datasets == ["a"]
