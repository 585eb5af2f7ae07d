"""Every bad input of docs/reliability.md, with the error it gets: the table as a test.

Each case is (id, call, exception type, regex of the message). The id is the first cell of its
row in docs/reliability.md (``test_every_case_is_in_the_docs`` keeps the two in step). Every call
must fail fast, before any long work: the refusals of impossible sizes come from estimates, so
each case takes milliseconds (a generous bound is asserted).
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from galinear import Algebra
from galinear._limits import TooLargeError
from galinear.cli import main
from galinear.data.idx import DatasetNotFoundError, IdxFormatError, load_dataset, read_idx, write_idx
from galinear.nn import RotorLinear, RotorNetwork
from galinear.nn.baselines import BlockHadamardLinear, LowRankLinear

DOCS = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"


class CommandFailed(Exception):
    """A `galinear` command exited with a non-zero status; the message is its stderr."""


def cli(*args):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse errors, sys.exit("message")
            code = exit_.code
            if isinstance(code, str):
                err.write(code)
                code = 1
    if code:
        raise CommandFailed(f"exit {code}: {err.getvalue()}")
    return out.getvalue()


def as_error(call):
    """Run ``call`` with warnings raised as errors (a warning must come before the long work)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def with_memory(nbytes, call):
    """Run ``call`` as if the host had ``nbytes`` of memory available."""
    with mock.patch("galinear._limits._host_available", return_value=nbytes):
        return call()


A4 = Algebra(4)
GiB = 2**30

