"""Issue 25, finding 3: caches run no code.

Each test starts from the reproduction: a pickle planted as numba's cache index, a .pyc planted
beside a generated kernel module, a generated module rewritten. The planted code would create a
marker file; the marker must not exist afterwards. A control run shows that the planted file is
where it would be read (so each test could fail). The rules are those of galinear/_numba.py and
docs/reliability.md ("Caches that hold code").
"""
from __future__ import annotations

import marshal
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from galinear import Algebra, _numba
from galinear.testing.payloads import CodePayload

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, cache, cwd=None) -> subprocess.CompletedProcess:
    # .pyc files where Python looks by default, beside their sources (make test moves them elsewhere)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=300)


def test_a_pickle_planted_in_a_cache_others_can_write_does_not_run(tmp_path):
    cache, source, marker = tmp_path / "cache", tmp_path / "src", tmp_path / "ran"
    source.mkdir()
    (source / "plus_one_mod.py").write_text("from galinear._numba import jit\n\n\n@jit\ndef plus_one(x):\n"
                                            "    return x + 1\n")
    code = f"import sys; sys.path.insert(0, {str(source)!r}); import plus_one_mod; print(plus_one_mod.plus_one(41))"
    first = _python(code, cache)
    assert first.returncode == 0 and first.stdout.strip() == "42", first.stderr
    assert stat_mode(cache) == 0o700  # galinear created the folder private
    indexes = list(cache.rglob("plus_one_mod.plus_one-*.nbi"))
    assert len(indexes) == 1, sorted(cache.rglob("*"))
    indexes[0].write_bytes(pickle.dumps(CodePayload(marker)))
    control = _python(code, cache)  # the user's own private folder is trusted: numba reads the index
    assert marker.exists(), "the planted index is not where numba reads it; the test would prove nothing"
    assert control.stdout.strip() == "42"
    marker.unlink()
    os.chmod(cache, 0o777)  # the reproduction: a cache folder other users can write
    run = _python(code, cache)
    assert run.returncode == 0 and run.stdout.strip() == "42", run.stderr
    assert not marker.exists(), "a pickle planted in a world-writable cache folder ran"
    assert "runs without numba's disk cache" in run.stderr and "mode 0777" in run.stderr
    assert run.stderr.count("UntrustedCacheWarning") == 1  # said once


def stat_mode(path) -> int:
    return os.stat(path).st_mode & 0o7777


