"""The captures cache of a study (:class:`Captures`): the token rows of the training, held-out and
validation windows, the attention inputs captured at a layer in the original or partly compressed
network, their second moments and the residual inputs of the held-out windows; each cached on
disk through the study's :class:`~galinear.compress.storage.store.Store` and, for the original
network, held in memory until :meth:`Captures.release` drops a layer.

The orchestrator builds one cache and passes it to what reads captures (the fits of
:mod:`galinear.compress.study.layers`, the joint objectives, the units of a run under torchrun);
the cache owns its entries, and nothing else adds or removes them.

With ``shard_windows`` (``--shard-windows N``) a training / test capture is written in
safetensors shards of N windows (:func:`galinear.compress.fitting.activations.capture_to_shards`) and
its training rows are returned as a :class:`~galinear.compress.fitting.activations.CaptureShards` read
batch by batch, so neither the capture nor the fits hold more than one shard and one batch of
the training split; the test rows (``mse_windows`` per text) are returned as a tensor. The fits
are the same, bit for bit. The joint objectives (:mod:`galinear.compress.fitting.objective`) take
whole windows of every training row at once: they ask with ``whole=True``, and the training rows
are read back whole.
"""
from __future__ import annotations

import glob
import os
import shutil
import time

import numpy as np

from galinear import _io
from galinear.compress.fitting import activations, closed_form, surgery
from galinear.compress.storage import checkpoints
from galinear.lm import models

__all__ = ["Captures", "done_here"]


def done_here(layer: int, replacements: dict) -> tuple:
    """The projections of ``layer`` among ``replacements``, in forward order."""
    return tuple(p for p in models.ALL_PROJECTIONS if (layer, p) in replacements)


