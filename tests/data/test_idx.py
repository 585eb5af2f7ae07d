"""The idx reader and the Fashion-MNIST / MNIST loader, on small files written here."""
import gzip

import numpy as np
import pytest

from galinear.data import idx


def _write_split(folder, split, images, labels, compress):
    image_stem, label_stem = idx._FILE_STEMS[split]
    suffix = ".gz" if compress else ""
    idx.write_idx(folder / f"{image_stem}{suffix}", images)
    idx.write_idx(folder / f"{label_stem}{suffix}", labels)


@pytest.fixture
def small_images(rng):
    images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=7).astype(np.uint8)
    return images, labels


@pytest.mark.parametrize("compress", [False, True])
def test_loader_reads_written_files(tmp_path, small_images, compress):
    images, labels = small_images
    _write_split(tmp_path, "train", images, labels, compress)
    _write_split(tmp_path, "test", images[:3], labels[:3], compress)
    train = idx.load_fashion_mnist("train", folder=tmp_path)
    test = idx.load_mnist("test", folder=tmp_path)
    np.testing.assert_array_equal(train.images, images)
    np.testing.assert_array_equal(train.labels, labels.astype(np.int64))
    assert train.images.dtype == np.uint8 and train.labels.dtype == np.int64
    np.testing.assert_array_equal(test.images, images[:3])
    assert len(test) == 3


def test_header_bytes_by_hand(tmp_path):
    # hand-made idx: magic 0x00000801, 3 labels; independent of write_idx
    path = tmp_path / "labels"
    path.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 3, 4, 0, 9]))
    np.testing.assert_array_equal(idx.read_idx(path), [4, 0, 9])
    # float32 big-endian 2x1
    path = tmp_path / "floats"
    path.write_bytes(bytes([0, 0, 0x0D, 2, 0, 0, 0, 2, 0, 0, 0, 1]) + np.array([1.5, -2.0], ">f4").tobytes())
    values = idx.read_idx(path)
    assert values.dtype == np.float32 and values.shape == (2, 1)
    np.testing.assert_array_equal(values[:, 0], [1.5, -2.0])


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_round_trip(tmp_path, rng, dtype, suffix):
    array = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    path = tmp_path / f"a{suffix}"
    idx.write_idx(path, array)
    back = idx.read_idx(path)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, array)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_wrong_magic_number(tmp_path, suffix):
    path = tmp_path / f"bad{suffix}"
    payload = bytes([0x1F, 0x00, 0x08, 0x01, 0, 0, 0, 1, 5])
    if suffix:
        with gzip.open(path, "wb") as handle:
            handle.write(payload)
    else:
        path.write_bytes(payload)
    with pytest.raises(idx.IdxFormatError, match="bad magic number 0x1F000801"):
        idx.read_idx(path)


def test_unknown_type_code(tmp_path):
    path = tmp_path / "bad"
    path.write_bytes(bytes([0, 0, 0x07, 1, 0, 0, 0, 1, 5]))
    with pytest.raises(idx.IdxFormatError, match="magic number"):
        idx.read_idx(path)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_truncated_data(tmp_path, rng, suffix):
    array = rng.integers(0, 256, size=(4, 28, 28), dtype=np.uint8)
    full = tmp_path / "full"
    idx.write_idx(full, array)
    raw = full.read_bytes()[:-10]
    path = tmp_path / f"cut{suffix}"
    if suffix:
        with gzip.open(path, "wb") as handle:
            handle.write(raw)
    else:
        path.write_bytes(raw)
    with pytest.raises(idx.IdxFormatError, match="truncated"):
        idx.read_idx(path)


def test_truncated_header_and_gzip_stream(tmp_path, rng):
    path = tmp_path / "short"
    path.write_bytes(bytes([0, 0, 8]))
    with pytest.raises(idx.IdxFormatError, match="truncated"):
        idx.read_idx(path)
    path.write_bytes(bytes([0, 0, 8, 3, 0, 0]))
    with pytest.raises(idx.IdxFormatError, match="truncated"):
        idx.read_idx(path)
    # a gzip stream cut in the middle
    gz = tmp_path / "x.gz"
    idx.write_idx(gz, rng.integers(0, 256, size=(50, 28, 28), dtype=np.uint8))
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gz.read_bytes()[:200])
    with pytest.raises(idx.IdxFormatError, match="truncated"):
        idx.read_idx(cut)


