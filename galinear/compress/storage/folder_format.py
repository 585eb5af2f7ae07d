"""The folder format of a compressed model you can keep: writing it, reading it back and checking
it on its own (no model needed). Installing one into a Hugging Face model is
:mod:`galinear.compress.storage.install`'s.

``galinear compress`` writes one folder per compressed model (method, seed, layer set) under
``OUT/models`` (with ``--save DIR``: under DIR), and ``index.json`` beside them listing them. A
folder holds

- ``galinear_compressed.json``: the format, the identity of the model it was made from (source,
  GGUF file, family, widths, layer count, vocabulary size, weight dtype and the SHA-256 of its
  whole content: every weight and its configuration,
  :func:`galinear.lm.models.content_hash`), the method and its settings, and for every
  replaced module its layer, projection, class, widths, bias and the shape, dtype and SHA-256
  of each of its tensors;
- ``replacements.safetensors``: every parameter AND buffer of the replacement modules (the rotor
  networks' fixed permutations included), keys ``<layer>.<projection>.<name>``. Integer buffers
  are stored in the narrowest of int16 and int32 that holds their values (a permutation of 512
  takes 1 kB instead of 4 kB) and widened back to the module's int64 on load;
- ``config.json``: only the model type ``galinear_compressed``, which transformers does not know:
  plain ``transformers.AutoModelForCausalLM.from_pretrained`` on the folder refuses it instead of
  building the model with random weights in place of the replacements; after
  :func:`galinear.compress.register` it loads the folder as :func:`galinear.compress.load` does
  (:mod:`galinear.compress.storage.transformers_auto`);
- ``README.md``: how to load it.

The source is recorded as given and, for a local one, as its resolved absolute path
(``source_path``) and that path relative to the folder (``source_from_folder``), beside the
whole-model SHA-256 that identifies it.

Nothing is unpickled: the JSON is parsed and the tensors are read with ``safetensors``. Nothing in
the folder is trusted: both files must be regular files of a plausible size (checked before they
are read), every field is checked (:func:`read_config`) and every tensor against its role (dtype,
shape, finite values, permutations that are permutations) and its SHA-256
(:func:`checked_replacements`) before the original model is looked for.

This folder (format v3) is the one format galinear writes: a study keeps every compressed model
as one (:class:`galinear.compress.storage.store.Store`). The earlier formats are read through one
converter, :func:`as_current`, into the same in-memory form (the folder's checked JSON and its
tensors by key), then checked and installed as a folder is: a single file of format v1 (a
safetensors state file, or a ``torch.save`` file read only by ``torch.load(weights_only=True)``
with torch >= 2.6) that records the SHA-256 of its tensors; a file without those checksums, and a
folder of format v2 (none either), are refused with the way to write them again.
"""
from __future__ import annotations

import os

from galinear import _io
from galinear.compress.methods import catalogue as methods
from galinear.compress.storage.tensor_checks import describe_tensors, narrowest, tensor_sha256  # noqa: F401
from galinear.compress.storage.tensor_checks import checked_module as _checked_module
from galinear.lm import models, sources

FORMAT = "galinear-compressed-v3"
#: The single-file format read through :func:`as_current`.
FILE_FORMAT = "galinear-compressed-v1"
#: Folder formats that recorded no checksums: refused by :func:`as_current`.
OLD_FORMATS = ("galinear-compressed-v2",)
CONFIG = "galinear_compressed.json"
TENSORS = "replacements.safetensors"
INDEX = "index.json"
#: The folder's config.json: a model type that only galinear.compress.register() maps (module doc).
AUTO_CONFIG = "config.json"
MODEL_TYPE = "galinear_compressed"
ARCHITECTURE = "GalinearCompressedForCausalLM"
HOW_TO_LOAD = ("load it with galinear.compress.load(folder), or call galinear.compress.register() once and then "
               "transformers.AutoModelForCausalLM.from_pretrained(folder)")


def auto_config() -> dict:
    """The ``config.json`` of a kept folder: only the model type that :func:`galinear.compress.register` maps."""
    return {"model_type": MODEL_TYPE, "architectures": [ARCHITECTURE],
            "galinear_note": f"a compressed model written by galinear: {HOW_TO_LOAD}"}

