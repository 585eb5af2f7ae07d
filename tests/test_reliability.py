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
import re
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from galinear import Algebra
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
    ("Algebra(2.5)", lambda d: Algebra(2.5), ValueError, r"non-negative integer, got 2.5"),
    ("Algebra(21)", lambda d: Algebra(21), ValueError, r"0 <= n <= 20.*would need"),
    ("Algebra(16).gp of dense multivectors", lambda d: as_error(
        lambda: Algebra(16).gp(np.ones((1, 2**16)), np.ones((1, 2**16)))), UserWarning, r"about \d+ s .*4\*\*n terms"),
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
     TypeError, r"takes start, tol and max_iter, got \['steps'\]"),
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
    ("RotorNetwork(8, 8, hidden_layers=-1)", lambda d: RotorNetwork(8, 8, hidden_layers=-1), ValueError, r"non-negative integer"),
    ("RotorLinear(0, 8)", lambda d: RotorLinear(0, 8), ValueError, r"in_features must be a positive integer"),
    ("RotorLinear(8, 8, chunk_size=3)", lambda d: RotorLinear(8, 8, chunk_size=3), ValueError, r"power of two"),
    ("RotorLinear(8, 8, chunk_size=16)", lambda d: RotorLinear(8, 8, chunk_size=16), ValueError, r"power of two <= 8"),
    ("RotorLinear(8, 8, decomposition='qr')", lambda d: RotorLinear(8, 8, decomposition="qr"), ValueError, r"'power' or 'exact'"),
    ("RotorLinear(8, 8, backend='nope') forward", lambda d: RotorLinear(8, 8, backend="nope")(torch.ones(1, 8)),
     ValueError, r"unknown sandwich backend 'nope'; registered"),
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
     r"--signature must look like 3,0,1"),
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
