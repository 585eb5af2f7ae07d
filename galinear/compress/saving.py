"""A compressed model you can keep: a folder with the replacements, and the functions that rebuild it.

``galinear compress ... --save DIR`` writes one folder per compressed model (method, seed, layer
set) under DIR, and ``DIR/index.json`` listing them. A folder holds

- ``galinear_compressed.json``: the format, the identity of the model it was made from (source,
  GGUF file, family, widths, layer count, vocabulary size and a SHA-256 fingerprint of weights
  that compression never touches: the token embedding and every layer's input norm), the method
  and its settings, and for every replaced module its layer, projection, class, widths, bias
  and the shapes of its tensors;
- ``replacements.safetensors``: every parameter AND buffer of the replacement modules (the rotor
  networks' fixed permutations included), keys ``<layer>.<projection>.<name>``;
- ``README.md``: how to load it.

There is deliberately no ``config.json``: ``transformers.AutoModelForCausalLM.from_pretrained``
on the folder fails with "does not appear to have a file named config.json" instead of building
the model with randomly initialised q/k/v projections. The one-liner is::

    model = galinear.compress.load("DIR/rotor-...")          # loads the original model, then installs the replacements
    model = galinear.compress.load("DIR/rotor-...", model)   # into a model you already loaded (checked first)

Nothing is unpickled: the JSON is parsed and the tensors are read with ``safetensors``.

For the linear replacements (LR and BH, Adam-fitted or closed-form LR*/BH*, the single linear
rotor gadget ``RotorLinear`` of method ``rotorlin-m``, and the zero baseline),
:func:`export_dense` bakes every replacement into an ``nn.Linear`` holding its (out, in) matrix,
so the model is a plain Hugging Face model again (``save_pretrained`` / ``from_pretrained`` work
as usual, at the original size). The paper's rotor network (``RotorNetwork``, method ``rotor``)
is nonlinear (LayerNorm and PReLU between rotor gadgets) and has no matrix: :func:`export_dense`
refuses it.
"""
from __future__ import annotations

import hashlib
import os

from galinear import _io
from galinear.compress import methods, models

FORMAT = "galinear-compressed-v2"
CONFIG = "galinear_compressed.json"
TENSORS = "replacements.safetensors"
INDEX = "index.json"

_README = """# A compressed model written by galinear

Replacements of attention projections of `{name}` ({method}; layers {layers}).

    import galinear.compress
    model = galinear.compress.load("{folder}")          # loads {name}, installs the replacements
    model = galinear.compress.load("{folder}", model)   # or into a model already loaded (checked)

`transformers.AutoModelForCausalLM.from_pretrained` cannot read this folder on purpose (it would
build random q/k/v projections). For the linear replacements (LR, BH, LR*, BH*, RotorLinear),
`galinear.compress.export_dense(model)` turns the loaded model into a plain one
(`model.save_pretrained(...)` then works); the paper's rotor network is nonlinear and cannot be
baked.
"""


def _require_safetensors():
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:
        raise ValueError("saving and loading compressed models needs the safetensors package; install it with "
                         "`pip install safetensors` (or `pip install galinear[models]`)") from None


def identity(model, source: str | None = None, gguf_file: str | None = None, name: str | None = None) -> dict:
    """What identifies a model for a compressed folder: family, widths, depth, vocabulary, fingerprint.

    The fingerprint hashes the token embedding and every decoder layer's input norm (tensors that
    compression never replaces), so it is the same before and after compression.
    """
    import torch

    config = getattr(model, "config", None)
    h = hashlib.sha256()
    embed = model.get_input_embeddings().weight if hasattr(model, "get_input_embeddings") else None
    tensors = [embed] if embed is not None else []
    tensors += [models.attention_norm(block).weight for block in models.decoder_layers(model)
                if getattr(models.attention_norm(block), "weight", None) is not None]
    for t in tensors:
        data = t.detach().to(torch.float32).contiguous().cpu().numpy()
        h.update(str(data.shape).encode())
        h.update(data.tobytes())
    return {
        "source": source, "gguf_file": gguf_file, "name": name,
        "model_type": getattr(config, "model_type", None),
        "architectures": list(getattr(config, "architectures", None) or [type(model).__name__]),
        "hidden_size": getattr(config, "hidden_size", None),
        "num_hidden_layers": len(models.decoder_layers(model)),
        "vocab_size": getattr(config, "vocab_size", None),
        "fingerprint": h.hexdigest(),
    }


def _settings(module) -> dict:
    keys = ("in_features", "out_features", "rank", "blocks", "depth", "hidden", "hidden_layers", "breadth")
    return {k: int(getattr(module, k)) for k in keys if isinstance(getattr(module, k, None), int)}


