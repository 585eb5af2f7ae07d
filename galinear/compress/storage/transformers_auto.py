"""Loading a kept compressed-model folder the way Hugging Face users load models.

After :func:`register`, ``transformers.AutoModelForCausalLM.from_pretrained(folder)`` loads a folder
written by :func:`galinear.compress.save` (every model a ``galinear compress`` run keeps) exactly as
:func:`galinear.compress.load` does: the folder checked on its own, the original model loaded from
its recorded source (safetensors or GGUF only) and checked against the folder's whole-model SHA-256,
then the replacements installed. Without :func:`register`, ``from_pretrained`` refuses the folder:
its ``config.json`` names the model type ``galinear_compressed``, which transformers does not know,
so no model is built with random weights in place of the replacements.

Why a registration and not modelling code shipped in each folder (``trust_remote_code=True``):
the folder stays data only (JSON and safetensors), so loading one never runs code that came with
it; the code that loads it is the installed galinear, the same for every folder and the same
version as the checks; and the route adds nothing to trust for folders from elsewhere.
"""
from __future__ import annotations

import os

from galinear.compress.storage import folder_format, install
from galinear.compress.storage.folder_format import (ARCHITECTURE, AUTO_CONFIG as CONFIG_JSON, MODEL_TYPE,
                                                     auto_config as config_json)

#: Keyword arguments that AutoModelForCausalLM.from_pretrained passes on by itself (hub settings,
#: meaningless for a local folder, and the remote-code switch, which this route never needs).
_PASSED_ON = {"cache_dir", "force_download", "local_files_only", "proxies", "revision", "token", "_from_auto",
              "trust_remote_code", "adapter_kwargs", "code_revision", "subfolder"}


def _from_pretrained(folder, args: tuple, kwargs: dict):
    if args:
        raise ValueError(f"a galinear compressed folder takes no positional model arguments, got {len(args)}; "
                         f"{folder_format.HOW_TO_LOAD}")
    if kwargs.get("subfolder"):
        raise ValueError(f"subfolder={kwargs['subfolder']!r}: pass the compressed-model folder itself")
    dtype, older = kwargs.pop("dtype", None), kwargs.pop("torch_dtype", None)  # torch_dtype: the older name
    dtype = dtype if dtype is not None else older
    if dtype not in (None, "auto", "float32") and str(dtype) != "torch.float32":
        raise ValueError(f"dtype={dtype!r}: a compressed folder loads in float32, the dtype its original model's "
                         "checksum and its replacements were recorded in; load it, then call model.to(dtype)")
    device = _one_device(kwargs.pop("device_map", None))
    unknown = sorted(k for k, v in kwargs.items() if k not in _PASSED_ON and v is not None)
    if unknown:
        raise ValueError(f"from_pretrained options {', '.join(unknown)} do not apply to a galinear compressed folder "
                         "(it loads on the CPU in float32, then model.to(...) moves it); leave them out")
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"{folder!r} is not a local folder; a galinear compressed folder loads from disk only "
                         "(download the folder first)")
    model = install.load(folder)
    return model if device is None else model.to(device)


def _one_device(device_map):
    """The one device a ``device_map`` names (``"cpu"``, ``{"": "cuda:0"}``), or None for none;
    a map that spreads the model ("auto", several entries) is refused."""
    if device_map is None:
        return None
    if isinstance(device_map, dict) and list(device_map) == [""]:
        device_map = device_map[""]
    if isinstance(device_map, (str, int)) and device_map not in ("auto", "balanced", "balanced_low_0", "sequential"):
        return device_map
    if getattr(device_map, "type", None) is not None:  # a torch.device
        return device_map
    raise ValueError(f"device_map={device_map!r} would spread the model over devices, which a galinear compressed "
                     "folder does not do; name one device (device_map=\"cpu\" or {\"\": \"cuda:0\"}) or leave it out "
                     "and call model.to(device)")


_CLASSES = None


def _classes():
    """(config class, model class), built once (transformers is imported here, not at import)."""
    global _CLASSES
    if _CLASSES is None:
        import transformers

        base = getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig

        class GalinearCompressedConfig(base):
            """The ``config.json`` of a galinear compressed-model folder (it holds no model settings:
            those are in galinear_compressed.json, read and checked by galinear.compress.load)."""

            model_type = MODEL_TYPE

        class GalinearCompressedForCausalLM:
            """What AutoModelForCausalLM builds for a galinear folder: its ``from_pretrained`` returns
            the original model class (e.g. LlamaForCausalLM) with the replacements installed."""

            config_class = GalinearCompressedConfig

            @classmethod
            def from_pretrained(cls, pretrained_model_name_or_path, *args, config=None, **kwargs):
                return _from_pretrained(pretrained_model_name_or_path, args, kwargs)

        GalinearCompressedForCausalLM.__name__ = GalinearCompressedForCausalLM.__qualname__ = ARCHITECTURE
        _CLASSES = (GalinearCompressedConfig, GalinearCompressedForCausalLM)
    return _CLASSES


def register() -> None:
    """Teach ``transformers.AutoConfig`` and ``AutoModelForCausalLM`` the galinear folder type, so
    that ``AutoModelForCausalLM.from_pretrained(folder)`` loads a kept compressed model (module doc).
    Calling it again does nothing more. Needs transformers (``pip install galinear[models]``)."""
    try:
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError:
        raise ValueError("galinear.compress.register needs transformers: pip install galinear[models]") from None
    config_class, model_class = _classes()
    AutoConfig.register(MODEL_TYPE, config_class, exist_ok=True)
    AutoModelForCausalLM.register(config_class, model_class, exist_ok=True)


def unregister() -> None:
    """Undo :func:`register` in this process (plain ``from_pretrained`` refuses the folders again),
    e.g. between tests. Does nothing when nothing is registered."""
    if _CLASSES is None:
        return
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    AutoModelForCausalLM._model_mapping._extra_content.pop(_CLASSES[0], None)
    CONFIG_MAPPING._extra_content.pop(MODEL_TYPE, None)


__all__ = ["register", "unregister", "config_json", "MODEL_TYPE", "CONFIG_JSON"]