# (id, call taking the folder of prepared files, exception, regex of the message)
API = [
    ("Algebra(signature=3)", lambda d: Algebra(signature=3), TypeError, r"tuple .*Algebra\(3\)"),
    ("Algebra(signature=None) and no p", lambda d: Algebra(), ValueError, r"needs a dimension"),
    ("Algebra(3, signature=(3,))", lambda d: Algebra(3, signature=(3,)), ValueError, r"not both"),
    ("Algebra(signature=(1, 2, 3, 4))", lambda d: Algebra(signature=(1, 2, 3, 4)), ValueError, r"\(p,\), \(p, q\) or \(p, q, r\)"),
    ("Algebra(-1)", lambda d: Algebra(-1), ValueError, r"non-negative integer, got -1"),
    ("Algebra(2.5)", lambda d: Algebra(2.5), TypeError, r"non-negative integer, got 2.5"),
    ("Algebra(21)", lambda d: Algebra(21), ValueError, r"dimension n = 21, above the maximum n = 20.*2\*\*20 float64 take 8 MiB"),
    ("Algebra(20).gp of dense multivectors", lambda d: Algebra(20).gp(np.ones((1, 2**20)), np.ones((1, 2**20))),
     TooLargeError, r"about \d+ s .*4\*\*n terms.*GALINEAR_ALLOW_SLOW=1"),
    ("gp with the wrong last axis", lambda d: A4.gp(np.ones(8), np.ones(16)), ValueError, r"last axis of length 2\*\*n = 16"),
    ("gp of batches that do not broadcast", lambda d: A4.gp(np.ones((2, 16)), np.ones((3, 16))), ValueError,
     r"batch shapes of a \(2,\) and b \(3,\) do not broadcast"),
    ("gp with NaN", lambda d: A4.gp(np.full(16, np.nan), np.ones(16)), ValueError, r"NaN or infinity"),
    ("gp of complex input", lambda d: A4.gp(np.ones(16) * 1j, np.ones(16)), TypeError, r"complex .*real float32 or float64"),
    ("gp of strings", lambda d: A4.gp(np.array(["a"] * 16), np.ones(16)), TypeError, r"expected a real float32 or float64"),
    ("gp(method='fast')", lambda d: A4.gp(np.ones(16), np.ones(16), method="fast"), ValueError, r"'auto', 'table', 'generated'"),
    ("grade(x, 5) in Cl(4)", lambda d: A4.grade(np.ones(16), 5), ValueError, r"integers in 0..4"),
    ("bivector of 5 coefficients in Cl(4)", lambda d: A4.bivector(np.ones(5)), ValueError, r"C\(n, 2\) = 6"),
    ("blade('e5') in Cl(4)", lambda d: A4.blade("e5"), ValueError, r"no blade named 'e5'"),
    ("inverse of 0", lambda d: A4.inverse(np.zeros(16)), ValueError, r"invertible versors"),
    ("exp of a non-bivector", lambda d: A4.exp(np.ones(16)), ValueError, r"must be a bivector.*alg.grade\(B, 2\)"),
    ("exp(method='simple') of e12 + e34", lambda d: A4.exp(A4.blade("e12") + A4.blade("e34"), method="simple"),
     ValueError, r"simple bivector.*method='decompose'"),
    ("log of a non-rotor", lambda d: A4.log(np.ones(16)), ValueError, r"unit rotor .*alg.exp\(B\)"),
    ("log of -1 in Cl(1)", lambda d: Algebra(1).log(-Algebra(1).scalar(1.0)), ValueError, r"no logarithm in Cl\(1\)"),
    ("decompose(method='qr')", lambda d: A4.decompose(A4.blade("e12"), method="qr"), ValueError, r"'exact' or 'power'"),
    ("decompose(method='power', tol=-1)", lambda d: A4.decompose(A4.blade("e12"), method="power", tol=-1.0),
     ValueError, r"tol must be a finite number >= 0"),
    ("decompose(method='power', max_iter=0)", lambda d: A4.decompose(A4.blade("e12"), method="power", max_iter=0),
     ValueError, r"max_iter must be an integer >= 1"),
    ("decompose(method='power', steps=3)", lambda d: A4.decompose(A4.blade("e12"), method="power", steps=3),
     TypeError, r"takes start, tol, max_iter and fallback, got \['steps'\]"),
    ("sandwich_matrix of 3,000 rotors in Cl(10)", lambda d: Algebra(10).sandwich_matrix(
        np.tile(Algebra(10).scalar(1.0), (3000, 1))), MemoryError, r"would need 70.3 GiB .*fewer rotors per call"),
    ("sandwich_matrix of batches that do not broadcast", lambda d: A4.sandwich_matrix(
        np.tile(A4.scalar(1.0), (3, 1)), np.tile(A4.scalar(1.0), (2, 1))), ValueError, r"R \(3,\) and S \(2,\) do not broadcast"),
    ("RotorLinear(2**20, 2**20, chunk_size=64) on 16 GiB", lambda d: with_memory(
        16 * GiB, lambda: RotorLinear(2**20, 2**20, chunk_size=64)), MemoryError,
     r"would need 67.0 GiB .* only 16.0 GiB .*larger chunk_size"),
    ("RotorLinear(2**24, 2**24, chunk_size=64)", lambda d: RotorLinear(2**24, 2**24, chunk_size=64), MemoryError,
     r"would need 16.8 TiB"),
    ("RotorNetwork(2**20, 2**20, chunk_size=64) on 16 GiB", lambda d: with_memory(
        16 * GiB, lambda: RotorNetwork(2**20, 2**20, chunk_size=64)), MemoryError, r"RotorNetwork.*would need 536.3 GiB"),
    ("LowRankLinear(2**40, 2**40, rank=1)", lambda d: LowRankLinear(2**40, 2**40, rank=1), MemoryError,
     r"would need 8.0 TiB .*smaller rank"),
    ("BlockHadamardLinear(2**24, 2**24, blocks=1)", lambda d: BlockHadamardLinear(2**24, 2**24, blocks=1), MemoryError,
     r"would need 1.0 PiB .*more blocks"),
    ("RotorLinear(8, 8, dtype=torch.int64)", lambda d: RotorLinear(8, 8, dtype=torch.int64), TypeError,
     r"torch.int64 is not a real floating-point type.*torch.float32"),
    ("RotorLinear(8, 8, dtype='float32')", lambda d: RotorLinear(8, 8, dtype="float32"), TypeError, r"must be a torch dtype"),
    ("LowRankLinear(8, 8, 1, dtype=torch.int32)", lambda d: LowRankLinear(8, 8, 1, dtype=torch.int32), TypeError,
     r"not a real floating-point type"),
    ("RotorLinear(8, 8, tol=-1e-3)", lambda d: RotorLinear(8, 8, tol=-1e-3), ValueError, r"tol must be a finite number >= 0"),
    ("RotorLinear(8, 8, tol=nan)", lambda d: RotorLinear(8, 8, tol=float("nan")), ValueError, r"tol must be a finite number"),
    ("RotorLinear(8, 8, max_iter=0)", lambda d: RotorLinear(8, 8, max_iter=0), ValueError, r"max_iter must be an integer >= 1"),
    ("RotorNetwork(8, 8, tol=-1)", lambda d: RotorNetwork(8, 8, tol=-1.0), ValueError, r"RotorNetwork.*tol must be"),
    ("RotorNetwork(8, 8, eps=0)", lambda d: RotorNetwork(8, 8, eps=0), ValueError, r"eps .* must be a finite number > 0"),
    ("RotorNetwork(8, 8, hidden_layers=-1)", lambda d: RotorNetwork(8, 8, hidden_layers=-1), ValueError, r"hidden_layers must be an integer >= 0, got -1"),
    ("RotorLinear(0, 8)", lambda d: RotorLinear(0, 8), ValueError, r"in_features must be a positive integer"),
    ("RotorLinear(8, 8, chunk_size=3)", lambda d: RotorLinear(8, 8, chunk_size=3), ValueError, r"power of two"),
    ("RotorLinear(8, 8, chunk_size=16)", lambda d: RotorLinear(8, 8, chunk_size=16), ValueError, r"power of two <= 8"),
    ("RotorLinear(8, 8, decomposition='qr')", lambda d: RotorLinear(8, 8, decomposition="qr"), ValueError, r"'power' or 'exact'"),
    ("RotorLinear(8, 8, backend='nope') forward", lambda d: RotorLinear(8, 8, backend="nope")(torch.ones(1, 8)),
     ValueError, r"unknown sandwich backend 'nope'; valid: 'auto' or a registered name"),
    ("RotorLinear forward of width 7", lambda d: RotorLinear(8, 8)(torch.ones(2, 7)), ValueError, r"in_features=8, got shape \(2, 7\)"),
    ("RotorLinear forward of a numpy array", lambda d: RotorLinear(8, 8)(np.ones((2, 8))), TypeError, r"expects a torch.Tensor"),
    ("RotorLinear forward of int64", lambda d: RotorLinear(8, 8)(torch.ones(2, 8, dtype=torch.int64)), TypeError,
     r"floating-point input, got dtype torch.int64.*x.float\(\)"),
    ("LowRankLinear forward of int64", lambda d: LowRankLinear(8, 8, 1)(torch.ones(2, 8, dtype=torch.int64)), TypeError,
     r"floating-point input"),
    ("RotorLinear with a NaN alpha", lambda d: _nan_alpha_forward(), ValueError, r"non-finite values .* in alpha.*learning rate"),
    ("BlockHadamardLinear(8, 8, blocks=16)", lambda d: BlockHadamardLinear(8, 8, blocks=16), ValueError, r"at most that many blocks"),
]

