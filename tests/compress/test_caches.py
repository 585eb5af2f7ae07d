"""The caches of a study are data: a pickle in one runs no code, a damaged or partial file is
recomputed (or named, for a model the user asked for), an interrupted study leaves only files that
read back, and results are keyed by the model's content, never by its name."""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from galinear import _io
from galinear.compress import Study, load_compressed
from galinear.compress.storage import checkpoints
from galinear.testing.payloads import CodePayload, truncate_file, write_payload

ROOT = Path(__file__).resolve().parents[2]


def _small_study(out, tiny, **overrides):
    from galinear.testing.compression import tiny_config
    from galinear.testing.models import TEXTS

    settings = dict(datasets=("a",), layer_sets=((0, 2),), methods=("lr1",))
    settings.update(overrides)
    return Study(tiny_config(out, **settings), tiny, texts=TEXTS)


def _log_ppl(results):
    return {key: entry["log_ppl"] for key, entry in results["entries"].items()}


def _cache_files(study, folder):
    root = Path(study.work) / folder
    return sorted(p for p in root.rglob("*.safetensors"))


def test_compress_cache_payloads_are_recomputed_not_run(tmp_path, tiny, capsys):
    study = _small_study(tmp_path / "run", tiny)
    reference = study.run(report=False)
    captures, fits = _cache_files(study, "captures"), _cache_files(study, "fits")
    assert captures and fits
    write_payload(captures[0], tmp_path / "marker")
    write_payload(fits[0], tmp_path / "marker", kind="pickle")
    os.remove(tmp_path / "run" / "results.json")  # so that the units are needed again
    again = _small_study(tmp_path / "run", tiny).run(report=False)
    assert not (tmp_path / "marker").exists()
    err = capsys.readouterr().err
    assert str(captures[0]) in err and str(fits[0]) in err and "recomputing this unit" in err
    assert _log_ppl(again) == _log_ppl(reference)
    assert _io.load_state(captures[0]) and _io.load_state(fits[0])  # rewritten in the safe format


def test_fit_load_removes_unreadable_cache(tmp_path, capsys):
    path = tmp_path / "unit.pt"
    write_payload(path, tmp_path / "marker")
    assert checkpoints.load(str(path)) is None
    assert not path.exists() and not (tmp_path / "marker").exists()
    assert "recomputing" in capsys.readouterr().err


def test_closed_form_moments_cache_damaged_or_with_objects_is_recomputed(tmp_path, capsys):
    from galinear.compress.fitting.closed_form import SecondMoments

    moments = SecondMoments(4)
    moments.update(np.arange(12.0).reshape(3, 4))
    path = tmp_path / "moments.npz"
    moments.save(str(path))
    back = SecondMoments.load(str(path))
    assert back.n == 3 and np.array_equal(back.sxx, moments.sxx)
    truncate_file(path)
    assert SecondMoments.load(str(path)) is None and not path.exists()
    np.savez(path, n=np.int64(1), same=np.int8(1), sx=np.array([CodePayload(tmp_path / "marker")], dtype=object),
             sxx=np.zeros((1, 1)), so=np.zeros(1), sxo=np.zeros((1, 1)), soo=np.zeros((1, 1)))
    assert SecondMoments.load(str(path)) is None and not path.exists()
    assert not (tmp_path / "marker").exists()
    assert capsys.readouterr().err.count("recomputing this unit") == 2


def test_load_compressed_refuses_payload(tmp_path, tiny):
    from galinear.testing.models import tiny_llama

    path = tmp_path / "models" / "rotor.pt"
    for kind in ("torch", "pickle"):
        write_payload(path, tmp_path / "marker", kind)
        with pytest.raises(ValueError, match=r"rotor\.pt.*could run code.*rerun"):
            load_compressed(tiny_llama(), str(path))
        assert not (tmp_path / "marker").exists()
    with pytest.raises(FileNotFoundError, match="no such compressed model"):
        load_compressed(tiny_llama(), str(tmp_path / "missing.pt"))


