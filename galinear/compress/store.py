"""Where a compression study keeps its work: cache keys, unit checkpoints, captures and results.

Everything lives under the output folder: ``cache/<fingerprint>/`` holds the captures, second
moments and one checkpoint per (method, seed, replaced prefix, layer, projection);
``results.json`` the evaluations. Every file is written atomically (:func:`galinear._io`), so a
killed run leaves finished files or none. Under ``torchrun`` rank r of a study spread over
several processes records its evaluations in ``results-rank<r>.json`` (no two ranks write one
file); every reader merges ``results.json`` with all ``results-rank*.json`` of the same
fingerprint.
"""
from __future__ import annotations

import glob
import hashlib
import os

import numpy as np

from galinear import _io
from galinear.compress import fit
from galinear.compress.fit import atomic_save
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


class Store:
    """File names of one study (``config``: a StudyConfig; ``key``: its fingerprint)."""

    def __init__(self, config, key: str):
        self.config = config
        self.key = key
        self.work = os.path.join(config.cache_dir or os.path.join(config.out_dir, "cache"), key)
        self.results_path = os.path.join(config.out_dir, "results.json")

    # ------------------------------------------------------------------ keys
    def _refit(self) -> str:
        return f"-orefit{self.config.o_epochs:g}" if self.config.refit_o_proj else ""

    def _targets(self) -> str:
        """'' for q/k/v (as ever), else which projections each replaced layer holds ('-Tqkvo')."""
        from galinear.compress import targets

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
        return os.path.join(self.work, "fits", spec.tag(), f"s{seed}", pre, f"L{layer}_{proj}.pt")

    def unit_done(self, spec, seed, prefix, layer) -> bool:
        """Whether every checkpoint of (method, seed, prefix, layer) is on disk."""
        projections = tuple(getattr(self.config, "targets", models.PROJECTIONS)) + (
            ("o_proj",) if self.config.refit_o_proj else ())
        return all(os.path.exists(self.unit_path(spec, seed, prefix, layer, p)) for p in projections)

    def capture_path(self, key: str) -> str:
        return os.path.join(self.work, "captures", f"{key}.pt")

    def capture_folder(self, key: str) -> str:
        """The folder of the capture ``key`` kept in shards (``--shard-windows``): its file name, ``-shards``."""
        return self.capture_path(key)[:-len(".pt")] + "-shards"

    def valid_path(self, key: str) -> str:
        return os.path.join(self.work, "captures", f"{key}-valid{self.config.valid_windows}.pt")

    def residual_path(self, dataset: str, layer: int) -> str:
        return os.path.join(self.work, "captures", f"residual-{dataset}-L{layer}.pt")

    def split_residual_path(self, layer: int) -> str:
        """Residual inputs of ``layer`` (original model) for the training and test windows."""
        return os.path.join(self.work, "captures", f"residual-split-L{layer}.pt")

    def moments_paths(self, key: str) -> list:
        return [os.path.join(self.work, "moments", f"{key}-{part}.npz") for part in ("train", "test")]

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


# ---------------------------------------------------------------------- compressed models
def save_compressed(path: str, replacements: dict, spec, model_name: str, model=None) -> None:
    """Save the replacement modules of a compressed model (state dicts + how to rebuild them).

    With ``model`` (the model they were made for) the file also records its identity
    (:func:`galinear.compress.saving.identity`: family, widths, depth, vocabulary, whole-model
    SHA-256), which :func:`load_compressed` checks; every file records each module's widths and
    the shape, dtype and SHA-256 of each of its tensors.
    """
    from galinear.compress import saving

    payload = {"format": "galinear-compressed-v1", "model": model_name, "spec": spec.to_dict(),
               "modules": {f"{layer}.{proj}": {"state": m.state_dict(), "in": _in_out(m)[0], "out": _in_out(m)[1]}
                           for (layer, proj), m in replacements.items()},
               "checksums": {f"{layer}.{proj}": saving.describe_tensors(m.state_dict())
                             for (layer, proj), m in replacements.items()}}
    if model is not None:
        payload["identity"] = saving.identity(model, name=model_name, reuse=True)
    atomic_save(payload, path)


def _in_out(module):
    if hasattr(module, "in_features") and hasattr(module, "out_features"):
        return int(module.in_features), int(module.out_features)
    raise ValueError(f"{type(module).__name__} does not expose in_features/out_features")


def freeze(module):
    """Eval mode, no gradients; returns the module."""
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def install(module, key, stats, replacements, info) -> None:
    """Freeze a fitted replacement (eval mode, no gradients) and record it and its stats under key."""
    replacements[key] = freeze(module)
    info[key] = stats


