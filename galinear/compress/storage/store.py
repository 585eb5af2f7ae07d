"""Where a compression study keeps its work: every path, cache and checkpoint, and its results.

The :class:`Store` names every file a study reads or writes. Under the output folder:
``cache/<fingerprint>/`` (or ``--cache DIR/<fingerprint>/``) holds the captures, second
moments, residual inputs, one checkpoint per (method, seed, replaced prefix, layer,
projection) and the distillation checkpoints; ``results.json`` the evaluations;
``models/<tag>-s<seed>-L<layers>/`` (or, with ``--save DIR``, ``DIR/<tag>-s<seed>-L<layers>/``)
one compressed-model folder per kept model (:mod:`galinear.compress.storage.folder_format`), listed in the
``index.json`` beside them.

One cache format: every cached tensor lives in a safetensors file ending ``.safetensors``
(:func:`galinear._io.save_state`: the tensors as safetensors data, the structure around them,
numbers and names as JSON in the file's header); a capture kept in shards is a folder of
``.safetensors`` shards with a JSON index (``capture.json``). Files of other cache formats
(``.pt``-named state files, ``.npz`` moments) are never read: they are cache misses, named once in
the log when the study starts. Every file is written atomically (:func:`galinear._io`), so a
killed run leaves finished files or none; a damaged one is removed and recomputed. Under
``torchrun`` rank r of a study spread over several processes records its evaluations in
``results-rank<r>.json`` (no two ranks write one file); every reader merges ``results.json``
with all ``results-rank*.json`` of the same fingerprint.
"""
from __future__ import annotations

import glob
import hashlib
import os

import numpy as np

from galinear import _io
from galinear.compress.storage import checkpoints
from galinear.lm import models


def set_name(layer_set) -> str:
    """(16, 17) -> '16+17'."""
    return "+".join(str(x) for x in layer_set)


#: Study settings that every cached unit depends on (the others are in the units' own names).
KEY_SETTINGS = ("window", "stride", "heldout_fraction", "group", "split_seed", "train_windows", "eval_windows",
                "mse_windows", "valid_windows")

#: What each part of a cache key names, for the message when one changes.
_KEY_PARTS = {"model": "model (weights or configuration)", "tokenizer": "tokenizer", "texts": "texts or their windows",
              "settings": "study settings"}


class CacheKey(str):
    """16 hex digits naming a study's inputs, with the SHA-256 of each part in ``parts``."""

    parts: dict


def tokenizer_hash(tokenizer) -> str:
    """SHA-256 of a tokenizer's definition: the whole JSON of a fast Hugging Face tokenizer (vocabulary,
    merges, normaliser, special tokens) or the vocabulary of another; else its class and settings."""
    h = hashlib.sha256(f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}".encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        h.update(backend.to_str().encode())
    elif hasattr(tokenizer, "get_vocab"):
        h.update(repr(sorted(tokenizer.get_vocab().items())).encode())
    else:
        h.update(repr(sorted((k, v) for k, v in vars(tokenizer).items()
                             if isinstance(v, (bool, int, float, str, type(None))))).encode())
    for name in ("bos_token_id", "eos_token_id", "add_bos_token", "add_eos_token"):
        h.update(f"{name}={getattr(tokenizer, name, None)!r}".encode())
    return h.hexdigest()


def _texts_hash(windows: dict) -> str:
    h = hashlib.sha256()
    for text, w in windows.items():
        h.update(text.encode() + b"\0")
        h.update(np.ascontiguousarray(w.tokens).tobytes())
        h.update(np.ascontiguousarray(w.train).tobytes())
        h.update(np.ascontiguousarray(w.heldout).tobytes())
        h.update(f"{w.window},{w.stride}".encode())
    return h.hexdigest()