def save(folder: str, model, replacements: dict, spec, *, source: str | None = None,
         gguf_file: str | None = None, name: str | None = None, extra: dict | None = None) -> str:
    """Write the compressed-model folder for ``replacements`` ({(layer, projection): module}).

    ``model`` is the model the replacements were made for (with or without them installed);
    ``source``/``gguf_file`` say how :func:`load` reloads it when no model is given.
    """
    _require_safetensors()
    from safetensors.torch import save_file

    tensors, entries = {}, []
    for (layer, proj), module in sorted(replacements.items()):
        state = module.state_dict()  # parameters and buffers
        for key, value in state.items():
            tensors[f"{layer}.{proj}.{key}"] = value.detach().cpu().contiguous().clone()
        entries.append({"layer": int(layer), "projection": proj, "class": type(module).__name__,
                        "module": type(module).__module__, "bias": getattr(module, "bias", None) is not None,
                        "settings": _settings(module),
                        "tensors": {k: list(v.shape) for k, v in state.items()}})
    layers = sorted({layer for layer, _ in replacements})
    config = {"format": FORMAT, "model": identity(model, source, gguf_file, name), "method": spec.to_dict(),
              "method_tag": spec.tag(), "layers": layers, "modules": entries, **(extra or {})}
    with _io.atomic_folder(folder) as tmp:
        save_file(tensors, os.path.join(tmp, TENSORS), metadata={"format": FORMAT})
        _io.save_json(os.path.join(tmp, CONFIG), config)
        _io.atomic_write_text(os.path.join(tmp, "README.md"), _README.format(
            name=name or source, method=methods.display_name(spec.name), layers=",".join(map(str, layers)),
            folder=os.path.abspath(folder)))
    return folder


def write_index(root: str, names: list) -> None:
    """``root/index.json``: the compressed-model folders under ``root``."""
    _io.save_json(os.path.join(root, INDEX), {"format": FORMAT, "models": sorted(set(names))})


def read_config(folder: str) -> dict:
    """The JSON of a compressed-model folder; a folder holding several (``--save`` root) with one
    entry resolves to it, with several raises naming them."""
    path = os.path.join(folder, CONFIG)
    if not os.path.exists(path):
        index = os.path.join(folder, INDEX)
        if os.path.exists(index):
            names = _io.load_json(index).get("models", [])
            if len(names) == 1:
                return read_config(os.path.join(folder, names[0]))
            raise ValueError(f"{folder} holds {len(names)} compressed models; load one of them: "
                             + ", ".join(os.path.join(folder, n) for n in names))
        raise ValueError(f"{folder} is not a compressed model written by galinear (no {CONFIG}); "
                         "pass a folder written by `galinear compress ... --save DIR`")
    config = _io.load_json(path, fix="write the folder again with `galinear compress ... --save DIR`")
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ValueError(f"{path} has format {config.get('format')!r}, this galinear reads {FORMAT!r}")
    config["_folder"] = folder
    return config


def check_identity(config: dict, model, check_weights: bool = True) -> None:
    """Raise ValueError naming the difference when ``model`` is not the model the folder was made for."""
    saved = config["model"]
    here = identity(model)
    label = saved.get("name") or saved.get("source") or "the original model"
    for key in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size"):
        if saved.get(key) is not None and here.get(key) is not None and saved[key] != here[key]:
            raise ValueError(f"{config['_folder']} was made for {label} ({key} = {saved[key]}), but this model has "
                             f"{key} = {here[key]}; " + config.get("_fix", "load it into the model it was made "
                             "from, or call galinear.compress.load(folder) without a model to load that one"))
    for entry in config["modules"]:
        layer, proj = entry["layer"], entry["projection"]
        if layer >= here["num_hidden_layers"]:
            raise ValueError(f"{config['_folder']} replaces layer {layer}, this model has {here['num_hidden_layers']}")
        current = models.projection(model, layer, proj)
        shape = (getattr(current, "in_features", None), getattr(current, "out_features", None))
        want = (entry["settings"].get("in_features"), entry["settings"].get("out_features"))
        if shape != want:
            raise ValueError(f"{config['_folder']}: layer {layer} {proj} is {want[0]} -> {want[1]} there, "
                             f"{shape[0]} -> {shape[1]} in this model; it was made for {label}: load it into that "
                             "model")
    if check_weights and saved.get("fingerprint") and saved["fingerprint"] != here["fingerprint"]:
        raise ValueError(f"{config['_folder']} was made for {label}, and this model has the same shapes but other "
                         "weights (embedding / norm fingerprint differs); load it into the model it was made "
                         "from (or pass check_weights=False if you know better)")