COMMAND_LINE = [
    ("galinear frobnicate", lambda d: cli("frobnicate"), CommandFailed, r"invalid choice: 'frobnicate'"),
    ("galinear verify --n 50", lambda d: cli("verify", "--n", "50"), CommandFailed, r"--n 50 is too large; the largest accepted is 8"),
    ("galinear verify --n 0", lambda d: cli("verify", "--n", "0"), CommandFailed, r"--n must be a positive integer"),
    ("galinear verify --n abc", lambda d: cli("verify", "--n", "abc"), CommandFailed, r"invalid int value: 'abc'"),
    ("galinear verify --only nope", lambda d: cli("verify", "--only", "nope"), CommandFailed, r"unknown proof\(s\) nope; available"),
    ("galinear verify --proofs-dir missing", lambda d: cli("verify", "--proofs-dir", str(d / "missing")), CommandFailed,
     r"no proofs folder"),
    ("galinear codegen (no --op)", lambda d: cli("codegen"), CommandFailed, r"give --op"),
    ("galinear codegen --n 2 --signature 2,0,0", lambda d: cli("codegen", "--op", "gp", "--n", "2", "--signature", "2,0,0"),
     CommandFailed, r"exactly one of --n N or --signature"),
    ("galinear codegen --signature 2,x", lambda d: cli("codegen", "--op", "gp", "--signature", "2,x"), CommandFailed,
     r"--signature must be three integers p,q,r"),
    ("galinear codegen --n 20", lambda d: cli("codegen", "--op", "gp", "--n", "20", "--print"), CommandFailed, r"n <= 8"),
    ("galinear codegen without --out", lambda d: cli("codegen", "--op", "gp", "--n", "2"), CommandFailed, r"give --out DIR"),
    ("galinear codegen --out a file", lambda d: cli("codegen", "--op", "gp", "--n", "2", "--out", str(d / "ok.idx")),
     CommandFailed, r"is a file, not a folder"),
    ("galinear codegen --out under a file (unwritable)", lambda d: cli(
        "codegen", "--op", "gp", "--n", "2", "--out", str(d / "ok.idx" / "kernels")), CommandFailed,
     r"cannot write into --out .*\(Not a directory\); choose a folder you can write to"),
    ("galinear codegen --all --op gp", lambda d: cli("codegen", "--all", "--op", "gp"), CommandFailed, r"do not combine"),
    ("galinear codegen --op xx", lambda d: cli("codegen", "--op", "xx", "--n", "2"), CommandFailed, r"invalid choice: 'xx'"),
    ("galinear tour --n 30", lambda d: cli("tour", "--n", "30"), CommandFailed, r"--n must be between 2 and 8, got 30"),
]