_RERUN = "rerun the study that wrote it (its fits are cached, so this takes only the evaluation)"


def _as_folder_config(path: str, payload: dict) -> dict:
    """The parts of a v1 file that :func:`galinear.compress.saving.check_identity` reads, each checked."""
    def bad(what):
        return _io.CorruptFileError(path, what + "; the file is damaged or was edited", _RERUN)

    identity = payload.get("identity")
    if identity is not None and not isinstance(identity, dict):
        raise bad("\"identity\" must be an object")
    saved = dict(identity or {})
    saved.setdefault("name", payload.get("model"))
    if identity is not None and not isinstance(saved.get("weights_sha256"), str):
        saved["weights_sha256"] = None  # an older galinear's embedding fingerprint: see check_identity
    for key in ("hidden_size", "num_hidden_layers", "vocab_size"):
        value = saved.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise bad(f"identity {key} must be a positive integer, got {value!r}")
    entries = payload.get("modules")
    checksums = payload.get("checksums")
    if not isinstance(entries, dict) or not entries:
        raise bad("\"modules\" must be a non-empty mapping (a file without replacements is not a compressed model)")
    if not isinstance(checksums, dict):
        raise _io.CorruptFileError(path, "written by an older galinear, which recorded no checksums of its tensors, "
                                   "so it cannot be checked", _RERUN)
    modules = []
    for key, entry in entries.items():
        layer, _, proj = str(key).partition(".")
        if not layer.isdigit() or proj not in models.ALL_PROJECTIONS:
            raise bad(f"module key {key!r} is not <layer >= 0>.<{'|'.join(models.ALL_PROJECTIONS)}>")
        sizes = (entry.get("in"), entry.get("out")) if isinstance(entry, dict) else (None, None)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in sizes) \
                or not isinstance(entry.get("state"), dict) or not isinstance(checksums.get(key), dict):
            raise bad(f"module {key}: needs in/out widths, a state and its checksums")
        modules.append({"layer": int(layer), "projection": proj, "key": key,
                        "settings": {"in_features": sizes[0], "out_features": sizes[1]}})
    return {"_folder": path, "model": saved, "modules": modules,
            "_fix": "load it into the model it was made from (galinear.compress.load_model on its source)"}


def _refit_class(proj: str, state: dict):
    """"Linear" for an o_proj whose state is a plain matrix (the o_proj refit), else None (the method's class)."""
    return "Linear" if proj == "o_proj" and "weight" in state and set(state) <= {"weight", "bias"} else None


def load_compressed(model, path: str, *, check_weights: bool = True) -> dict:
    """Put the modules saved by :func:`save_compressed` into ``model`` (in place); returns them.

    ``model`` is checked first, as :func:`galinear.compress.load` checks it: every replaced
    projection must have the saved widths, and when the file records the model's identity the
    family, hidden width, depth, vocabulary and (``check_weights``) the whole-model SHA-256 must
    match, and every tensor is checked against its role and its recorded SHA-256
    (:func:`galinear.compress.saving.checked_module`); a mismatch raises ValueError naming it and
    nothing is installed. Afterwards
    ``model.save_pretrained`` refuses while the replacements are installed
    (:func:`galinear.compress.saving.guard_save_pretrained`).
    """
    from galinear.compress import saving

    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path}: no such compressed model file")
    if not os.path.isfile(path):  # a FIFO would wait for a writer, a device never end
        raise _io.UnreadableFileError(path, "is not a regular file", "pass the .pt file a study wrote under "
                                      "<out>/models")
    payload = fit.load(path, recompute=False)
    if not isinstance(payload, dict) or payload.get("format") != "galinear-compressed-v1":
        raise ValueError(f"{path} is not a compressed model written by galinear")
    config = _as_folder_config(path, payload)
    saving.check_identity(config, model, check_weights and payload.get("identity") is not None)
    spec = saving.method_spec(payload.get("spec") if isinstance(payload.get("spec"), dict) else {}, path)
    built = {}
    for item in config["modules"]:
        key, layer, proj = item["key"], item["layer"], item["projection"]
        entry, where = payload["modules"][key], f"{path}: layer {layer} {proj}"
        has_bias = any(k == "bias" or k.endswith(".bias") for k in entry["state"])
        module = saving.build_replacement(spec, {**item, "bias": has_bias, "class": _refit_class(proj, entry["state"])}, where, check_class=False)
        saving.checked_module(where, module, entry["state"], payload["checksums"][key])
        built[(layer, proj)] = freeze(module)
    for (layer, proj), module in built.items():  # installed only once every module was built
        models.set_projection(model, layer, proj, module)
    saving.guard_save_pretrained(model)
    return built