_README = """# A compressed model written by galinear

Replacements of attention projections of `{name}` ({method}; layers {layers}).

    import galinear.compress
    model = galinear.compress.load("{folder}")          # loads {name}, installs the replacements
    model = galinear.compress.load("{folder}", model)   # or into a model already loaded (checked)

Plain `transformers.AutoModelForCausalLM.from_pretrained` refuses this folder on purpose (it would
build random q/k/v projections); after `galinear.compress.register()` it loads it as
`galinear.compress.load` does. For the linear replacements (LR, BH, LR*, BH*, RotorLinear),
`galinear.compress.export_dense(model)` turns the loaded model into a plain one
(`model.save_pretrained(...)` then works); the paper's rotor network is nonlinear and cannot be
baked.
"""


def require_safetensors():
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:
        raise ValueError("saving and loading compressed models needs the safetensors package; install it with "
                         "`pip install safetensors` (or `pip install galinear[models]`)") from None


#: Largest galinear_compressed.json / index.json read (a folder's JSON is a few kB per module).
MAX_JSON_BYTES = 16 << 20
#: Room for the safetensors header beside the tensors' own bytes.
_HEADER_ROOM = (1 << 20)
FIX = ("rerun the `galinear compress` study that wrote it, which writes the folder again (its cached fits make "
        "this quick)")
#: The projections that write the hidden state (the others read it): their out_features is the model's width.
_OUTPUT_TO_HIDDEN = ("o_proj", "down_proj")
_TENSOR_DTYPES = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16"}


def identity(model, source: str | None = None, gguf_file: str | None = None, name: str | None = None, *,
             reuse: bool = False) -> dict:
    """What identifies a model for a compressed folder: family, widths, depth, vocabulary, the
    dtype of its weights and the SHA-256 of its whole content (every weight and its configuration,
    :func:`galinear.lm.models.content_hash`; ``reuse`` as there)."""
    config = getattr(model, "config", None)
    replaced = replaced_projections(model)
    if replaced:
        raise ValueError("this model already holds galinear replacements (" + ", ".join(
            f"layer {layer} {proj}" for layer, proj, _ in replaced[:4]) + "); its original weights cannot be "
            "hashed: pass the original model")
    return {
        "source": source, "gguf_file": gguf_file, "name": name,
        "model_type": getattr(config, "model_type", None),
        "architectures": list(getattr(config, "architectures", None) or [type(model).__name__]),
        "hidden_size": getattr(config, "hidden_size", None),
        "num_hidden_layers": len(models.decoder_layers(model)),
        "vocab_size": getattr(config, "vocab_size", None),
        "dtype": models.weight_dtypes(model),
        "weights_sha256": models.content_hash(model, reuse=reuse),
    }


def source_location(source: str | None, folder: str) -> dict:
    """Where a local source lies, recorded beside its SHA-256: ``source_path``, its resolved
    absolute path, and ``source_from_folder``, the same path relative to the folder being written
    (so a tree moved as a whole still finds it). Both None for a named source (one of
    :data:`galinear.lm.sources.NAMED_MODELS`, or a hub name)."""
    if not source or source in sources.NAMED_MODELS or not os.path.exists(source):
        return {"source_path": None, "source_from_folder": None}
    path = os.path.realpath(source)
    try:
        relative = os.path.relpath(path, os.path.realpath(folder))
    except ValueError:  # another drive
        relative = None
    return {"source_path": path, "source_from_folder": relative}


def _settings(module) -> dict:
    keys = ("in_features", "out_features", "rank", "blocks", "depth", "hidden", "hidden_layers", "breadth")
    return {k: int(getattr(module, k)) for k in keys if isinstance(getattr(module, k, None), int)}


