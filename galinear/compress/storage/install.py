"""Installing a kept compressed-model folder (:mod:`galinear.compress.storage.folder_format`) into
a Hugging Face causal LM: finding and loading its original model, checking that model against the
folder, installing the replacements, and baking linear ones into ``nn.Linear``.

The one-liner is::

    model = galinear.compress.load("DIR/rotor-...")          # loads the original model, then installs the replacements
    model = galinear.compress.load("DIR/rotor-...", model)   # into a model you already loaded (checked first)

:func:`load` checks the folder on its own first, then every field against the model before any
replacement is installed. The recorded source is read only from safetensors or GGUF files
(:func:`load_source`).

For the linear replacements (LR and BH, Adam-fitted or closed-form LR*/BH*, the single linear
rotor gadget ``RotorLinear`` of method ``rotorlin-m``, and the zero baseline),
:func:`export_dense` bakes every replacement into an ``nn.Linear`` holding its (out, in) matrix,
so the model is a plain Hugging Face model again (``save_pretrained`` / ``from_pretrained`` work
as usual, at the original size). The paper's rotor network (``RotorNetwork``, method ``rotor``)
and its Givens control are nonlinear (LayerNorm and PReLU between gadgets) and have no matrix:
:func:`export_dense` refuses them.
"""
from __future__ import annotations

import os

from galinear.compress.storage.folder_format import (FIX, checked_replacements, read, replaced_projections,
                                                       require_safetensors)
from galinear.lm import models, sources

def check_identity(config: dict, model, check_weights: bool = True) -> None:
    """Raise ValueError naming the difference when ``model`` is not the model the folder was made for."""
    saved = config["model"]
    config_ = getattr(model, "config", None)
    label = saved.get("name") or saved.get("source") or "the original model"
    folder = config["_folder"]
    count = len(models.decoder_layers(model))
    here = {"model_type": getattr(config_, "model_type", None), "hidden_size": getattr(config_, "hidden_size", None),
            "num_hidden_layers": count, "vocab_size": getattr(config_, "vocab_size", None)}
    for key in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size"):
        if saved.get(key) is not None and here.get(key) is not None and saved[key] != here[key]:
            raise ValueError(f"{folder} was made for {label} ({key} = {saved[key]!r}), but this model has "
                             f"{key} = {here[key]!r}; " + config.get("_fix", "load it into the model it was made "
                             "from, or call galinear.compress.load(folder) without a model to load that one"))
    for entry in config["modules"]:
        layer, proj = entry["layer"], entry["projection"]
        if not 0 <= layer < count:
            raise ValueError(f"{folder} replaces layer {layer}, this model has layers 0..{count - 1}; the folder "
                             f"was made for another model or edited: {FIX}")
        current = models.projection(model, layer, proj)
        shape = (getattr(current, "in_features", None), getattr(current, "out_features", None))
        want = (entry["settings"].get("in_features"), entry["settings"].get("out_features"))
        if shape != want:
            raise ValueError(f"{folder}: layer {layer} {proj} is {want[0]} -> {want[1]} there, "
                             f"{shape[0]} -> {shape[1]} in this model; it was made for {label}: load it into that "
                             "model")
    if not check_weights or not config.get("_check_weights", True):
        return
    if not saved.get("weights_sha256"):
        raise ValueError(f"{folder} records no checksum of its original model's weights (written by an older "
                         "galinear); rewrite it with the study that made it, or pass check_weights=False if you "
                         "know this is its model")
    replaced = replaced_projections(model)
    if replaced:
        raise ValueError(f"this model already holds galinear replacements (layer {replaced[0][0]} {replaced[0][1]}"
                         f"{', ...' if len(replaced) > 1 else ''}); load {folder} into a freshly loaded original model")
    digest = models.content_hash(model)
    if digest == saved["weights_sha256"]:
        return
    dtype, then = models.weight_dtypes(model), saved.get("dtype")
    if then and dtype != then:
        raise ValueError(f"{folder} was made from {label} with {then} weights; this model's weights are {dtype}, and "
                         f"their values differ from the {then} ones (the checksum covers the values, and rounding "
                         f"changes them): load the model as {then} (galinear.lm.load_model(..., dtype="
                         f"\"{then}\")), or pass check_weights=False to install the replacements into this one")
    raise ValueError(f"{folder} was made for {label}, and this model has the same shapes but other weights or "
                     f"configuration (whole-model SHA-256 {digest[:12]}... here, {saved['weights_sha256'][:12]}... "
                     "recorded); load it into the model it was made from (or pass check_weights=False if you know "
                     "better)")


