"""Helpers for tests of :mod:`galinear.compress`: a study configuration small enough for a test,
and a kept compressed-model folder. No download anywhere; torch loads on the first call that
builds a model."""
from __future__ import annotations

import os

from galinear.compress import StudyConfig
from galinear.compress.methods import catalogue as methods
from galinear.compress.storage import folder_format
from galinear.lm import models

__all__ = ["kept_folder", "tiny_config", "write_v1_file"]


def tiny_config(out_dir, **overrides):
    """A :class:`galinear.compress.StudyConfig` small enough for a test: data sets "a" and "b"
    (:data:`galinear.testing.models.TEXTS`), two layer sets, methods dense and lr1, short windows; ``overrides`` replace
    any field."""
    settings = dict(datasets=("a", "b"), layer_sets=((1,), (0, 2)), methods=("dense", "lr1"), seeds=(0,),
                    train_windows=3, eval_windows=2, group=2, mse_windows=1, window=32, stride=16, epochs=2.0,
                    out_dir=str(out_dir), progress=False, verbose=False)
    settings.update(overrides)
    return StudyConfig(**settings)


def kept_folder(folder, source: str, spec, projections=("q_proj", "k_proj", "v_proj"), layers=(0,), seed: int = 0,
                **save_options) -> str:
    """A kept compressed-model folder (:func:`galinear.compress.storage.folder_format.save`) for the model saved at
    ``source``: every projection of ``layers`` replaced by a fresh module of method ``spec`` (a
    :class:`galinear.compress.MethodSpec`; torch seeded with ``seed``), the source recorded as
    given; ``save_options`` go to ``save``. Returns the folder."""
    import torch

    model = models.load_model(source).model
    torch.manual_seed(seed)
    replacements = {}
    for layer in layers:
        for proj in projections:
            dense = models.projection(model, layer, proj)
            replacements[(layer, proj)] = methods.build_module(spec, dense.in_features, dense.out_features).eval()
    return folder_format.save(os.fspath(folder), model, replacements, spec, source=source, **save_options)


def write_v1_file(path, replacements: dict, spec, model_name: str, model=None, *, pickled: bool = False) -> str:
    """A compressed-model file of format v1, the single-file layout :func:`galinear.compress.load`
    reads through :func:`galinear.compress.storage.folder_format.as_current`: one state file holding the format,
    the model's name, the method (``spec.to_dict()``), every module's state and widths under
    ``"<layer>.<projection>"``, the shape, dtype and SHA-256 of each of its tensors and, with
    ``model``, that model's identity (:func:`galinear.compress.storage.folder_format.identity`). ``pickled``
    writes it with ``torch.save`` instead of as a safetensors state file. Returns the path."""
    import torch

    from galinear import _io

    def widths(module):
        return int(module.in_features), int(module.out_features)

    payload = {"format": folder_format.FILE_FORMAT, "model": model_name, "spec": spec.to_dict(),
               "modules": {f"{layer}.{proj}": {"state": m.state_dict(), "in": widths(m)[0], "out": widths(m)[1]}
                           for (layer, proj), m in replacements.items()},
               "checksums": {f"{layer}.{proj}": folder_format.describe_tensors(m.state_dict())
                             for (layer, proj), m in replacements.items()}}
    if model is not None:
        payload["identity"] = folder_format.identity(model, name=model_name)
    path = os.fspath(path)
    if pickled:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        torch.save(payload, path)
    else:
        _io.save_state(path, payload)
    return path