def save(folder: str, model, replacements: dict, spec, *, source: str | None = None,
         gguf_file: str | None = None, name: str | None = None, extra: dict | None = None) -> str:
    """Write the compressed-model folder for ``replacements`` ({(layer, projection): module}).

    ``model`` is the original model the replacements were made for (without them installed: its
    whole content is hashed); ``source``/``gguf_file`` say how :func:`load` reloads it when no
    model is given. Every tensor is recorded with its shape, dtype and SHA-256.
    """
    require_safetensors()
    from safetensors.torch import save_file

    if not replacements:
        raise ValueError("no replacement to save: a compressed-model folder holds at least one module")
    tensors, entries = {}, []
    for (layer, proj), module in sorted(replacements.items()):
        state = {k: narrowest(v.detach().cpu().contiguous().clone()) for k, v in module.state_dict().items()}
        for key, value in state.items():
            tensors[f"{layer}.{proj}.{key}"] = value
        entries.append({"layer": int(layer), "projection": proj, "class": type(module).__name__,
                        "module": type(module).__module__, "bias": getattr(module, "bias", None) is not None,
                        "settings": _settings(module), "tensors": describe_tensors(state)})
    layers = sorted({layer for layer, _ in replacements})
    config = {"format": FORMAT, "model": {**identity(model, source, gguf_file, name, reuse=True),
                                          **source_location(source, folder)},
              "method": spec.to_dict(), "method_tag": spec.tag(), "layers": layers, "modules": entries,
              **(extra or {})}
    with _io.atomic_folder(folder) as tmp:
        save_file(tensors, os.path.join(tmp, TENSORS), metadata={"format": FORMAT})
        _io.save_json(os.path.join(tmp, CONFIG), config)
        _io.save_json(os.path.join(tmp, AUTO_CONFIG), auto_config())
        _io.atomic_write_text(os.path.join(tmp, "README.md"), _README.format(
            name=name or source, method=methods.display_name(spec.name), layers=",".join(map(str, layers)),
            folder=os.path.abspath(folder)))
    return folder


def write_index(root: str, names: list) -> None:
    """``root/index.json``: the compressed-model folders under ``root``."""
    _io.save_json(os.path.join(root, INDEX), {"format": FORMAT, "models": sorted(set(names))})


def read_config(folder: str) -> dict:
    """The JSON of a compressed-model folder, checked field by field; a folder holding several
    (the ``models`` or ``--save`` folder of a study) with one entry resolves to it, with several
    raises naming them."""
    if not os.path.isdir(folder):
        raise ValueError(f"{folder} is not a folder; pass a folder written by `galinear compress` (under OUT/models "
                         "or --save DIR)")
    path = os.path.join(folder, CONFIG)
    if not os.path.lexists(path):
        index = os.path.join(folder, INDEX)
        if os.path.lexists(index):
            data = _io.load_json(index, fix=FIX, max_bytes=MAX_JSON_BYTES)
            names = data.get("models") if isinstance(data, dict) else None
            if not isinstance(names, list) or not all(
                    isinstance(n, str) and n and n not in (".", "..") and os.sep not in n and "/" not in n
                    for n in names):
                raise _io.CorruptFileError(index, "\"models\" must list the names of the folders beside it", FIX)
            if len(names) == 1:
                inner = os.path.join(folder, names[0])
                if not os.path.lexists(os.path.join(inner, CONFIG)):
                    raise ValueError(f"{index} names {names[0]}, which holds no {CONFIG}; {FIX}")
                return read_config(inner)
            raise ValueError(f"{folder} holds {len(names)} compressed models; load one of them: "
                             + ", ".join(os.path.join(folder, n) for n in names))
        raise ValueError(f"{folder} is not a compressed model written by galinear (no {CONFIG}); "
                         "pass a folder written by `galinear compress` (under OUT/models or --save DIR)")
    config = _io.load_json(path, fix=FIX, max_bytes=MAX_JSON_BYTES)
    found = config.get("format") if isinstance(config, dict) else None
    if found != FORMAT:
        return as_current(config, path)[0]
    _check_config(config, path)
    config["_folder"] = folder
    return config


_FILE_FIX = "delete it and rerun the command that wrote it (a study writes compressed-model folders now)"


def read(path: str) -> tuple:
    """(config, tensors) of the compressed model at ``path``: a folder (:func:`read_config`;
    tensors None: they are read from the folder) or a file of format v1 (:func:`as_current`)."""
    if os.path.isdir(path):
        return read_config(path), None
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path}: no such compressed model file or folder")
    if not os.path.isfile(path):  # a FIFO would wait for a writer, a device never end
        raise _io.UnreadableFileError(path, "is not a regular file", "pass a folder written by `galinear compress`")
    return as_current(_io.load_state(path, fix=_FILE_FIX), path)