DATA_FILES = [
    ("read_idx of a missing file", lambda d: read_idx(d / "missing.gz"), FileNotFoundError, r"missing.gz: no such file"),
    ("read_idx of a folder", lambda d: read_idx(d), IsADirectoryError, r"is a folder"),
    ("read_idx of an empty file", lambda d: read_idx(d / "empty"), IdxFormatError, r"only 0 bytes.*truncated"),
    ("read_idx of a zip file", lambda d: read_idx(d / "zip"), IdxFormatError, r"bad magic number 0x504B0304"),
    ("read_idx of a header cut short", lambda d: read_idx(d / "header"), IdxFormatError, r"announces 3 dimensions .*truncated"),
    ("read_idx of a truncated file", lambda d: read_idx(d / "truncated"), IdxFormatError, r"12 data bytes.* 10 data bytes.*truncated"),
    ("read_idx of a file too long", lambda d: read_idx(d / "long"), IdxFormatError, r"longer than its header says"),
    ("read_idx of sizes that overflow int64", lambda d: read_idx(d / "overflow"), IdxFormatError,
     r"79228162458924105385300197375 data bytes.*truncated"),
    ("read_idx of a damaged .gz", lambda d: read_idx(d / "damaged.gz"), IdxFormatError, r"cannot decompress.*damaged or truncated"),
    ("read_idx of a cut-off .gz", lambda d: read_idx(d / "cut.gz"), IdxFormatError, r"end-of-stream.*damaged or truncated"),
    ("read_idx of a raw file named .gz", lambda d: read_idx(d / "raw.gz"), IdxFormatError, r"rename it without .gz"),
    ("load_dataset('cifar')", lambda d: load_dataset("cifar"), ValueError, r"unknown data set 'cifar'"),
    ("load_dataset('mnist', 'valid')", lambda d: load_dataset("mnist", "valid"), ValueError, r"choose 'train' or 'test'"),
    ("load_dataset(folder=missing)", lambda d: load_dataset("fashion-mnist", folder=d / "missing"), DatasetNotFoundError,
     r"is not a folder; install it with"),
    ("load_dataset(folder=without the files)", lambda d: load_dataset("fashion-mnist", folder=d), DatasetNotFoundError,
     r"missing train-images-idx3-ubyte"),
    ("load_dataset of images and labels that differ in count", lambda d: load_dataset("fashion-mnist", folder=d / "mismatch"),
     IdxFormatError, r"3 images but 2 labels"),
    ("write_idx of complex numbers", lambda d: write_idx(d / "c", np.zeros(3, complex)), TypeError, r"idx cannot store"),
]

CASES = [("API", *case) for case in API] + [("command line", *case) for case in COMMAND_LINE] + [
    ("data files", *case) for case in DATA_FILES
]


