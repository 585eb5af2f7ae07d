"""Optional dependencies: which extra of ``pip install galinear[...]`` brings which package.

``pip install galinear`` installs the core only (numpy, sympy, numba): :class:`galinear.Algebra`,
:class:`galinear.MultiVector`, :func:`galinear.compile` (numba, numpy and C targets),
:func:`galinear.prove` and the commands ``verify``, ``codegen`` and ``tour``. Everything else
comes with an extra (setup.cfg, ``[options.extras_require]``):

=========  =============================================================================
extra      what it brings
=========  =============================================================================
torch      galinear.nn (rotor layers), compress, train-mlp, train-lm: torch, safetensors, tqdm
models     pretrained models for compress and train-lm: transformers, gguf, accelerate
onnx       export of frozen layers to ONNX and its runtime
eval       lm-eval tasks for compressed models
plot       figures (reports, galinear.plot): matplotlib
triton     the Triton kernels (GPU)
jax        the jax target of galinear.compile (jax.jit, jax.grad, jax.vmap)
docs       the docs site (mkdocs-material, mkdocstrings)
test       the test suite's tools and reference libraries
all        every extra above
=========  =============================================================================

A feature used without its extra raises :class:`MissingExtraError` (a ``ModuleNotFoundError``),
whose message names the feature, the package and the command that installs it::

    galinear.nn needs torch: pip install 'galinear[torch]'

Standard library only: the command line imports this module to build its messages.
"""
from __future__ import annotations

import importlib

__all__ = ["EXTRAS", "MissingExtraError", "extra_of", "install_command", "missing_extra", "require"]

#: Top-level import name -> the extra that installs it.
EXTRAS = {
    "torch": "torch",
    "safetensors": "torch",
    "tqdm": "torch",
    "transformers": "models",
    "gguf": "models",
    "accelerate": "models",
    "onnx": "onnx",
    "onnxruntime": "onnx",
    "onnxscript": "onnx",
    "lm_eval": "eval",
    "matplotlib": "plot",
    "triton": "triton",
    "jax": "jax",
    "jaxlib": "jax",
    "mkdocs": "docs",
    "material": "docs",
    "mkdocstrings": "docs",
    "pytest": "test",
    "hypothesis": "test",
    "xdist": "test",
    "clifford": "test",
    "kingdon": "test",
    "galgebra": "test",
    "scipy": "test",
}


def extra_of(package: str) -> str | None:
    """The extra that installs ``package`` (a dotted name counts by its top level), or None."""
    return EXTRAS.get(package.partition(".")[0])


def install_command(extra: str) -> str:
    """The pip command that installs ``extra``: ``pip install 'galinear[extra]'``."""
    return f"pip install 'galinear[{extra}]'"


class MissingExtraError(ModuleNotFoundError):
    """``feature`` was used without the package ``name``; the message names the extra to install.

    A ``ModuleNotFoundError`` (so ``except ImportError`` and ``pytest.importorskip`` see it) whose
    ``name`` is the missing package, as Python's own."""

    def __init__(self, feature: str, package: str, extra: str | None = None):
        self.feature = feature
        self.extra = extra or extra_of(package) or "all"
        super().__init__(f"{feature} needs {package.partition('.')[0]}: {install_command(self.extra)}",
                         name=package.partition(".")[0])


def missing_extra(error: ImportError, feature: str) -> ImportError:
    """The error to raise for ``error`` (an ImportError caught while using ``feature``): a
    :class:`MissingExtraError` when the module it could not find belongs to an extra, else
    ``error`` itself (a broken install of a package that is there is not a missing extra)."""
    name = getattr(error, "name", None)
    if isinstance(error, MissingExtraError) or not isinstance(error, ModuleNotFoundError) or not name:
        return error
    top = name.partition(".")[0]
    if extra_of(top) is None or _installed(top):
        return error
    return MissingExtraError(feature, top)


def _installed(package: str) -> bool:
    """Whether the top-level ``package`` can be found (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def require(package: str, feature: str):
    """Import and return ``package``, or raise :class:`MissingExtraError` saying that ``feature``
    needs it and which extra installs it."""
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as error:
        raise missing_extra(error, feature) from None