def _planted_pyc(source_file: Path, marker: Path) -> Path:
    """A valid timestamp .pyc for ``source_file`` whose code creates ``marker``."""
    import importlib.util

    info = source_file.stat()
    code = compile(f"open({str(marker)!r}, 'w').close()\n", str(source_file), "exec")
    pyc = source_file.parent / "__pycache__" / f"{source_file.stem}.{sys.implementation.cache_tag}.pyc"
    pyc.parent.mkdir(exist_ok=True)
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + \
        (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (info.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    pyc.write_bytes(header + marshal.dumps(code))
    return pyc


_GRADED = ("import numpy as np; from galinear import Algebra; from galinear.core import graded; "
           "A = Algebra(3); a = np.arange(8.0); b = np.arange(8.0)[::-1].copy(); "
           "v, _ = graded.product(A, 'gp', a, 0b10, b, 0b10); print(repr(v.tolist()))")


def test_a_pyc_planted_beside_a_generated_kernel_does_not_run(tmp_path):
    cache, marker = tmp_path / "cache", tmp_path / "ran"
    first = _python(_GRADED, cache)
    assert first.returncode == 0, first.stderr
    modules = sorted((cache / "galinear_graded").glob("graded_*.py"))
    assert modules
    for module in modules:
        _planted_pyc(module, marker)
    # control: Python's own import of the module file runs the planted .pyc
    control = _python("import importlib.util as u, sys; s = u.spec_from_file_location('m', sys.argv[1]); "
                      "u.module_from_spec(s); s.loader.exec_module(u.module_from_spec(s))".replace(
                          "sys.argv[1]", repr(str(modules[0]))), cache)
    assert control.returncode == 0 and marker.exists(), "the planted .pyc is not one Python would run"
    marker.unlink()
    run = _python(_GRADED, cache)
    assert run.returncode == 0 and run.stdout == first.stdout, run.stderr
    assert not marker.exists(), "a .pyc planted beside a generated kernel ran"
    A3 = Algebra(3)  # the vector parts' product, dense (float64, exact for these integers)
    expected = A3.gp(A3.grade(np.arange(8.0), 1), A3.grade(np.arange(8.0)[::-1].copy(), 1))
    np.testing.assert_allclose(eval(first.stdout), expected, rtol=0, atol=1e-12)


def test_a_rewritten_generated_kernel_is_restored_before_it_is_imported(tmp_path):
    cache, marker = tmp_path / "cache", tmp_path / "ran"
    first = _python(_GRADED, cache)
    assert first.returncode == 0, first.stderr
    modules = {path: path.read_text() for path in (cache / "galinear_graded").glob("graded_*.py")}
    for path in modules:
        path.write_text(f"open({str(marker)!r}, 'w').close()\n" + modules[path])
    run = _python(_GRADED, cache)
    assert run.returncode == 0 and run.stdout == first.stdout, run.stderr
    assert not marker.exists(), "a rewritten generated kernel module ran"
    assert {path: path.read_text() for path in modules} == modules


def test_cache_folder_trust_rules(tmp_path):
    private = tmp_path / "private"
    assert _numba.cache_folder_problem(private) is None and stat_mode(private) == 0o700
    os.chmod(private, 0o755)  # others may read, not write: nothing can be planted
    assert _numba.cache_folder_problem(private) is None
    os.chmod(private, 0o775)
    assert "group or other users may write it (mode 0775)" in _numba.cache_folder_problem(private)
    os.chmod(private, 0o700)
    link = tmp_path / "link"
    link.symlink_to(private)
    assert "symbolic link" in _numba.cache_folder_problem(link)
    (tmp_path / "file").write_text("")
    assert "not a folder" in _numba.cache_folder_problem(tmp_path / "file")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    problem = _numba.cache_folder_problem(shared / "numba")
    assert problem is not None and f"the folder {shared} above it may be written" in problem
    os.chmod(shared, 0o1777)  # sticky, like /tmp: others cannot rename the cache folder away
    assert _numba.cache_folder_problem(shared / "numba") is None


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_cache_folder_of_another_user_is_not_trusted(tmp_path):
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.chown(other, 12345, 12345)
    assert "belongs to user id 12345" in _numba.cache_folder_problem(other)
    inner = other / "numba"
    inner.mkdir(mode=0o700)
    assert f"the folder {other} above it belongs to user id 12345" in _numba.cache_folder_problem(inner)


def _module_folder(tmp_path, monkeypatch):
    """Generated modules written under ``tmp_path`` (a private folder, as the trusted cache is)."""
    folder = tmp_path / "generated"
    folder.mkdir(mode=0o700)
    monkeypatch.setattr(_numba, "generated_folder", lambda kind: folder)
    return folder


def test_every_generated_module_has_one_name_scheme_and_one_layout(tmp_path, monkeypatch):
    """The compiler's modules (keyed by their text) and the graded kernels (keyed by what they
    compute) are both ``<kind>_<digest>.py`` with the checked first line."""
    folder = _module_folder(tmp_path, monkeypatch)
    held = _numba.load_generated("compiled", "VALUE = 'held'\n", "VALUE = 'held'\n")
    made = _numba.load_generated("graded", "some kernel key", lambda: "VALUE = 'made'\n")
    assert (held.VALUE, made.VALUE) == ("held", "made")
    for module, kind, key in ((held, "compiled", "VALUE = 'held'\n"), (made, "graded", "some kernel key")):
        path = Path(module.__file__)
        assert path.parent == folder and path.name == f"{_numba.file_stem(kind, key)}.py"
        assert module.__name__ == f"galinear_{path.stem}"
        assert _numba.read_checked(path, key) is not None
        assert path.read_text().startswith(f"# galinear generated file {_numba.FILE_FORMAT}; key sha256 ")


@pytest.mark.parametrize("planted", ["old layout", "no first line", "another key", "edited"])
def test_a_generated_module_that_fails_its_check_is_written_again_before_it_runs(planted, tmp_path, monkeypatch):
    """A file under the module's name runs only when its first line names this layout, this key
    and the SHA-256 of the rest; anything else (the ``# sha256 of the lines below:`` line of the
    earlier layout, a file copied from another key, an edit) is replaced by the generated text."""
    import hashlib

    folder = _module_folder(tmp_path, monkeypatch)
    marker = tmp_path / "ran"
    key = f"kernel key {planted}"
    path = folder / f"{_numba.file_stem('graded', key)}.py"
    payload = f"open({str(marker)!r}, 'w').close()\nVALUE = 'planted'\n"
    if planted == "old layout":
        text = f"# sha256 of the lines below: {hashlib.sha256(payload.encode()).hexdigest()}\n{payload}"
    elif planted == "no first line":
        text = payload
    elif planted == "another key":
        text = _numba.stamped("the key of another kernel", payload)
    else:
        text = _numba.stamped(key, "VALUE = 'made'\n").replace("VALUE = 'made'\n", payload)
    path.write_text(text)
    module = _numba.load_generated("graded", key, lambda: "VALUE = 'made'\n")
    assert module.VALUE == "made" and not marker.exists()
    assert path.read_text() == _numba.stamped(key, "VALUE = 'made'\n")
    # the caller that holds the text: a checked file holding other text is replaced as well
    held = f"VALUE = {'held ' + planted!r}\n"  # a module of its own in this process
    other = folder / f"{_numba.file_stem('compiled', held)}.py"
    other.write_text(_numba.stamped(held, payload))
    assert _numba.load_generated("compiled", held, held).VALUE == "held " + planted and not marker.exists()
    assert other.read_text() == _numba.stamped(held, held)


def test_generated_files_of_the_earlier_layouts_are_left_unused(tmp_path):
    """The earlier names (``galinear_graded/graded_<20 hex digits>.py``, ``galinear_compiled_src/``)
    are never read: files planted there, in a layout that was once valid, do not run."""
    import hashlib

    cache, marker = tmp_path / "cache", tmp_path / "ran"
    first = _python(_GRADED, cache)
    assert first.returncode == 0, first.stderr
    (module,) = (cache / "galinear_graded").glob("graded_*.py")
    key = module.read_text().split("\n")[2].removeprefix("# key: ")  # the kernel's header names its key
    assert len(module.stem) == len("graded_") + 24 and _numba.read_checked(module, key) is not None
    payload = f"open({str(marker)!r}, 'w').close()\n" + _numba.read_checked(module, key)
    old = cache / "galinear_graded" / f"graded_{hashlib.sha256(key.encode()).hexdigest()[:20]}.py"
    old.write_text(f"# sha256 of the lines below: {hashlib.sha256(payload.encode()).hexdigest()}\n{payload}")
    module.unlink()
    (cache / "galinear_compiled_src").mkdir()
    (cache / "galinear_compiled_src" / "galinear_compiled_kernel_numba_0.py").write_text(payload)
    run = _python(_GRADED, cache)
    assert run.returncode == 0 and run.stdout == first.stdout, run.stderr
    assert not marker.exists(), "a generated file of an earlier layout ran"