def _nan_alpha_forward():
    layer = RotorLinear(8, 8)
    with torch.no_grad():
        layer.alpha.fill_(float("nan"))
    return layer(torch.ones(1, 8))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad-files")
    write_idx(d / "ok.idx", np.arange(12, dtype=np.uint8).reshape(3, 4))
    raw = (d / "ok.idx").read_bytes()
    (d / "empty").write_bytes(b"")
    (d / "zip").write_bytes(b"PK\x03\x04rest")
    (d / "header").write_bytes(bytes([0, 0, 8, 3, 0, 0, 0, 1]))
    (d / "truncated").write_bytes(raw[:-2])
    (d / "long").write_bytes(raw + b"xx")
    (d / "overflow").write_bytes(bytes([0, 0, 8, 3]) + (2**32 - 1).to_bytes(4, "big") * 3)
    (d / "damaged.gz").write_bytes(b"not gzip at all")
    packed = gzip.compress(raw)
    (d / "cut.gz").write_bytes(packed[: len(packed) // 2])
    (d / "raw.gz").write_bytes(raw)
    (d / "mismatch").mkdir()
    write_idx(d / "mismatch" / "train-images-idx3-ubyte", np.zeros((3, 28, 28), np.uint8))
    write_idx(d / "mismatch" / "train-labels-idx1-ubyte", np.zeros(2, np.uint8))
    return d


@pytest.mark.parametrize("group,case_id,call,error,pattern", CASES, ids=[case[1] for case in CASES])
def test_bad_input_gets_a_clear_error(files, group, case_id, call, error, pattern):
    started = time.perf_counter()
    with pytest.raises(error) as caught:
        call(files)
    message = str(caught.value)
    assert re.search(pattern, message, re.DOTALL), f"{case_id}: message {message!r} does not match {pattern!r}"
    assert time.perf_counter() - started < 15, f"{case_id}: the error came only after the work"


def test_case_ids_are_unique():
    ids = [case[1] for case in CASES]
    assert len(ids) == len(set(ids))


def test_every_case_is_in_the_docs():
    text = DOCS.read_text(encoding="utf-8")
    missing = [case_id for _, case_id, *_ in CASES if f"| `{case_id}` |" not in text]
    assert not missing, f"docs/reliability.md has no row for {missing}"


# ------------------------------------------------------------------ issue 25, finding 5: train-mlp recovery
def _images(folder: Path, n_train=40, n_test=20, seed=0):
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        images = rng.integers(0, 60, size=(n, 28, 28)).astype(np.uint8)
        images[np.arange(n), labels, :] = 255
        write_idx(folder / f"{split}-images-idx3-ubyte.gz", images)
        write_idx(folder / f"{split}-labels-idx1-ubyte.gz", labels)
    return folder


def _train_mlp(data, out, *extra):
    return cli("train-mlp", "--data-dir", str(data), "--model", "dense", "--seeds", "0", "--hidden", "16",
               "--epochs", "1", "--batch-size", "16", "--out", str(out), "--no-progress", "--threads", "1", *extra)


@pytest.fixture
def finished_run(tmp_path):
    """A finished train-mlp run: (data folder, --out folder, run folder)."""
    data = tmp_path / "data"
    data.mkdir()
    _images(data)
    _train_mlp(data, tmp_path / "out")
    return data, tmp_path / "out", tmp_path / "out" / "fashion-mnist" / "dense-seed0"


@pytest.mark.parametrize("damage", ["deleted", "truncated", "not a history"])
def test_history_json_is_rebuilt_from_the_checkpoint(finished_run, damage):
    data, out, run = finished_run
    history = run / "history.json"
    saved = json.loads(history.read_text())
    if damage == "deleted":  # the fix docs/reliability.md gave: "delete it; the next run rewrites it"
        history.unlink()
    else:
        history.write_text(history.read_text()[:20] if damage == "truncated" else "[1, 2]")
    report = cli("train-mlp", "--report-only", "--out", str(out))
    assert "| dense |" in report and f"rewritten from {run / 'checkpoint.pt'}" in report
    assert json.loads(history.read_text()) == saved


def test_a_damaged_history_without_checkpoint_is_one_line(finished_run):
    data, out, run = finished_run
    (run / "checkpoint.pt").unlink()
    (run / "history.json").write_text("{")
    with pytest.raises(CommandFailed) as caught:
        cli("train-mlp", "--report-only", "--out", str(out))
    message = str(caught.value)
    assert f"{run / 'history.json'}: not valid JSON" in message and f"delete the run folder {run}" in message
    assert "Traceback" not in message and message.count("\n") <= 1


def test_a_changed_configuration_never_resumes_an_old_checkpoint(finished_run, no_loading):
    data, out, run = finished_run
    (run / "config.json").unlink()
    before = (run / "checkpoint.pt").stat().st_mtime_ns
    with pytest.raises(CommandFailed) as caught:
        _train_mlp(data, out, "--lr", "0.5", "--epochs", "3")
    message = str(caught.value)
    assert f"{run / 'checkpoint.pt'} was saved by a run with another configuration" in message
    assert "train.epochs 1 -> 3" in message and "train.lr 0.007 -> 0.5" in message and "--out" in message
    assert (run / "checkpoint.pt").stat().st_mtime_ns == before


def test_the_class_count_comes_from_the_data_set(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _images(data)
    _train_mlp(data, tmp_path / "out", "--limit-train", "1")  # was IndexError: Target 9 is out of bounds
    from galinear.train.models import MLPConfig, build_mlp, count_parameters

    history = json.loads((tmp_path / "out" / "fashion-mnist" / "dense-seed0" / "history.json").read_text())
    assert history["config"]["model"]["num_classes"] == 10
    assert history["parameters"] == count_parameters(build_mlp(MLPConfig(kind="dense", hidden=16)))


@pytest.mark.parametrize("name", ["checkpoint.pt", "history.json", "config.json"])
def test_a_folder_in_place_of_a_run_file_is_refused_before_training(finished_run, no_loading, name):
    data, out, run = finished_run
    (run / name).unlink()
    (run / name).mkdir()
    with pytest.raises(CommandFailed) as caught:
        _train_mlp(data, out)
    message = str(caught.value)
    assert f"{run / name}: is a folder; " in message and "Traceback" not in message


def test_a_run_folder_that_is_a_file_is_refused_before_training(tmp_path, no_loading):
    (tmp_path / "out" / "fashion-mnist").mkdir(parents=True)
    (tmp_path / "out" / "fashion-mnist" / "dense-seed0").write_text("")
    with pytest.raises(CommandFailed, match=r"dense-seed0: is a file, not a run folder; choose another --out"):
        _train_mlp(tmp_path, tmp_path / "out")


def test_tag_with_a_slash_is_refused():
    with pytest.raises(CommandFailed, match=r"'a/b' cannot be a tag: it becomes part of a run folder's name.*not '/'"):
        cli("train-mlp", "--tag", "a/b", "--report-only")
    with pytest.raises(CommandFailed, match=r"--seeds: expected a seed, an integer in 0..2\*\*64 - 1, got -1"):
        cli("train-mlp", "--seeds", "-1", "--report-only")


def _deny(monkeypatch, target: Path):
    """Make ``target`` unreadable (a file) or unwritable (a folder). Root reads and writes every file
    whatever its mode, so under root the refusal the kernel would give is raised in its place."""
    if os.getuid() != 0:
        os.chmod(target, 0o500 if target.is_dir() else 0o200)
        return
    import builtins
    import tempfile

    def denied(path):
        return PermissionError(13, "Permission denied", str(path))

    real_open, real_temporary = builtins.open, tempfile.TemporaryFile

    def fake_open(path, *args, **kwargs):
        if isinstance(path, (str, Path)) and Path(path) == target:
            raise denied(path)
        return real_open(path, *args, **kwargs)

    def fake_temporary(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == target:
            raise denied(dir)
        return real_temporary(*args, dir=dir, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(tempfile, "TemporaryFile", fake_temporary)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="file permissions are POSIX")
@pytest.mark.parametrize("target", ["checkpoint.pt", "."])
def test_permission_denied_names_the_file_before_training(finished_run, no_loading, monkeypatch, target):
    data, out, run = finished_run
    target = run / target if target != "." else run
    _deny(monkeypatch, target)
    try:
        with pytest.raises(CommandFailed) as caught:
            _train_mlp(data, out, "--epochs", "1")
    finally:
        monkeypatch.undo()
        os.chmod(target, 0o755 if target.is_dir() else 0o644)
    message = str(caught.value)
    assert f"galinear train-mlp: error: {target}: cannot be" in message and "(Permission denied)" in message
    assert "Traceback" not in message


# ------------------------------------------------------------------ issue 25, finding 6: text input
def _compress_text(path, *extra):
    return cli("compress", "--text", str(path), "--no-progress", *extra)


def test_binary_text_files_are_refused_with_the_reason(tmp_path, no_loading):
    random_bytes = tmp_path / "random.txt"
    random_bytes.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elf = tmp_path / "program.txt"
    elf.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(57) + b"some text after the header" * 10)
    for path, reason in ((random_bytes, r"it holds NUL bytes|.* are control characters"), (elf, r"it starts like an ELF executable")):
        with pytest.raises(CommandFailed, match=rf"{re.escape(str(path))} is not a text file: ({reason})"):
            _compress_text(path)
    real = Path(os.path.realpath(sys.executable))
    if real.read_bytes()[:4] == b"\x7fELF":  # the Python program itself, where it is an ELF file
        with pytest.raises(CommandFailed, match=r"is not a text file: it starts like an ELF executable"):
            _compress_text(real)


def test_two_gigabytes_of_nul_bytes_are_refused_from_a_sample(tmp_path, no_loading, monkeypatch):
    big = tmp_path / "zeros.txt"
    with open(big, "wb") as handle:
        handle.truncate(2 * GiB)  # sparse: takes no disk space
    read, real_read = [], os.read
    monkeypatch.setattr(os, "read", lambda fd, n: read.append(n) or real_read(fd, n))
    started = time.perf_counter()
    with pytest.raises(CommandFailed, match=r"zeros.txt is not a text file: it holds NUL bytes \(the first at byte offset 0\)"):
        _compress_text(big)
    assert sum(read) <= 1 << 16 and time.perf_counter() - started < 5


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_fifo_or_device_as_text_is_refused_without_waiting(tmp_path, no_loading):
    import signal

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("reading --text blocked on a FIFO"))
    signal.alarm(20)
    try:
        with pytest.raises(CommandFailed, match=r"pipe.txt is not a text file: it is a named pipe \(FIFO\)"):
            _compress_text(fifo)
    finally:
        signal.alarm(0)
    if os.path.exists("/dev/zero"):
        with pytest.raises(CommandFailed, match=r"/dev/zero is not a text file: it is a device"):
            _compress_text("/dev/zero")


def test_encoding_errors_name_the_file_and_byte_offset(tmp_path, no_loading):
    from galinear.data.text import SAMPLE_BYTES, load_text_file

    records = tmp_path / "records.jsonl"
    records.write_bytes(b'{"text": "one"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(CommandFailed, match=rf"{re.escape(str(records))}: not UTF-8 text: byte 0xE9 at byte offset 29"):
        _compress_text(records, "--text-field", "text")
    late = tmp_path / "late.jsonl"  # the bad byte lies beyond the sample: found when the text is read
    late.write_bytes(b'{"text": "' + b"a" * SAMPLE_BYTES + b'"}\n{"text": "\xff"}\n')
    with pytest.raises(ValueError, match=rf"{re.escape(str(late))}: not UTF-8 text: byte 0xFF at byte offset "
                                         rf"{SAMPLE_BYTES + 23}"):
        load_text_file(str(late), "text")
    plain = tmp_path / "latin1.txt"
    plain.write_bytes("naïve text".encode("latin-1"))
    with pytest.raises(CommandFailed, match=r"latin1.txt: not UTF-8 text: byte 0xEF at byte offset 2.*iconv"):
        _compress_text(plain)
    good = tmp_path / "good.jsonl"
    good.write_bytes('{"text": "caf\u00e9 \u2028 ok"}\n'.encode())
    assert load_text_file(str(good), "text") == "caf\u00e9 \u2028 ok"


# ------------------------------------------------------------------ issue 25, finding 8: verify
def test_verify_of_a_folder_without_proofs_fails():
    with pytest.raises(CommandFailed, match=r"exit 2: galinear verify: error: no proof script in /etc; a proof script "
                                            r"defines IDENTITY"):
        cli("verify", "--proofs-dir", "/etc")


@pytest.mark.parametrize("body,where,pattern", [
    ("IDENTITY = 'x'\nN_MIN = 1\nN_DEFAULT = 2\ndef prove(n, log)\n    pass\n", 4, r"syntax error \(expected ':'\)"),
    ("def f():\n    return 'x'\n\n\nIDENTITY = f()\nN_MIN = 1\nN_DEFAULT = 2\n", 5,
     r"IDENTITY must be a literal written in the script .* not the expression 'f\(\)'"),
])
def test_verify_names_the_file_and_line_of_a_broken_proof(tmp_path, body, where, pattern):
    (tmp_path / "broken.py").write_text(body)
    with pytest.raises(CommandFailed) as caught:
        cli("verify", "--proofs-dir", str(tmp_path))
    message = str(caught.value)
    assert f"{tmp_path / 'broken.py'}, line {where}: " in message and re.search(pattern, message), message
    assert "Traceback" not in message and "malformed node" not in message


# ------------------------------------------------------------------ issue 25, finding 7: errors before work
@pytest.mark.parametrize("argv,pattern", [
    (["--out", "{file}"], r"--out {file} is a file, not a folder"),
    (["--save", "{file}"], r"--save {file} is a file, not a folder"),
    (["--cache", "{file}/cache"], r"--cache {file}/cache lies under {file}, which is a file"),
    (["--out", "/proc/galinear-out"], r"cannot write into --out /proc/galinear-out \(.* in /proc\)"),
    (["--save", "/proc"], r"cannot write into --save /proc \("),
    (["--seeds", str(2**70)], r"--seeds: seed 1180591620717411303424 is out of range; seeds are integers in 0\.\.4294967295"),
    (["--seeds", "-1"], r"--seeds: seed -1 is out of range"),
    (["--layers", "0,1", "--multi-seeds", "0,-3"], r"--multi-seeds: seed -3 is out of range"),
    (["--bh-blocks", "0"], r"--bh-blocks must be a positive integer, got 0"),
    (["--chunk", "48"], r"--chunk must be a power of two >= 4 \(e\.g\. 64 or 128\), got 48"),
    (["--chunk", "2"], r"--chunk must be a power of two >= 4"),
    (["--model", "{folder}", "--bh-blocks", "7"], r"--bh-blocks 7 does not divide the q_proj shape 576 -> 576"),
    (["--model", "/etc/passwd"], r"--model /etc/passwd is a file but not a GGUF model"),
    (["--model", "{folder}/x.gguf"], r"--model {folder}/x.gguf: no such file or folder"),
    (["--model", "{folder}", "--gguf-file", "x.gguf"], r"--gguf-file x.gguf not found in the --model folder {folder}"),
    (["--model", "{file}"], r"--model {file} is a file but not a GGUF model"),
])
def test_compress_checks_paths_and_ranges_before_the_model_loads(tmp_path, no_loading, argv, pattern):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"hidden_size": 576, "num_attention_heads": 9, "num_key_value_heads": 3, "num_hidden_layers": 30}))
    (tmp_path / "file").write_text("")
    fill = {"file": str(tmp_path / "file"), "folder": str(folder)}
    argv = [a.format(**fill) for a in argv]
    started = time.perf_counter()
    with pytest.raises(CommandFailed) as caught:
        cli("compress", "--no-progress", "--layers", "2", *argv)
    message = str(caught.value)
    assert re.search(pattern.format(**{k: re.escape(v) for k, v in fill.items()}), message), message
    assert "Traceback" not in message and "forbids downloads" not in message
    assert time.perf_counter() - started < 15


