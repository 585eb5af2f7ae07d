"""The compiler's targets, one module each: its printer rules, its name tables, its loader and its call.

A target module defines

``NAME``
    the name users pass as ``target=``;
``FILE_SUFFIX``
    the extension of its source file (``.py``, or ``.c`` beside a ``.h`` header for C);
``AUTOGRAD``
    the library whose automatic differentiation sees through the generated program (``"torch"``,
    ``"jax"``), or None when gradients come from the generated backward kernel;
``print_program(program, name, header)``
    the source of a lowered program (:class:`~galinear.symbolic.lowering.Lowered`, its names
    already private), a str or :class:`galinear.symbolic.emit.Sources`; the statements are printed
    by :func:`galinear.symbolic.emit.statement_lines` with the target's own rules. It prints what
    :func:`galinear.compile` and ``galinear codegen --expr`` compile, and the shipped operations of
    ``galinear codegen --op`` for a target without a frame of the shipped kernels
    (:func:`galinear.compiler.build.op_sources`);
``Loaded(sources, name, guards, widths, out_widths, multiplications)``
    the program loaded for the target; ``run(values, names, out, parallel)`` calls it on the
    arrays of one call (in the order of ``names``) and returns a tuple of outputs.

Adding a target is one new module here and its name in :data:`TARGETS`, the one list of targets
(``galinear codegen`` takes its ``--target`` choices and its help from it). This module imports only
the standard library, so the command line reads :data:`TARGETS` from this file without loading the
compiler (:func:`galinear.commands.codegen.registered_targets`; importing it by name runs the
package ``galinear.compiler`` first); a target's module is imported when :func:`target` asks for it.
"""
from __future__ import annotations

import importlib

__all__ = ["TARGETS", "target"]

#: Every target of :func:`galinear.compile` and ``galinear codegen`` (``--expr`` and ``--op``), each a module here.
TARGETS = ("numba", "numpy", "torch", "c", "triton", "jax")


def target(name: str):
    """The module of the target ``name``; a name that is not registered is refused, naming those that are."""
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; the registered targets are {', '.join(TARGETS)}")
    return importlib.import_module(f"galinear.compiler.targets.{name}")