def as_current(data, path: str) -> tuple:
    """The in-memory form of the current format, (config, tensors), of a compressed model written
    in an earlier one: the payload of a file of format v1 or the JSON of a folder of format v2.

    ``config`` has the fields of a checked folder config (:func:`read_config`; a v1 file records
    no source, so the model must be passed, and no module class: the method's own is built) and
    ``tensors`` maps ``<layer>.<projection>.<name>`` to each module's tensors, as a folder's
    safetensors file does. Every field is checked; the tensors are checked against their recorded
    SHA-256 by :func:`checked_replacements`. Formats without checksums are refused, naming the fix.
    """
    found = data.get("format") if isinstance(data, dict) else None
    if found in OLD_FORMATS:
        raise ValueError(f"{path} was written by an older galinear ({found}), which recorded no checksum of its "
                         "tensors nor of the whole original model, so this galinear cannot check it; " + FIX)
    if found != FILE_FORMAT or os.path.basename(path) == CONFIG:
        if os.path.basename(path) == CONFIG:
            raise ValueError(f"{path} has format {found!r}, this galinear reads {FORMAT!r}; {FIX}")
        raise ValueError(f"{path} is not a compressed model written by galinear")

    def bad(what):
        return _io.CorruptFileError(path, what + "; the file is damaged or was edited", _FILE_FIX)

    identity = data.get("identity")
    if identity is not None and not isinstance(identity, dict):
        raise bad("\"identity\" must be an object")
    saved = dict(identity or {})
    saved.setdefault("name", data.get("model"))
    if identity is not None and not isinstance(saved.get("weights_sha256"), str):
        saved["weights_sha256"] = None  # no whole-model checksum: check_identity refuses unless told not to check
    for key in ("hidden_size", "num_hidden_layers", "vocab_size"):
        value = saved.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise bad(f"identity {key} must be a positive integer, got {value!r}")
    saved["source"] = saved["source_path"] = saved["source_from_folder"] = None
    entries, checksums = data.get("modules"), data.get("checksums")
    if not isinstance(entries, dict) or not entries:
        raise bad("\"modules\" must be a non-empty mapping (a file without replacements is not a compressed model)")
    if not isinstance(checksums, dict):
        raise _io.CorruptFileError(path, "records no checksums of its tensors, so it cannot be checked", _FILE_FIX)
    modules, tensors = [], {}
    for key, entry in entries.items():
        layer, _, proj = str(key).partition(".")
        if not layer.isdigit() or proj not in models.ALL_PROJECTIONS:
            raise bad(f"module key {key!r} is not <layer >= 0>.<{'|'.join(models.ALL_PROJECTIONS)}>")
        sizes = (entry.get("in"), entry.get("out")) if isinstance(entry, dict) else (None, None)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in sizes) \
                or not isinstance(entry.get("state"), dict) or not isinstance(checksums.get(key), dict) \
                or not all(isinstance(name, str) for name in entry["state"]):
            raise bad(f"module {key}: needs in/out widths, a state and its checksums")
        state = entry["state"]
        plain = proj == "o_proj" and "weight" in state and set(state) <= {"weight", "bias"}  # the o_proj refit
        modules.append({"layer": int(layer), "projection": proj, "class": "Linear" if plain else None,
                        "bias": any(k == "bias" or k.endswith(".bias") for k in state),
                        "settings": {"in_features": sizes[0], "out_features": sizes[1]}, "tensors": checksums[key]})
        tensors.update({f"{layer}.{proj}.{name}": value for name, value in state.items()})
    method = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    config = {"format": FORMAT, "model": saved, "method": method, "layers": sorted({m["layer"] for m in modules}),
              "modules": modules, "_folder": path, "_check_weights": identity is not None,
              "_fix": "load it into the model it was made from (galinear.lm.load_model on its source)"}
    return config, tensors