def test_truncated_compress_cache_is_recomputed(tmp_path, tiny, capsys):
    study = _small_study(tmp_path / "run", tiny)
    reference = study.run(report=False)
    fits = _cache_files(study, "fits")
    captures = _cache_files(study, "captures")
    truncate_file(fits[-1])
    truncate_file(captures[-1], keep=0.9)
    (tmp_path / "run" / "results.json").write_text('{"fingerprint": "')  # cut off as well
    again = _small_study(tmp_path / "run", tiny).run(report=False)
    err = capsys.readouterr().err
    assert f"{fits[-1]}: damaged or truncated" in err and f"{captures[-1]}: damaged or truncated" in err
    assert "recomputing this unit" in err
    assert _log_ppl(again) == _log_ppl(reference)


def test_compressed_model_folder_with_a_pickle_does_not_run_it(tmp_path, tiny):
    """galinear.compress.load reads JSON and safetensors only: a pickle in their place is an error."""
    from galinear.compress import MethodSpec, build_module, load, save
    from galinear.testing.models import tiny_llama

    replacements = {(1, "q_proj"): build_module(MethodSpec("lr1"), 32, 32)}
    folder = save(str(tmp_path / "saved"), tiny.model, replacements, MethodSpec("lr1"), name="tiny-llama")
    tensors = next(p for p in Path(folder).iterdir() if p.suffix == ".safetensors")
    for kind in ("torch", "pickle"):
        write_payload(tensors, tmp_path / "marker", kind)
        with pytest.raises(Exception):  # noqa: B017  (the safetensors reader refuses the file)
            load(folder, tiny_llama())
        assert not (tmp_path / "marker").exists()


def test_truncated_compressed_model_names_file(tmp_path, tiny):
    study = _small_study(tmp_path / "run", tiny)
    study.run(report=False)
    from galinear.testing.models import tiny_llama

    saved = next((tmp_path / "run" / "models").glob("*/replacements.safetensors"))
    truncate_file(saved)
    with pytest.raises(ValueError, match=re.escape(saved.name) + ": damaged or truncated.*rerun"):
        load_compressed(tiny_llama(), str(saved.parent))


_INTERRUPTED_STUDY = """
import sys
sys.path.insert(0, {root!r})
from galinear.compress import Study
from galinear.lm.models import LoadedModel
from galinear.testing.compression import tiny_config
from galinear.testing.models import TEXTS, CharTokenizer, tiny_llama
config = tiny_config({out!r}, datasets=("a",), layer_sets=((0, 2),), methods=("lr1",), seeds=(0, 1, 2),
                     epochs=400.0)
# Ctrl-C as at a terminal: a test run started in the background (`make test &`, a CI runner)
# has SIGINT ignored, and a child inherits that; restore the default handler and unblock it
import signal
print("inherited SIGINT", signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []),
      file=sys.stderr, flush=True)
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGINT}})
print("started", flush=True)
Study(config, LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama"), texts=TEXTS).run()
"""


# SIGKILL (nothing runs on the way out) in `make test`; SIGINT (the handlers run) in `make test-slow`
@pytest.mark.parametrize("signal_number", [pytest.param(signal.SIGINT, marks=pytest.mark.slow), signal.SIGKILL],
                         ids=["SIGINT", "SIGKILL"])