def fingerprint(model, tokenizer, windows: dict, config) -> CacheKey:
    """The cache key of a study: 16 hex digits of the SHA-256 of its model's content (every weight
    and its configuration, :func:`galinear.lm.models.content_hash`, computed once per run),
    its tokenizer, its token streams and window split, and the settings in :data:`KEY_SETTINGS`.
    A model updated in place, or another model under the same folder name, has another key."""
    settings = {name: getattr(config, name, None) for name in KEY_SETTINGS}
    parts = {"model": models.content_hash(model, reuse=True), "tokenizer": tokenizer_hash(tokenizer),
             "texts": _texts_hash(windows),
             "settings": hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()}
    key = CacheKey(hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()[:16])
    key.parts = parts
    return key


#: The ending of every cache and checkpoint file.
CACHE_SUFFIX = ".safetensors"
#: Endings of the cache files of other formats, which a study never reads.
OTHER_CACHE_SUFFIXES = (".pt", ".npz")


def cache_root(config) -> str:
    """The folder holding the cache folders of ``config``'s studies (``--cache``, else ``<out>/cache``)."""
    return config.cache_dir or os.path.join(config.out_dir, "cache")


#: The folder under ``out_dir`` that holds the kept compressed models (without ``--save``).
MODELS = "models"


def models_root(config) -> str | None:
    """Where ``config``'s study keeps its compressed-model folders: ``--save DIR``, else
    ``<out>/models`` (``save_models``), else None (none kept)."""
    if config.save_dir:
        return config.save_dir
    return os.path.join(config.out_dir, MODELS) if config.save_models else None