def _check_config(config: dict, path: str) -> None:
    """Every field :func:`load` reads has its type and a sensible value (before any is used)."""
    def bad(what):
        return _io.CorruptFileError(path, what + "; the folder is damaged or was edited", FIX)

    def integer(value, low=0):
        return isinstance(value, int) and not isinstance(value, bool) and value >= low

    saved = config.get("model")
    if not isinstance(saved, dict):
        raise bad("\"model\" must be an object")
    for key in ("hidden_size", "num_hidden_layers", "vocab_size"):
        if saved.get(key) is not None and not integer(saved[key], 1):
            raise bad(f"model {key} must be a positive integer, got {saved[key]!r}")
    for key in ("source", "gguf_file", "name", "model_type", "dtype", "source_path", "source_from_folder"):
        if saved.get(key) is not None and not isinstance(saved[key], str):
            raise bad(f"model {key} must be a string, got {saved[key]!r}")
    if saved.get("source_path") is not None and not os.path.isabs(saved["source_path"]):
        raise bad(f"model source_path must be an absolute path, got {saved['source_path']!r}")
    gguf = saved.get("gguf_file")
    if gguf is not None and not gguf.endswith(".gguf"):
        raise bad(f"model gguf_file must name a .gguf file, got {gguf!r}")
    digest = saved.get("weights_sha256")
    if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise bad(f"model weights_sha256 must be 64 hex digits, got {digest!r}")
    if not isinstance(config.get("method"), dict):
        raise bad("\"method\" must be an object")
    entries = config.get("modules")
    if not isinstance(entries, list) or not entries:
        raise bad("\"modules\" must be a non-empty list (a folder without replacements is not a compressed model)")
    seen = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise bad(f"module {i} must be an object")
        layer, proj = entry.get("layer"), entry.get("projection")
        if not integer(layer):
            raise bad(f"module {i}: layer must be an integer >= 0, got {layer!r}")
        if proj not in models.ALL_PROJECTIONS:
            raise bad(f"module {i}: projection must be one of {', '.join(models.ALL_PROJECTIONS)}, got {proj!r}")
        if (layer, proj) in seen:
            raise bad(f"layer {layer} {proj} is listed twice")
        seen.add((layer, proj))
        settings = entry.get("settings")
        if not isinstance(settings, dict) or not all(integer(settings.get(k), 1) for k in ("in_features",
                                                                                           "out_features")):
            raise bad(f"layer {layer} {proj}: settings must hold positive integers in_features and out_features")
        if not isinstance(entry.get("bias"), bool) or not isinstance(entry.get("class"), str):
            raise bad(f"layer {layer} {proj}: bias must be true or false and class a name")
        hidden = saved.get("hidden_size")
        side = "out_features" if proj in _OUTPUT_TO_HIDDEN else "in_features"
        if hidden is not None and settings[side] != hidden:
            raise bad(f"layer {layer} {proj}: {side} {settings[side]:,} disagrees with the model's hidden_size "
                      f"{hidden:,} recorded in the same file (a {proj} {'writes' if side == 'out_features' else 'reads'} "
                      "the hidden state)")
        tensors = entry.get("tensors")
        if not isinstance(tensors, dict):  # empty for a module without tensors (the zero baseline)
            raise bad(f"layer {layer} {proj}: tensors must describe the module's tensors")
        for key, info in tensors.items():
            where = f"layer {layer} {proj} tensor {key!r}"
            if not isinstance(info, dict) or not all(name in info for name in ("shape", "dtype", "sha256")):
                raise bad(f"{where}: needs a shape, a dtype and a sha256")
            if not isinstance(info["shape"], list) or not all(integer(d) for d in info["shape"]):
                raise bad(f"{where} has shape {info['shape']!r}; a shape is a list of sizes >= 0")
            sha = info["sha256"]
            if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
                raise bad(f"{where} has sha256 {sha!r}; a SHA-256 is 64 hex digits")
            if info.get("dtype") not in _TENSOR_DTYPES:
                raise bad(f"layer {layer} {proj} tensor {key!r} has dtype {info.get('dtype')!r}; replacements hold "
                          + ", ".join(sorted(_TENSOR_DTYPES)))
    layers = config.get("layers")
    if layers is not None and (not isinstance(layers, list) or sorted(set(layers)) != sorted({layer for layer, _
                                                                                             in seen})):
        raise bad(f"\"layers\" {layers!r} differs from the layers of the modules")


def checked_module(where: str, module, state: dict, declared: dict | None = None):
    """:func:`galinear.compress.storage.tensor_checks.checked_module`, its messages ending with how to
    write a kept folder again."""
    return _checked_module(where, module, state, declared, fix=FIX)