def test_too_long_file(tmp_path):
    path = tmp_path / "long"
    path.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 2, 1, 2, 3]))
    with pytest.raises(idx.IdxFormatError, match="longer"):
        idx.read_idx(path)


def test_mismatched_counts(tmp_path, small_images):
    images, labels = small_images
    idx.write_idx(tmp_path / "train-images-idx3-ubyte", images)
    idx.write_idx(tmp_path / "train-labels-idx1-ubyte", labels[:5])
    with pytest.raises(idx.IdxFormatError, match="7 images but 5 labels"):
        idx.load_fashion_mnist("train", folder=tmp_path)


def test_missing_data_names_install_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("GALINEAR_FASHION_MNIST", str(tmp_path / "nowhere"))
    monkeypatch.setitem(
        idx.DATASETS, "fashion-mnist",
        idx._DatasetSpec(**{**idx.DATASETS["fashion-mnist"].__dict__, "default_folder": str(tmp_path / "none")}),
    )
    monkeypatch.setattr(idx.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(idx.DatasetNotFoundError) as info:
        idx.load_fashion_mnist("train")
    message = str(info.value)
    assert "apt-get install dataset-fashion-mnist" in message
    assert "pip install torchvision" in message
    assert "nowhere" in message


def test_environment_variable_folder(tmp_path, monkeypatch, small_images):
    images, labels = small_images
    _write_split(tmp_path, "test", images, labels, compress=True)
    monkeypatch.setenv("GALINEAR_MNIST", str(tmp_path))
    data = idx.load_mnist("test")
    np.testing.assert_array_equal(data.images, images)
    assert data.source == str(tmp_path)


def test_mnist_pickle_restores_pixels(tmp_path, rng):
    import pickle
    pixels = rng.integers(0, 256, size=(6, 784), dtype=np.uint8)
    parts = tuple((pixels[i:i + 2].astype(np.float32) / 256, np.arange(i, i + 2)) for i in (0, 2, 4))
    path = tmp_path / "mnist.pkl.gz"
    with gzip.open(path, "wb") as handle:
        pickle.dump(parts, handle)
    train = idx._load_mnist_pickle(path, "train")
    test = idx._load_mnist_pickle(path, "test")
    np.testing.assert_array_equal(train.images.reshape(4, 784), pixels[:4])
    np.testing.assert_array_equal(train.labels, [0, 1, 2, 3])
    np.testing.assert_array_equal(test.images.reshape(2, 784), pixels[4:])


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown data set"):
        idx.load_dataset("cifar", "train")
    with pytest.raises(ValueError, match="unknown split"):
        idx.load_dataset("mnist", "valid")
    with pytest.raises(TypeError, match="idx cannot store"):
        idx.write_idx(tmp_path / "x", np.zeros(3, dtype=np.complex64))


def test_torchvision_fallback_downloads_into_cache(tmp_path, monkeypatch, small_images):
    """With no folder holding the files, an installed torchvision is asked to download them."""
    import sys
    import types

    torch = pytest.importorskip("torch")

    images, labels = small_images
    calls = []

    class FakeFashionMNIST:
        def __init__(self, root, train, download):
            calls.append((root, train, download))
            self.data = torch.from_numpy(images.astype(np.uint8))
            self.targets = torch.from_numpy(labels.astype(np.int64))

    fake = types.ModuleType("torchvision")
    fake.datasets = types.SimpleNamespace(FashionMNIST=FakeFashionMNIST)
    monkeypatch.setitem(sys.modules, "torchvision", fake)
    monkeypatch.setattr(idx.importlib.util, "find_spec", lambda name: object() if name == "torchvision" else None)
    monkeypatch.setenv("GALINEAR_FASHION_MNIST", str(tmp_path / "nowhere"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setitem(
        idx.DATASETS, "fashion-mnist",
        idx._DatasetSpec(**{**idx.DATASETS["fashion-mnist"].__dict__, "default_folder": str(tmp_path / "none")}),
    )
    data = idx.load_fashion_mnist("test")
    assert calls == [(str(tmp_path / "cache" / "galinear" / "fashion-mnist"), False, True)]
    np.testing.assert_array_equal(data.images, images)
    np.testing.assert_array_equal(data.labels, labels)
    assert data.images.dtype == np.uint8 and data.labels.dtype == np.int64
    assert data.source.startswith("torchvision:")