def source_places(config: dict) -> list:
    """Where :func:`load_source` looks for a folder's original model, in order: the recorded
    absolute path; the recorded path relative to the folder's own location; the recorded source
    as written (absolute, or relative to the folder, then to the working directory). Empty for
    a named model (:data:`galinear.lm.sources.NAMED_MODELS`)."""
    saved = config["model"]
    source = saved.get("source")
    if source in sources.NAMED_MODELS:
        return []
    here = os.path.realpath(config["_folder"])
    places = [saved.get("source_path")]
    if saved.get("source_from_folder"):
        places.append(os.path.normpath(os.path.join(here, saved["source_from_folder"])))
    if source:
        places += [source] if os.path.isabs(source) else [os.path.normpath(os.path.join(here, source)),
                                                          os.path.abspath(source)]
    return list(dict.fromkeys(p for p in places if p))


def _missing_source(config: dict, places: list, why: str) -> ValueError:
    folder, source = config["_folder"], config["model"].get("source")
    looked = f" (looked at {', '.join(places)})" if places else ""
    return ValueError(f"{folder}: its original model {source!r} cannot be found{looked}{why}; give the original "
                      f"model: `galinear generate {folder} --model PATH`, or load it (galinear.lm.load_model("
                      "PATH)) and pass it: galinear.compress.load(folder, model)")


def load_source(config: dict):
    """The original model of a checked folder (:func:`read_config`), as a
    :class:`~galinear.lm.models.LoadedModel`, found as :func:`source_places` says.

    Weights are read only from safetensors files or a GGUF file: a folder holding only pickled
    weights is refused by name (:func:`galinear.lm.models.check_safe_weights`), and
    ``from_pretrained`` is told to use safetensors. A source found nowhere raises ValueError naming
    the places looked at and the two ways to give the model. The caller checks the loaded model
    against the folder (:func:`check_identity`)."""
    saved, folder = config["model"], config["_folder"]
    source, gguf = saved.get("source"), saved.get("gguf_file")
    if not source:
        raise ValueError(f"{folder} does not say where its original model comes from; pass the model: "
                         "galinear.compress.load(folder, model) (or `galinear generate FOLDER --model PATH`)")
    if source in sources.NAMED_MODELS:
        return models.load_model(source, gguf)
    places = source_places(config)
    found = next((p for p in places if os.path.exists(p)), None)
    if found is None:
        if saved.get("source_path") or os.environ.get("HF_HUB_OFFLINE") == "1":
            why = "" if saved.get("source_path") else ", and HF_HUB_OFFLINE=1 forbids reading it as a hub name"
            raise _missing_source(config, places, why)
        return models.load_model(source, gguf)  # a hub name: safetensors only (models.load_model)
    if os.path.isdir(found):
        if gguf is not None:
            if not os.path.isfile(os.path.join(found, gguf)):
                raise _missing_source(config, [os.path.join(found, gguf)], f": {found} holds no GGUF file {gguf}")
        else:
            models.check_safe_weights(found)
    elif not found.endswith(".gguf"):
        raise ValueError(f"{folder}: its original model {found} is a file but not a GGUF model; pass the model "
                         "folder: galinear.compress.load(folder, model) or `galinear generate FOLDER --model PATH`")
    return models.load_model(found, gguf)


def load(folder: str, model=None, *, check_weights: bool = True, with_tokenizer: bool = False):
    """Rebuild a compressed model from a folder written by :func:`save` (or by a study), or from a
    file of format v1 (read through :func:`as_current`).

    The folder is checked first, on its own: its JSON field by field, every module built as
    recorded and every tensor checked against its role and its recorded SHA-256. Then, without
    ``model``, the original model is loaded from its recorded source (:func:`load_source`:
    the recorded absolute path, then the path relative to the folder; safetensors or GGUF only);
    with one, that model is used. Either is checked against the folder (family, widths, shapes,
    whole-model SHA-256) before the replacements are installed in place. Returns the model (and
    its tokenizer with ``with_tokenizer``, which needs ``model=None``).
    """
    if model is not None and with_tokenizer:
        raise ValueError("with_tokenizer needs model=None (the tokenizer is loaded with the model)")
    model, tokenizer, _ = _install(folder, model, check_weights)
    return (model, tokenizer) if with_tokenizer else model


def load_compressed(model, path: str, *, check_weights: bool = True) -> dict:
    """Install the compressed model at ``path`` (a folder, or a file of format v1) into ``model``
    in place, checked as :func:`load` checks it; returns ``{(layer, projection): module}``."""
    return _install(path, model, check_weights)[2]