def test_bh_blocks_of_a_model_told_only_once_loaded_is_checked_before_any_fit():
    from galinear.compress.study.config import StudyConfig, check_loaded
    from galinear.testing.models import tiny_llama

    model = tiny_llama(layers=2)  # q: 32 -> 32, k and v: 32 -> 16

    def problem(layer_sets, blocks):
        try:
            check_loaded(StudyConfig(layer_sets=layer_sets, methods=("bh1",), bh_blocks=blocks), model, given=True)
        except ValueError as error:
            return str(error)
        return None

    assert problem(((0,), (1,)), 4) is None
    assert problem(((1,),), 3) == ("--bh-blocks 3 does not divide the q_proj shape 32 -> 32 of "
                                   "layer 1; pick a common divisor of 32 and 32")
    assert "k_proj shape 32 -> 16" in problem(((0,),), 32)


# ------------------------------------------------------------------ issue 53, section 4: the trust boundary of --proofs-dir
_ECHO = "import sys\nIDENTITY = 'anything at all'\nN_MIN = 1\nN_DEFAULT = 1000000\nprint(sys.argv)\n"
_FORGED_HEADER = ("IDENTITY = 'x = x'\nN_MIN = 1\nN_DEFAULT = 3\nprint('proof: x = x (n = 1..3)')\n"
                  "print('PROVED: 0/0 checks exact, 0.0 s')\n")


@pytest.mark.parametrize("body", [_ECHO, _FORGED_HEADER], ids=["prints its arguments", "no check made"])
def test_a_script_that_exits_0_without_the_verdict_is_not_proved(tmp_path, capsys, body):
    from galinear.cli import main

    (tmp_path / "echo.py").write_text(body)
    assert main(["verify", "--proofs-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "NO VERDICT" in out and "proved  " not in out and "0/1 proofs passed" in out
    assert f"{tmp_path / 'echo.py'}: not counted as proved: it exited 0 without" in out


def test_proofs_dir_help_states_the_trust_boundary(capsys):
    from galinear.cli import main

    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Trust boundary: verify RUNS every script of DIR with Python, as you, with your rights" in text
    assert "PROVED: k/k checks exact, S s" in text
    from galinear.commands.verify import verdict_problem

    assert verdict_problem("proof: x = x (n = 1..3)\n  ok  a\nPROVED: 1/1 checks exact, 0.1 s\n", "x = x", 1, 3) is None