class Store:
    """Every path of one study (``config``: a StudyConfig; ``key``: its fingerprint), and its
    unit checkpoints (:meth:`saved_unit`, :meth:`save_unit`)."""

    def __init__(self, config, key: str, log=None):
        self.config = config
        self.key = key
        self.work = os.path.join(cache_root(config), key)
        self.results_path = os.path.join(config.out_dir, "results.json")
        self.models_root = models_root(config)
        if log is not None:
            self._name_other_formats(log)

    def _name_other_formats(self, log) -> None:
        """One log line when the cache folder holds files of other cache formats (not read)."""
        if not os.path.isdir(self.work):
            return
        found = sum(1 for _, _, files in os.walk(self.work) for f in files if f.endswith(OTHER_CACHE_SUFFIXES))
        if found:
            log(f"{self.work} holds {found} cache file(s) of another format ({', '.join(OTHER_CACHE_SUFFIXES)}); "
                f"they are not read (what they held is computed again into {CACHE_SUFFIX} files) and may be deleted")

    # ------------------------------------------------------------------ keys
    def _refit(self) -> str:
        return f"-orefit{self.config.o_epochs:g}" if self.config.refit_o_proj else ""

    def _targets(self) -> str:
        """'' for q/k/v (as ever), else which projections each replaced layer holds ('-Tqkvo')."""
        from galinear.compress.methods import targets

        return targets.tag(getattr(self.config, "targets", models.PROJECTIONS))

    def prefix_key(self, spec, seed, prefix) -> str:
        """The network with ``prefix`` replaced by ``spec`` and ``seed`` (o_proj refit included)."""
        return f"{spec.tag()}-s{seed}-P{set_name(prefix)}" + self._refit() + self._targets()

    def input_key(self, spec, seed, prefix, layer) -> str:
        """The capture of layer's q/k/v input in the network with ``prefix`` replaced."""
        return f"original-attn_in-L{layer}" if not prefix else self.prefix_key(spec, seed, prefix) + f"-attn_in-L{layer}"

    def stage_input_key(self, spec, seed, prefix, layer, where: str, done) -> str:
        """The capture of ``where`` at ``layer`` in the network with ``prefix`` replaced and this
        layer's projections ``done`` too (``done`` empty: :meth:`input_key`'s network)."""
        if not prefix and not done:
            return f"original-{where}-L{layer}"
        net = self.prefix_key(spec, seed, prefix) if prefix else f"{spec.tag()}-s{seed}-Pnone{self._targets()}"
        return net + (f"-R{'+'.join(p.split('_')[0] for p in done)}" if done else "") + f"-{where}-L{layer}"

    def o_input_key(self, spec, seed, layer_set_upto) -> str:
        """The capture of o_proj's input with the layers ``layer_set_upto`` replaced (its last one included)."""
        return (f"{spec.tag()}-s{seed}-P{set_name(layer_set_upto)}-orefit{self.config.o_epochs:g}"
                f"-o_in-L{layer_set_upto[-1]}")

    def unit_path(self, spec, seed, prefix, layer, proj) -> str:
        """A fitted unit. The q/k/v fits of a set's first layer see the original network whatever
        the o_proj refit, so their name does not carry it: studies with and without the refit that
        share a cache (``--cache``) share those fits."""
        refit = self._refit() if prefix or proj == "o_proj" else ""
        pre = "P" + (set_name(prefix) if prefix else "none") + refit + self._targets()
        return os.path.join(self.work, "fits", spec.tag(), f"s{seed}", pre, f"L{layer}_{proj}{CACHE_SUFFIX}")

    def unit_projections(self) -> tuple:
        """The projections one layer's units fit: the targets, and o_proj with ``--refit-o-proj``."""
        return tuple(getattr(self.config, "targets", models.PROJECTIONS)) + (
            ("o_proj",) if self.config.refit_o_proj else ())

    def saved_unit(self, spec, seed, prefix, layer) -> dict:
        """``{projection: record}`` of the readable checkpoints of the layer's units
        (:meth:`unit_projections`) at ``layer`` after ``prefix``; a missing one is left out, an
        unreadable one is removed (:func:`galinear.compress.storage.checkpoints.load`) and left out.

        A layer's fit reads this once, before it starts: it decides which units are fitted and
        which are taken back (:func:`galinear.compress.study.layers.fit_layer_set`)."""
        out = {}
        for proj in self.unit_projections():
            record = checkpoints.load(self.unit_path(spec, seed, prefix, layer, proj))
            if record is not None:
                out[proj] = record
        return out

    def save_unit(self, spec, seed, prefix, layer, records: dict) -> None:
        """Write the checkpoint of every ``{projection: record}`` of a unit, atomically, one file each."""
        for proj, record in records.items():
            checkpoints.atomic_save(record, self.unit_path(spec, seed, prefix, layer, proj))

    def unit_done(self, spec, seed, prefix, layer) -> bool:
        """Whether every checkpoint of (method, seed, prefix, layer) is on disk and readable."""
        return len(self.saved_unit(spec, seed, prefix, layer)) == len(self.unit_projections())

    def capture_path(self, key: str) -> str:
        return os.path.join(self.work, "captures", f"{key}{CACHE_SUFFIX}")

    def capture_folder(self, key: str) -> str:
        """The folder of the capture ``key`` kept in shards (``--shard-windows``)."""
        return os.path.join(self.work, "captures", f"{key}-shards")

    def valid_path(self, key: str) -> str:
        return os.path.join(self.work, "captures", f"{key}-valid{self.config.valid_windows}{CACHE_SUFFIX}")

    def residual_path(self, dataset: str, layer: int) -> str:
        return os.path.join(self.work, "captures", f"residual-{dataset}-L{layer}{CACHE_SUFFIX}")

    def split_residual_path(self, layer: int) -> str:
        """Residual inputs of ``layer`` (original model) for the training and test windows."""
        return os.path.join(self.work, "captures", f"residual-split-L{layer}{CACHE_SUFFIX}")

    def moments_paths(self, key: str) -> list:
        """The second moments (:class:`galinear.compress.fitting.closed_form.SecondMoments`) of ``key``'s training and test rows."""
        return [os.path.join(self.work, "moments", f"{key}-{part}{CACHE_SUFFIX}") for part in ("train", "test")]

    def distill_path(self, spec, seed, layer_set, settings: str) -> str:
        """The checkpoint of the distillation stage of one compressed model (``settings``:
        :func:`galinear.compress.fitting.distill.settings_tag`)."""
        return os.path.join(self.work, "distill", f"{spec.tag()}-s{seed}-L{set_name(layer_set)}-{settings}{CACHE_SUFFIX}")

    def wikitext_folder(self) -> str:
        """Where the WikiText-2 token ids are cached (beside the cache folders, shared by every study there)."""
        from galinear.lm import wikitext

        return os.path.join(cache_root(self.config), wikitext.NAME)

    # ------------------------------------------------------------------ kept models
    def model_folder(self, tag: str, seed: int, layer_set) -> str | None:
        """The compressed-model folder of one kept model (None when the study keeps none)."""
        if self.models_root is None:
            return None
        return os.path.join(self.models_root, f"{tag}-s{seed}-L{set_name(layer_set)}")

    def model_kept(self, tag: str, seed: int, layer_set) -> bool:
        """Whether that folder is written (or the study keeps no models)."""
        from galinear.compress.storage import folder_format

        folder = self.model_folder(tag, seed, layer_set)
        return folder is None or os.path.exists(os.path.join(folder, folder_format.CONFIG))

    def write_index(self) -> None:
        """``index.json`` beside the kept folders, listing every one of them."""
        from galinear.compress.storage import folder_format

        if self.models_root is None or not os.path.isdir(self.models_root):
            return
        saved = [f for f in os.listdir(self.models_root)
                 if os.path.exists(os.path.join(self.models_root, f, folder_format.CONFIG))]
        folder_format.write_index(self.models_root, saved)

    # ------------------------------------------------------------------ results
    def rank_results_path(self, rank: int) -> str:
        return os.path.join(self.config.out_dir, f"results-rank{rank}.json")

    def _read(self, path: str, log) -> dict:
        try:
            data = _io.load_json(path)
        except _io.CorruptFileError as error:
            log(f"{error}; starting it afresh (the evaluations it held are redone)")
            return {}
        if not isinstance(data, dict):
            return {}
        if data.get("fingerprint") != self.key:
            self._why_not_reused(path, data, log)
            return {}
        return data.get("entries", {})

    def _why_not_reused(self, path: str, data: dict, log) -> None:
        """Say why the results in ``path`` belong to another study and are not reused."""
        count = len(data.get("entries") or {})
        if not count:
            return
        old, new = data.get("key_parts"), getattr(self.key, "parts", None)
        if isinstance(old, dict) and new:
            changed = [_KEY_PARTS[k] for k in _KEY_PARTS if old.get(k) != new.get(k)]
            what = ", ".join(changed) or "cache key"
            detail = (f" (model SHA-256 {str(old.get('model'))[:12]}... then, {new['model'][:12]}... now)"
                      if "model" in [k for k in _KEY_PARTS if old.get(k) != new.get(k)] else "")
            reason = f"were computed with another {what}{detail}"
        else:
            reason = ("were computed under the cache key of an older galinear, which named the model by its "
                      "folder and one weight sum and could mix up two models")
        import sys

        print(f"{path}: its {count} results {reason}; they are not reused: this study recomputes them under key "
              f"{self.key} (its cache folder {self.work})", file=sys.stderr, flush=True)

    def load_results(self, log, rank: int | None = None) -> tuple:
        """(all entries: results.json merged with every rank's file, the entries of ``rank``'s own file)."""
        entries = self._read(self.results_path, log) if os.path.exists(self.results_path) else {}
        own = {}
        for path in sorted(glob.glob(os.path.join(self.config.out_dir, "results-rank*.json"))):
            part = self._read(path, log)
            entries.update(part)
            if rank is not None and path == self.rank_results_path(rank):
                own = part
        parts = getattr(self.key, "parts", None)
        extra = {"key_parts": parts} if parts else {}
        return ({"fingerprint": self.key, **extra, "entries": entries},
                {"fingerprint": self.key, **extra, "entries": own})

    def save_results(self, results: dict, rank: int | None = None) -> None:
        """Write results.json, or (``rank`` given) that rank's own file."""
        path = self.results_path if rank is None else self.rank_results_path(rank)
        _io.save_json(path, results, sort_keys=True)