def _install(path: str, model, check_weights: bool) -> tuple:
    """(model, tokenizer or None, replacements): :func:`load`'s work."""
    require_safetensors()
    config, tensors = read(path)
    replacements = checked_replacements(config, tensors)
    tokenizer = None
    if model is None:
        loaded = load_source(config)
        model, tokenizer = loaded.model, loaded.tokenizer
    check_identity(config, model, check_weights)
    for (layer, proj), module in replacements.items():  # installed only once every check passed
        models.set_projection(model, layer, proj, module)
    model.eval()
    guard_save_pretrained(model)
    return model, tokenizer, replacements


def guard_save_pretrained(model) -> None:
    """Make ``model.save_pretrained`` refuse while galinear replacements are installed.

    Hugging Face's ``save_pretrained`` writes the replacements' tensors under keys its
    ``from_pretrained`` does not know, which then builds random q/k/v projections without an
    error. The guard raises instead, naming the two ways that work; :func:`export_dense` lifts it
    once every replacement is an ``nn.Linear``.
    """
    if not hasattr(model, "save_pretrained") or "save_pretrained" in vars(model):
        return
    original = model.save_pretrained

    def save_pretrained(*args, **kwargs):
        replaced = replaced_projections(model)
        if replaced:
            where = ", ".join(f"layer {layer} {proj} ({name})" for layer, proj, name in replaced[:4])
            raise ValueError(f"this model holds galinear replacements ({where}{', ...' if len(replaced) > 4 else ''}); "
                             "Hugging Face's from_pretrained would rebuild them as random nn.Linear layers. Keep the "
                             "folder written by `galinear compress` and reload it with galinear.compress.load, "
                             "or, for linear replacements (LR, BH, RotorLinear), call galinear.compress.export_dense(model) "
                             "first")
        return original(*args, **kwargs)

    model.save_pretrained = save_pretrained


def export_dense(model, layers=None):
    """Replace every linear replacement in the attention projections by an ``nn.Linear`` with the
    same (out, in) matrix and bias, in place; returns the model.

    Linear replacements: ``LowRankLinear`` (LR1, LR4, LR1*, LR4*), ``BlockHadamardLinear`` (BH1,
    BH1*), ``RotorLinear`` (``rotorlin-m``: one rotor gadget, a linear map whose matrix is
    ``dense_weight()``) and the zero baseline. Afterwards the model holds only standard modules
    (``save_pretrained`` / ``from_pretrained`` round-trip it), at the original size. The paper's
    ``RotorNetwork`` cannot be baked (it is nonlinear): ValueError.
    """
    import torch

    from galinear.compress.fitting import closed_form

    blocks = models.decoder_layers(model)
    for layer in (range(len(blocks)) if layers is None else layers):
        for proj in models.ALL_PROJECTIONS:
            module = getattr(models.holder(blocks[layer], proj, None), proj, None)
            if module is None or type(module) is torch.nn.Linear:
                continue
            name = type(module).__name__
            if name in ("RotorNetwork", "GivensNetwork"):
                raise ValueError(f"layer {layer} {proj} is a RotorNetwork: the paper's rotor network is nonlinear "
                                 "(LayerNorm and PReLU between rotor gadgets) and has no dense matrix; keep it as "
                                 "a module (galinear.compress.load) or compress with a linear method")
            bias = getattr(module, "bias", None)
            if name == "ZeroProjection":
                matrix = torch.zeros(module.out_features, module.in_features)
            else:
                try:
                    matrix = torch.as_tensor(closed_form.module_matrix(module))
                except TypeError:
                    raise ValueError(f"layer {layer} {proj} is a {name}, which export_dense cannot bake") from None
            ref = next((p for p in module.parameters()), None)
            dtype = ref.dtype if ref is not None else torch.float32
            dense = torch.nn.Linear(module.in_features, module.out_features, bias=bias is not None, dtype=dtype)
            with torch.no_grad():
                dense.weight.copy_(matrix.to(dtype))
                if bias is not None:
                    dense.bias.copy_(bias.detach())
            dense.eval()
            for p in dense.parameters():
                p.requires_grad_(False)
            models.set_projection(model, layer, proj, dense)
    if "save_pretrained" in vars(model) and not replaced_projections(model):
        del model.save_pretrained  # only nn.Linear left: Hugging Face saving is exact again
    return model


__all__ = ["load", "load_compressed", "export_dense", "check_identity", "load_source", "source_places",
           "guard_save_pretrained"]