class Captures:
    """Captures, second moments and residual inputs of one study.

    Parameters
    ----------
    model
        The original model (replacements are installed per capture and removed after it).
    windows : dict
        ``{text: Windows}`` of the study (:func:`galinear.lm.windows.split_windows`).
    store : Store
        Names every cache file (:class:`galinear.compress.storage.store.Store`).
    mse_windows : int
        Held-out windows per text whose rows measure test MSE.
    shard_windows : int or None
        Windows per shard of a capture kept on disk in shards (None: one file).
    skip_lower_layers : bool
        Whether a capture or an evaluation may start from the residual stream at a layer
        (:func:`galinear.compress.fitting.activations.skip_is_exact`).
    log : callable
        Takes one line.
    bars : bool
        Whether captures show tqdm bars.
    """

    def __init__(self, model, windows: dict, store, *, mse_windows: int, shard_windows: int | None,
                 skip_lower_layers: bool, log, bars: bool = False):
        self.model, self.windows, self.store = model, windows, store
        self.mse_windows, self.shard_windows = mse_windows, shard_windows
        self.skip_lower_layers, self.log, self.bars = skip_lower_layers, log, bars
        self._original = {}   # (layer, where) -> (train, test); (layer, "test-<where>") -> test rows
        self._valid = {}      # key -> (inputs, original inputs) on the validation windows
        self._residuals = {}  # (dataset, layer) -> residual inputs of the held-out windows

    # ------------------------------------------------------------------ data
    def train_ids(self) -> np.ndarray:
        """Token ids (windows, L) of the training windows of every text, in text order."""
        return np.concatenate([w.batch(w.train) for w in self.windows.values()])

    def test_ids(self) -> np.ndarray:
        """Token ids of the held-out windows whose rows measure test MSE (``mse_windows`` per text)."""
        return np.concatenate([w.batch(w.heldout[:self.mse_windows]) for w in self.windows.values()])

    def valid_ids(self) -> np.ndarray:
        """Token ids of the validation windows of every text (the stopping rules)."""
        return np.concatenate([w.batch(w.valid) for w in self.windows.values()])

    def release(self, layer: int) -> None:
        """Forget the in-memory captures of ``layer`` once it is fitted (they stay on disk): a sequential
        run then holds the captures of one layer at a time, whatever the number of layers."""
        for key in [k for k in self._original if k[0] == layer]:
            del self._original[key]
        suffix = f"-L{layer}"
        for key in [k for k in self._valid if k.endswith(suffix)]:
            del self._valid[key]

    def valid(self, layer: int, replacements: dict, key: str | None, where: str = "attn_in"):
        """(inputs, original inputs) of ``where`` at ``layer`` on the validation windows (stopping rule); cached."""
        key = f"original-{where}-L{layer}" if key is None else key
        if key in self._valid:
            return self._valid[key]
        ids = self.valid_ids()
        if len(ids) == 0:
            raise ValueError("no validation window is left beside the training windows; give a longer text "
                             "or fewer --train-windows, or run without --until-converged")
        def make() -> dict:
            x_orig = activations.capture(self.model, layer, ids, where=where)
            if replacements:
                with surgery.swapped(self.model, replacements):
                    return {"input": activations.capture(self.model, layer, ids, where=where), "original": x_orig}
            return {"input": x_orig, "original": x_orig}

        cached = checkpoints.cached(self.store.valid_path(key), make)
        self._valid[key] = (cached["input"], cached["original"])
        return self._valid[key]

    @staticmethod
    def _as_needed(pair: tuple, whole: bool) -> tuple:
        """``pair`` with its training rows read back as one tensor when ``whole`` and kept in shards."""
        train, test = pair
        if whole and isinstance(train, activations.CaptureShards):
            return train.to_tensor(), test
        return pair

    def pair(self, layer: int, where: str, replacements: dict, key: str, whole: bool = False):
        """(train, test) captures at ``layer`` in the network with ``replacements``; cached on disk.
        ``whole``: the training rows as one tensor even when they are kept in shards (for fits that
        need every row at once)."""
        return self._as_needed(self._pair(layer, where, replacements, key), whole)

    def _pair(self, layer: int, where: str, replacements: dict, key: str):
        if self.shard_windows is not None:
            return self._sharded_pair(layer, where, replacements, key)
        def make() -> dict:
            ids = np.concatenate([self.train_ids(), self.test_ids()])
            label = f"capture {key}" if self.bars else None
            residuals = self.split_residuals(layer) if self._starts_mid_stack(layer, replacements) else None
            with surgery.swapped(self.model, replacements):
                rows = activations.capture(self.model, layer, ids, where=where, progress=label, residuals=residuals)
            n_train = self.train_ids().size  # windows x ids per window (the BOS included)
            self.log(f"captured {key}: {(n_train, rows.shape[1])} training rows")
            return {"train": rows[:n_train].contiguous(), "test": rows[n_train:].contiguous()}

        cached = checkpoints.cached(self.store.capture_path(key), make)
        return cached["train"], cached["test"]

    def _starts_mid_stack(self, layer: int, replacements: dict) -> bool:
        """Whether a capture at ``layer`` may start from the original residual stream there: the
        model supports it and nothing below ``layer`` is replaced (o_proj captures behind a
        single replaced layer, one per method and seed)."""
        return (bool(replacements) and layer > 0 and self.skip_lower_layers
                and min(at for at, _ in replacements) >= layer)

    def split_residuals(self, layer: int):
        """Residual-stream inputs of ``layer`` in the original model for the training and test
        windows (those of :meth:`pair`), computed once per layer and cached on disk."""
        def make() -> dict:
            residuals = activations.residual_inputs(self.model, layer, np.concatenate([self.train_ids(), self.test_ids()]))
            self.log(f"residual inputs of layer {layer} for the training and test windows: {tuple(residuals.shape)}")
            return {"residuals": residuals}

        return checkpoints.cached(self.store.split_residual_path(layer), make)["residuals"]

    def _sharded_pair(self, layer: int, where: str, replacements: dict, key: str):
        """:meth:`pair` kept in shards: (CaptureShards of the training rows, test tensor)."""
        folder = self.store.capture_folder(key)
        n_train = self.train_ids().size  # windows x ids per window (the BOS included)
        n_rows = n_train + self.test_ids().size
        shards = self._complete_capture(folder, n_rows)
        if shards is None:
            ids = np.concatenate([self.train_ids(), self.test_ids()])
            label = f"capture {key}" if self.bars else None
            _remove_unfinished(folder)
            t0 = time.perf_counter()
            with surgery.swapped(self.model, replacements):
                shards = activations.capture_to_shards(self.model, layer, ids, folder, where=where, progress=label,
                                                       shard_windows=self.shard_windows)
            self.log(f"captured {key}: ({n_train}, {shards.width}) training rows in shards of "
                     f"{self.shard_windows} windows, {time.perf_counter() - t0:.1f} s")
        return shards.view(0, n_train), shards.view(n_train, n_rows).to_tensor()

    def _complete_capture(self, folder: str, rows: int):
        """The capture in ``folder`` when it is whole (its index, ``rows`` rows, every shard readable);
        otherwise None, and a damaged folder is removed (a rerun captures it again)."""
        if not os.path.isdir(folder):
            return None
        try:
            shards = activations.CaptureShards(folder)
            if len(shards) != rows:
                raise _io.CorruptFileError(folder, f"{len(shards)} rows, the study's windows have {rows}",
                                           "it is captured again")
            index = _io.load_json(os.path.join(folder, activations._SHARDS_INDEX))
            for start in np.concatenate([[0], np.cumsum(index["rows"])[:-1]]):
                shards[int(start)]  # opens every shard (its header and one row)
        except (ValueError, KeyError, TypeError) as error:  # CorruptFileError is a ValueError
            self.log(f"{error}; capturing it again")
            shutil.rmtree(folder, ignore_errors=True)
            return None
        return shards

    def stage_key(self, spec, seed: int, layer_set, i: int, where: str, replacements: dict) -> str:
        """The cache key of the ``where`` rows at ``layer_set[i]`` in the network with ``replacements``
        installed (:meth:`galinear.compress.storage.store.Store.stage_input_key`)."""
        layer, prefix = layer_set[i], tuple(layer_set[:i])
        return self.store.stage_input_key(spec, seed, prefix, layer, where, done_here(layer, replacements))

    def stage_inputs(self, spec, seed: int, layer_set, i: int, where: str, replacements: dict, whole: bool = False):
        """(train, test, original train, original test, cache key) of the ``where`` rows at
        ``layer_set[i]`` in the network with ``replacements`` installed: the earlier layers of the
        set and this layer's projections fitted before (:mod:`galinear.compress.methods.targets`).
        ``whole``: training rows as one tensor (:meth:`pair`)."""
        layer = layer_set[i]
        key = self.stage_key(spec, seed, layer_set, i, where, replacements)
        x_orig, x_orig_test = self.original(layer, where, whole)
        if key.startswith("original-"):
            return x_orig, x_orig_test, x_orig, x_orig_test, key
        return (*self.pair(layer, where, replacements, key, whole), x_orig, x_orig_test, key)

    def test_rows(self, layer: int, where: str, installed: dict):
        """(test rows, original test rows) of ``where`` at ``layer``, the first in the network with
        ``installed``: the held-out rows a projection's test MSE is measured on (not cached on disk:
        ``mse_windows`` windows per text)."""
        ids = self.test_ids()
        key = (layer, f"test-{where}")
        if key not in self._original:
            self._original[key] = activations.capture(self.model, layer, ids, where=where)
        with surgery.swapped(self.model, installed):
            return activations.capture(self.model, layer, ids, where=where), self._original[key]

    def original(self, layer: int, where: str = "attn_in", whole: bool = False):
        """(train, test) captures of ``where`` at ``layer`` in the original network; held in memory
        until :meth:`release`. ``whole``: training rows as one tensor (:meth:`pair`)."""
        key = (layer, where)
        if key not in self._original:
            self._original[key] = self._pair(layer, where, {}, f"original-{where}-L{layer}")
        return self._as_needed(self._original[key], whole)

    # ------------------------------------------------------------------ second moments
    def moments(self, layer: int, replacements: dict, key: str, where: str = "attn_in"):
        """Second moments (train, test) of the ``where`` rows at ``layer`` (default: the q/k/v
        input), streamed; cached as state files (:meth:`galinear.compress.storage.store.Store.moments_paths`).

        With no replacement the input is the original network's (one accumulator of x x^T);
        otherwise each chunk of windows runs through the original and the partly compressed
        network and the cross moments E[x x_o^T] are accumulated too. At most ``chunk`` windows
        of activations are in memory at a time (a capture already held in memory is reused).
        """
        paths = self.store.moments_paths(key)
        cached = [closed_form.SecondMoments.load(p) for p in paths]
        if all(m is not None for m in cached):
            return tuple(cached)
        reader = {"attn_in": "q_proj", "o_in": "o_proj", "mlp_in": "gate_proj", "down_in": "down_proj"}[where]
        width = models.projection(self.model, layer, reader).in_features
        out = []
        t0 = time.perf_counter()
        for ids, path in zip((self.train_ids(), self.test_ids()), paths):
            acc = closed_form.SecondMoments(width)
            held = self._original.get((layer, where))
            held = None if held is None else held[0 if path is paths[0] else 1]
            chunk, length = 4, ids.shape[1]  # the same chunks whether or not a capture is held (same sums)
            for start in range(0, len(ids), chunk):
                part = ids[start:start + chunk]
                if held is not None:
                    x_orig = held[start * length:(start + len(part)) * length]
                else:
                    x_orig = activations.capture(self.model, layer, part, where=where)
                if replacements:
                    with surgery.swapped(self.model, replacements):
                        x_in = activations.capture(self.model, layer, part, where=where)
                    acc.update(x_in, x_orig)
                else:
                    acc.update(x_orig)
            acc.save(path)
            out.append(acc)
        self.log(f"second moments {key}: {out[0].n} training rows, {time.perf_counter() - t0:.1f} s")
        return tuple(out)

    # ------------------------------------------------------------------ residual inputs
    def start(self, dataset: str, layer: int):
        """(layer, residual inputs of the held-out windows) to skip the untouched lower layers."""
        if not self.skip_lower_layers or layer == 0:
            return None
        key = (dataset, layer)
        if key not in self._residuals:
            w = self.windows[dataset]
            self._residuals[key] = checkpoints.cached(self.store.residual_path(dataset, layer),
                                              lambda: activations.residual_inputs(self.model, layer, w.batch(w.heldout)))
        return layer, self._residuals[key]


def _remove_unfinished(folder: str) -> None:
    """Remove the temporary folders a killed capture of ``folder`` left beside it
    (:func:`galinear._io.atomic_folder`; one writer per capture, so none is still being filled)."""
    parent, name = os.path.split(os.path.abspath(folder))
    for stale in glob.glob(os.path.join(glob.escape(parent), f".{glob.escape(name)}.*.tmp")):
        shutil.rmtree(stale, ignore_errors=True)