def test_interrupted_compress_leaves_nothing_half_written(tmp_path, tiny, signal_number):
    """Ctrl-C (or kill -9) in the middle of a study: every file on disk reads back and a rerun finishes.

    After Ctrl-C no temporary file is left either; after kill -9 one may be (never read).
    """
    out = tmp_path / "run"
    script = _INTERRUPTED_STUDY.format(root=str(ROOT), out=str(out))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, cwd=str(tmp_path))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:  # wait until units are being written
            # 18 fits of about 0.2 s each (at 40 epochs the whole study took 0.5 s, so the signal
            # could arrive after the last fit): two written, most of the work remains
            if len(list((out / "cache").rglob("fits/**/*.safetensors"))) >= 2:
                break
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal_number)
        # a Ctrl-C that lands in a finaliser is printed and ignored by Python; press it again
        # while the study still runs, as a user would
        while signal_number == signal.SIGINT and time.monotonic() < deadline:
            try:
                process.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                process.send_signal(signal_number)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0, err.decode(errors="replace")[-3000:]
    if signal_number == signal.SIGINT:
        assert b"KeyboardInterrupt" in err
        assert [p for p in out.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")] == []
    for path in (out / "cache").rglob("*.safetensors"):
        _io.load_state(path)  # raises if half written
    for path in out.rglob("*.json"):
        _io.load_json(path)
    resumed = _small_study(out, tiny, methods=("lr1",), seeds=(0, 1, 2), epochs=400.0).run(report=False)
    assert len(resumed["entries"]) == 1 + 3  # the original and one method with three seeds


# ------------------------------------------------------------------------------ cache keys
def _checkpoint(seed_of_the_rest):
    """A tiny Llama named like a fine-tune checkpoint: the embedding and norms of seed 0 (frozen in
    fine-tuning), every other weight drawn from ``seed_of_the_rest``."""
    from galinear.lm.models import LoadedModel
    from galinear.testing.models import CharTokenizer, tiny_llama

    model, rest = tiny_llama(), tiny_llama(seed=seed_of_the_rest)
    with torch.no_grad():
        for (name, p), (_, q) in zip(model.named_parameters(), rest.named_parameters()):
            if "embed" not in name and "norm" not in name:
                p.copy_(q)
    return LoadedModel(model, CharTokenizer(), "checkpoint-500")


def test_two_checkpoints_with_the_same_name_and_embedding_never_share_results(tmp_path, capsys):
    """runA/checkpoint-500 then runB/checkpoint-500 under the same --out: the second study reported the
    first one's numbers, "original" row included, without a word."""
    run_a = _small_study(tmp_path / "out", _checkpoint(1)).run(report=False)
    capsys.readouterr()
    run_b = _small_study(tmp_path / "out", _checkpoint(2)).run(report=False)
    err = capsys.readouterr().err
    alone = _small_study(tmp_path / "alone", _checkpoint(2)).run(report=False)  # B in a folder of its own
    assert _log_ppl(run_b) == _log_ppl(alone)
    original = [k for k in run_a["entries"] if run_a["entries"][k]["method"] == "original"][0]
    assert run_a["entries"][original]["log_ppl"] != run_b["entries"][original]["log_ppl"]
    assert "results.json: its 2 results were computed with another model (weights or configuration)" in err
    assert "they are not reused" in err
    assert len(list((tmp_path / "out" / "cache").iterdir())) == 2  # one cache folder per model


def test_the_cache_key_is_the_content_not_the_name():
    from galinear.compress.storage import store
    from galinear.compress.study.config import StudyConfig
    from galinear.testing.models import CharTokenizer, tiny_llama

    model = tiny_llama()
    windows, config = {}, StudyConfig()
    key = store.fingerprint(model, CharTokenizer(), windows, config)
    assert store.fingerprint(tiny_llama(), CharTokenizer(), windows, config) == key  # same content, another object
    changed = tiny_llama()
    with torch.no_grad():
        changed.model.layers[1].self_attn.o_proj.weight[3, 4] += 1e-6
    assert store.fingerprint(changed, CharTokenizer(), windows, config) != key
    assert store.fingerprint(model, CharTokenizer(vocab=65), windows, config) != key
    assert store.fingerprint(model, CharTokenizer(), windows, StudyConfig(window=256)) != key
    with torch.no_grad():  # a model updated in place is hashed again, not taken from the memo
        model.model.layers[0].mlp.up_proj.weight.mul_(2)
    assert store.fingerprint(model, CharTokenizer(), windows, config) != key
    assert set(key.parts) == {"model", "tokenizer", "texts", "settings"}


def test_content_hash_streams_every_weight_against_a_reference():
    """models.content_hash against a from-scratch SHA-256 of the same canonical bytes."""
    import hashlib

    from galinear.lm import models
    from galinear.testing.models import tiny_llama

    model = tiny_llama(layers=1)
    h = hashlib.sha256(b"galinear-model-v1\0config\0" + models._canonical_config(model.config).encode())
    seen = {}
    for name, t in model.state_dict().items():
        h.update(f"\0{name}\0{tuple(t.shape)}\0float\0".encode())
        if t.data_ptr() in seen:
            h.update(f"alias of {seen[t.data_ptr()]}".encode())
            continue
        seen[t.data_ptr()] = name
        h.update(t.detach().float().numpy().tobytes())
    assert models.content_hash(model) == h.hexdigest()
    assert models.content_hash(model.to(torch.float64)) != h.hexdigest()  # float64 is hashed as float64
