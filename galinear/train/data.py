"""Image data sets as standardised float tensors for the MLP trainer."""
from __future__ import annotations

import numpy as np
import torch

from galinear.data.idx import load_dataset

__all__ = ["image_tensors", "standardise", "class_count"]


def class_count(name: str) -> int:
    """Number of classes of data set ``name``: Fashion-MNIST and MNIST both have 10 (labels 0..9),
    whatever subset of them a run trains on."""
    if name not in ("fashion-mnist", "mnist"):
        raise ValueError(f"unknown data set {name!r}; choose 'fashion-mnist' or 'mnist'")
    return 10


def standardise(train_images: np.ndarray, test_images: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Flatten uint8 images and map pixels p to (p/255 - m) / s.

    m and s are the mean and standard deviation of all training pixels (one scalar each, so no
    information from the test set is used).
    """
    train = train_images.reshape(train_images.shape[0], -1).astype(np.float32) / 255.0
    test = test_images.reshape(test_images.shape[0], -1).astype(np.float32) / 255.0
    mean = float(train.mean())
    std = float(train.std()) or 1.0
    return torch.from_numpy((train - mean) / std), torch.from_numpy((test - mean) / std)


def image_tensors(name: str, folder=None, limit_train: int | None = None, limit_test: int | None = None):
    """(x_train, y_train, x_test, y_test) of ``name`` ("fashion-mnist" or "mnist").

    ``limit_train`` / ``limit_test`` keep the first examples only (for quick checks).
    """
    train = load_dataset(name, "train", folder)
    test = load_dataset(name, "test", folder)
    if train.images.shape[1:] != test.images.shape[1:]:
        from galinear.data.idx import IdxFormatError

        (rows, cols), (test_rows, test_cols) = train.images.shape[1:], test.images.shape[1:]
        raise IdxFormatError(f"the training images of {train.source} are {rows} x {cols} pixels but the test images of "
                             f"{test.source} are {test_rows} x {test_cols}: the train-images and t10k-images files do "
                             "not belong together; put the two splits of one data set in the folder")
    train_images, train_labels = train.images[:limit_train], train.labels[:limit_train]
    test_images, test_labels = test.images[:limit_test], test.labels[:limit_test]
    x_train, x_test = standardise(train_images, test_images)
    return x_train, torch.from_numpy(train_labels), x_test, torch.from_numpy(test_labels)