def load(folder: str, model=None, *, check_weights: bool = True, with_tokenizer: bool = False):
    """Rebuild a compressed model from a folder written by :func:`save` (or ``--save``).

    Without ``model`` the original model is loaded as recorded (:func:`galinear.compress.load_model`
    on its source); with one, it is checked (family, widths, shapes, weight fingerprint) and the
    replacements are installed into it in place. Returns the model (and its tokenizer with
    ``with_tokenizer``, which needs ``model=None``).
    """
    _require_safetensors()
    import torch
    from safetensors.torch import load_file

    config = read_config(folder)
    folder = config["_folder"]
    tokenizer = None
    if model is None:
        saved = config["model"]
        if not saved.get("source"):
            raise ValueError(f"{folder} does not say where its original model comes from; pass the model: "
                             "galinear.compress.load(folder, model)")
        loaded = models.load_model(saved["source"], saved.get("gguf_file"))
        model, tokenizer = loaded.model, loaded.tokenizer
    elif with_tokenizer:
        raise ValueError("with_tokenizer needs model=None (the tokenizer is loaded with the model)")
    check_identity(config, model, check_weights)
    tensor_path = os.path.join(folder, TENSORS)
    try:
        tensors = load_file(tensor_path)
    except FileNotFoundError:
        raise _io.CorruptFileError(tensor_path, "missing", "write the folder again with "
                                   "`galinear compress ... --save DIR`") from None
    except Exception as error:  # safetensors reports damage as its own error types
        raise _io.CorruptFileError(tensor_path, f"not a readable safetensors file ({error})",
                                   "write the folder again with `galinear compress ... --save DIR`") from None
    spec = methods.MethodSpec(**config["method"])
    for entry in config["modules"]:
        layer, proj = entry["layer"], entry["projection"]
        s = entry["settings"]
        if proj == "o_proj" or entry["class"] == "Linear":
            module = torch.nn.Linear(s["in_features"], s["out_features"], bias=entry["bias"])
        else:
            module = methods.build_module(spec, s["in_features"], s["out_features"], bias=entry["bias"])
        if type(module).__name__ != entry["class"]:
            raise ValueError(f"{folder}: layer {layer} {proj} is a {entry['class']}, but method {spec.name} "
                             f"builds a {type(module).__name__}; the folder is damaged or from another galinear")
        prefix = f"{layer}.{proj}."
        state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        missing = set(module.state_dict()) ^ set(state)
        if missing:
            raise ValueError(f"{folder}: layer {layer} {proj} tensors differ from a {entry['class']}'s: "
                             f"{sorted(missing)}; the folder is damaged or from another galinear")
        module.load_state_dict(state, strict=True)
        module.eval()
        for p in module.parameters():
            p.requires_grad_(False)
        models.set_projection(model, layer, proj, module)
    model.eval()
    guard_save_pretrained(model)
    return (model, tokenizer) if with_tokenizer else model


def _replaced(model) -> list:
    """(layer, projection, class name) of every attention projection that is not an nn.Linear."""
    import torch

    out = []
    for layer, block in enumerate(models.decoder_layers(model)):
        attn = models.attention(block)
        for proj in models.PROJECTIONS + ("o_proj",):
            module = getattr(attn, proj, None)
            if module is not None and not isinstance(module, torch.nn.Linear):
                out.append((layer, proj, type(module).__name__))
    return out


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
        replaced = _replaced(model)
        if replaced:
            where = ", ".join(f"layer {layer} {proj} ({name})" for layer, proj, name in replaced[:4])
            raise ValueError(f"this model holds galinear replacements ({where}{', ...' if len(replaced) > 4 else ''}); "
                             "Hugging Face's from_pretrained would rebuild them as random nn.Linear layers. Keep the "
                             "folder written by `galinear compress --save` and reload it with galinear.compress.load, "
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

    from galinear.compress import closed_form

    blocks = models.decoder_layers(model)
    for layer in (range(len(blocks)) if layers is None else layers):
        attn = models.attention(blocks[layer])
        for proj in models.PROJECTIONS + ("o_proj",):
            module = getattr(attn, proj, None)
            if module is None or type(module) is torch.nn.Linear:
                continue
            name = type(module).__name__
            if name == "RotorNetwork":
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
            setattr(attn, proj, dense)
    if "save_pretrained" in vars(model) and not _replaced(model):
        del model.save_pretrained  # only nn.Linear left: Hugging Face saving is exact again
    return model


__all__ = ["save", "load", "export_dense", "identity", "read_config", "check_identity", "write_index",
           "guard_save_pretrained"]
