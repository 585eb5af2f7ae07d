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
from galinear.compress import fit, methods, models
from galinear.compress.fit import atomic_save


def set_name(layer_set) -> str:
    """(16, 17) -> '16+17'."""
    return "+".join(str(x) for x in layer_set)


def fingerprint(name: str, model, windows: dict, mse_windows: int) -> str:
    """16 hex digits naming the model, the token streams and the window split of a study."""
    h = hashlib.sha256()
    h.update(name.encode())
    for p in model.parameters():  # cheap identity of the weights: a few sums
        h.update(np.float64(p.detach().double().sum()).tobytes())
        break
    for text, w in windows.items():
        h.update(text.encode())
        h.update(np.ascontiguousarray(w.tokens).tobytes())
        h.update(w.train.tobytes())
        h.update(w.heldout.tobytes())
        h.update(f"{w.window},{w.stride}".encode())
    h.update(str(mse_windows).encode())
    return h.hexdigest()[:16]


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

    def prefix_key(self, spec, seed, prefix) -> str:
        """The network with ``prefix`` replaced by ``spec`` and ``seed`` (o_proj refit included)."""
        return f"{spec.tag()}-s{seed}-P{set_name(prefix)}" + self._refit()

    def input_key(self, spec, seed, prefix, layer) -> str:
        """The capture of layer's q/k/v input in the network with ``prefix`` replaced."""
        return f"original-attn_in-L{layer}" if not prefix else self.prefix_key(spec, seed, prefix) + f"-attn_in-L{layer}"

    def o_input_key(self, spec, seed, layer_set_upto) -> str:
        """The capture of o_proj's input with the layers ``layer_set_upto`` replaced (its last one included)."""
        return (f"{spec.tag()}-s{seed}-P{set_name(layer_set_upto)}-orefit{self.config.o_epochs:g}"
                f"-o_in-L{layer_set_upto[-1]}")

    def unit_path(self, spec, seed, prefix, layer, proj) -> str:
        """A fitted unit. The q/k/v fits of a set's first layer see the original network whatever
        the o_proj refit, so their name does not carry it: studies with and without the refit that
        share a cache (``--cache``) share those fits."""
        refit = self._refit() if prefix or proj == "o_proj" else ""
        pre = "P" + (set_name(prefix) if prefix else "none") + refit
        return os.path.join(self.work, "fits", spec.tag(), f"s{seed}", pre, f"L{layer}_{proj}.pt")

    def unit_done(self, spec, seed, prefix, layer) -> bool:
        """Whether every checkpoint of (method, seed, prefix, layer) is on disk."""
        projections = models.PROJECTIONS + (("o_proj",) if self.config.refit_o_proj else ())
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

    def model_path(self, spec, seed, layer_set) -> str:
        return os.path.join(self.config.out_dir, "models", f"{spec.tag()}-s{seed}-L{set_name(layer_set)}.pt")

    # ------------------------------------------------------------------ results
    def rank_results_path(self, rank: int) -> str:
        return os.path.join(self.config.out_dir, f"results-rank{rank}.json")

    def _read(self, path: str, log) -> dict:
        try:
            data = _io.load_json(path)
        except _io.CorruptFileError as error:
            log(f"{error}; starting it afresh (the evaluations it held are redone)")
            return {}
        return data.get("entries", {}) if isinstance(data, dict) and data.get("fingerprint") == self.key else {}

    def load_results(self, log, rank: int | None = None) -> tuple:
        """(all entries: results.json merged with every rank's file, the entries of ``rank``'s own file)."""
        entries = self._read(self.results_path, log) if os.path.exists(self.results_path) else {}
        own = {}
        for path in sorted(glob.glob(os.path.join(self.config.out_dir, "results-rank*.json"))):
            part = self._read(path, log)
            entries.update(part)
            if rank is not None and path == self.rank_results_path(rank):
                own = part
        return {"fingerprint": self.key, "entries": entries}, {"fingerprint": self.key, "entries": own}

    def save_results(self, results: dict, rank: int | None = None) -> None:
        """Write results.json, or (``rank`` given) that rank's own file."""
        path = self.results_path if rank is None else self.rank_results_path(rank)
        _io.save_json(path, results, sort_keys=True)


# ---------------------------------------------------------------------- compressed models
def save_compressed(path: str, replacements: dict, spec, model_name: str, model=None) -> None:
    """Save the replacement modules of a compressed model (state dicts + how to rebuild them).

    With ``model`` (the model they were made for) the file also records its identity
    (:func:`galinear.compress.saving.identity`: family, widths, depth, vocabulary, weight
    fingerprint), which :func:`load_compressed` checks; every file records each module's widths.
    """
    payload = {"format": "galinear-compressed-v1", "model": model_name, "spec": spec.to_dict(),
               "modules": {f"{layer}.{proj}": {"state": m.state_dict(), "in": _in_out(m)[0], "out": _in_out(m)[1]}
                           for (layer, proj), m in replacements.items()}}
    if model is not None:
        from galinear.compress import saving

        payload["identity"] = saving.identity(model, name=model_name)
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


def _as_folder_config(path: str, payload: dict) -> dict:
    """The parts of a v1 file that :func:`galinear.compress.saving.check_identity` reads."""
    saved = dict(payload.get("identity") or {})
    saved.setdefault("name", payload.get("model"))
    modules = []
    for key, entry in payload["modules"].items():
        layer, proj = key.split(".")
        modules.append({"layer": int(layer), "projection": proj,
                        "settings": {"in_features": int(entry["in"]), "out_features": int(entry["out"])}})
    return {"_folder": path, "model": saved, "modules": modules,
            "_fix": "load it into the model it was made from (galinear.compress.load_model on its source)"}


def load_compressed(model, path: str, *, check_weights: bool = True) -> dict:
    """Put the modules saved by :func:`save_compressed` into ``model`` (in place); returns them.

    ``model`` is checked first, as :func:`galinear.compress.load` checks it: every replaced
    projection must have the saved widths, and when the file records the model's identity the
    family, hidden width, depth, vocabulary and (``check_weights``) the weight fingerprint must
    match; a mismatch raises ValueError naming it and nothing is installed. Afterwards
    ``model.save_pretrained`` refuses while the replacements are installed
    (:func:`galinear.compress.saving.guard_save_pretrained`).
    """
    import torch

    from galinear.compress import saving

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such compressed model file")
    payload = fit.load(path, recompute=False)
    if not isinstance(payload, dict) or payload.get("format") != "galinear-compressed-v1":
        raise ValueError(f"{path} is not a compressed model written by galinear")
    saving.check_identity(_as_folder_config(path, payload), model, check_weights)
    spec = methods.MethodSpec(**payload["spec"])
    built = {}
    for key, entry in payload["modules"].items():
        layer, proj = key.split(".")
        layer = int(layer)
        has_bias = any(k == "bias" or k.endswith(".bias") for k in entry["state"])
        if proj == "o_proj":
            module = torch.nn.Linear(entry["in"], entry["out"], bias=has_bias)
        else:
            module = methods.build_module(spec, entry["in"], entry["out"], bias=has_bias)
        module.load_state_dict(entry["state"])
        built[(layer, proj)] = freeze(module)
    for (layer, proj), module in built.items():  # installed only once every module was built
        models.set_projection(model, layer, proj, module)
    saving.guard_save_pretrained(model)
    return built