def _read_tensors(path: str, expected_bytes: int) -> dict:
    """The tensors of a safetensors file that must be a regular file of about ``expected_bytes``."""
    from safetensors.torch import load as load_bytes

    if not os.path.lexists(path):
        raise _io.CorruptFileError(path, "missing", FIX)
    raw = _io.read_regular_file(path, expected_bytes + _HEADER_ROOM, FIX)
    try:
        return load_bytes(raw)
    except Exception as error:  # safetensors reports damage as its own error types
        raise _io.CorruptFileError(path, f"damaged or truncated: not a readable safetensors file ({error})",
                                   FIX) from None


def build_replacement(spec, entry: dict, where: str, check_class: bool = True):
    """A fresh module of the class and widths an entry records (not loaded yet; class None: the
    method's own class)."""
    import torch

    s = entry["settings"]
    try:
        if entry["class"] == "Linear":
            from galinear._limits import check_memory

            check_memory(f"Linear({s['in_features']:,}, {s['out_features']:,})",
                         4 * s["in_features"] * (s["out_features"] + 1))
            module = torch.nn.Linear(s["in_features"], s["out_features"], bias=entry["bias"])
        else:
            module = methods.build_module(spec, s["in_features"], s["out_features"], bias=entry["bias"])
    except ValueError as error:  # a size the module refuses (TooLargeError included): the folder's record
        raise ValueError(f"{where}: the recorded module cannot be built ({error}); {FIX}") from None
    if check_class and entry["class"] is not None and type(module).__name__ != entry["class"]:
        raise ValueError(f"{where} is a {entry['class']}, but method {spec.name} builds a {type(module).__name__}; "
                         f"the folder is damaged or from another galinear: {FIX}")
    return module


def method_spec(data, where: str):
    """The MethodSpec recorded in a folder or file, or ValueError naming ``where``."""
    try:
        return methods.MethodSpec(**data)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: the recorded method is not one this galinear builds ({error}); {FIX}") from None


def checked_replacements(config: dict, tensors: dict | None = None) -> dict:
    """{(layer, projection): module} for a folder read by :func:`read_config` (or the ``config``
    and ``tensors`` of :func:`read`): every module built as recorded, every tensor checked against
    its role and its recorded SHA-256, nothing installed (the folder's own checks, which need no
    model). ``tensors`` None: they are read from the folder's safetensors file."""
    folder = config["_folder"]
    spec = method_spec(config["method"], folder)
    built = {}
    for entry in config["modules"]:
        where = f"{folder}: layer {entry['layer']} {entry['projection']}"
        built[(entry["layer"], entry["projection"])] = (build_replacement(spec, entry, where), entry, where)
    expected = sum(v.numel() * v.element_size() for module, _, _ in built.values()
                   for v in module.state_dict().values())
    where = folder if tensors is not None else os.path.join(folder, TENSORS)
    if tensors is None:
        tensors = _read_tensors(where, expected)
    known = {f"{layer}.{proj}.{name}" for (layer, proj), (module, _, _) in built.items() for name in module.state_dict()}
    unknown = sorted(set(tensors) - known)
    if unknown:
        raise ValueError(f"{where} holds tensors no recorded module has: "
                         f"{unknown[:4]}{' ...' if len(unknown) > 4 else ''}; {FIX}")
    for (layer, proj), (module, entry, where) in built.items():
        prefix = f"{layer}.{proj}."
        state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        checked_module(where, module, state, entry["tensors"])
    return {key: module for key, (module, _, _) in built.items()}


def replaced_projections(model) -> list:
    """(layer, projection, class name) of every attention projection that is not an nn.Linear."""
    import torch

    out = []
    for layer, block in enumerate(models.decoder_layers(model)):
        for proj in models.ALL_PROJECTIONS:
            module = getattr(models.holder(block, proj, None), proj, None)
            if module is not None and not isinstance(module, torch.nn.Linear):
                out.append((layer, proj, type(module).__name__))
    return out


__all__ = ["FORMAT", "FILE_FORMAT", "CONFIG", "TENSORS", "INDEX", "AUTO_CONFIG", "MODEL_TYPE", "ARCHITECTURE",
           "HOW_TO_LOAD", "FIX", "save", "read", "read_config", "as_current", "identity", "source_location",
           "write_index", "checked_module", "checked_replacements", "build_replacement", "method_spec",
           "replaced_projections",
           "describe_tensors", "require_safetensors"]
