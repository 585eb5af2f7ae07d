"""From a user's function to generated sources: trace, lower, emit, with a SHA-256-checked cache.

The cache holds, per key, one generated file of kind ``compiled``
(``galinear_compiled/compiled_<digest>.json``, named and checked as every generated file is:
:mod:`galinear._numba`): a first line naming the key and the SHA-256 of the rest, then JSON with
the blade names in parameter order, the operation counts, the guards and the sources themselves;
nothing is pickled. The key is the SHA-256 of
the function's code (or its ``__galinear_source__``, for functions made from expression text),
the exact values it reads (defaults, closure cells, named globals and attributes: see
:class:`_Describer`), the metric, the input patterns, the target, the lowering strategy and the
galinear version. An entry whose first line does not check (edited, truncated, of an older layout)
is regenerated; entries of older layouts under other names are left unused.
"""
from __future__ import annotations

import functools
import hashlib
import json
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sympy as sp

from galinear._version import __version__
from galinear.compiler.targets import target as target_module
from galinear.symbolic import emit as _emit_module
from galinear.symbolic import functions as _functions_module
from galinear.symbolic import lowering as _lowering_module
from galinear.symbolic import multivector as _multivector_module
from galinear.symbolic import numba_source as _numba_source_module
from galinear.symbolic import polynomials as _polynomials_module
from galinear.symbolic import program as _program_module
from galinear.symbolic import trace as _trace_module
from galinear.symbolic import traced as _traced_module
from galinear.symbolic.emit import Sources, emit, guard_messages
from galinear.symbolic.lowering import backward, lower
from galinear.symbolic.multivector import MultiVector as SymbolicMultiVector
from galinear.symbolic.trace import MAX_TRACE_TERMS, trace

__all__ = ["Built", "build", "op_sources", "cache_key", "cache_folder", "metric_of", "Uncacheable", "CacheWarning",
           "grad_input_name"]

#: Version of the cache entries' layout, part of every key (2: inputs stored as an ordered list of
#: pairs; 3: one checked file per entry, the sources inside).
FORMAT = 3


@dataclass
class Built:
    """What :func:`build` returns: the sources and the facts about the program."""

    key: str
    name: str
    target: str
    input_blades: dict
    output_blades: tuple
    operations: dict
    strategy: str
    source: str
    header: str | None
    guards: tuple
    backward_source: str | None = None
    backward_header: str | None = None
    backward_operations: dict | None = None
    backward_guards: tuple = ()
    from_cache: bool = False


def metric_of(algebra) -> tuple:
    """The metric of a galinear.Algebra, a signature (p, q, r) or an int n (Euclidean)."""
    from galinear.blades import metric_from_signature

    metric = getattr(algebra, "metric", None)
    if metric is not None:
        return tuple(int(m) for m in metric)
    if isinstance(algebra, tuple) and len(algebra) in (1, 2, 3):
        return metric_from_signature(*algebra)
    if isinstance(algebra, int) and not isinstance(algebra, bool):
        return (1,) * algebra
    raise TypeError(f"algebra must be a galinear.Algebra (or (p, q, r)), got {type(algebra).__name__}")


class CacheWarning(UserWarning):
    """galinear.compile built a kernel without its cache (the note says why)."""


class Uncacheable(ValueError):
    """A value the function reads cannot be keyed exactly: the kernel is built without the cache."""


#: Most values one cache key describes (closure, defaults, globals and what they reach).
MAX_KEY_VALUES = 20000
_LIBRARIES = ("galinear", "numpy", "math", "cmath", "sympy", "builtins", "functools", "operator")


def _is_library(value) -> bool:
    module = getattr(value, "__module__", None) or getattr(value, "__name__", "")
    return str(module).split(".")[0] in _LIBRARIES


class _Describer:
    """Exact, JSON-able descriptions of the values a function reads (see :func:`cache_key`).

    Numbers are keyed by their exact value (floats by their bits), arrays and multivectors by
    dtype, shape and content, sympy objects by ``srepr``; a module, class or plain object of the
    user's by the values of the attributes the function's code names (``names``). Anything else
    raises :class:`Uncacheable`: a wrong kernel from a stale key is worse than a rebuild."""

    def __init__(self, names: set):
        self.names = names
        self.count = 0
        self.active: set = set()

    def __call__(self, value, depth: int = 0):
        self.count += 1
        if self.count > MAX_KEY_VALUES or depth > 24:
            raise Uncacheable("the function reads more values than the cache key describes")
        if value is None or isinstance(value, (bool, str)):
            return [type(value).__name__, value]
        if isinstance(value, int):
            return ["int", str(value)]
        if isinstance(value, float):
            return ["float", value.hex()]
        if isinstance(value, complex):
            return ["complex", value.real.hex(), value.imag.hex()]
        if isinstance(value, bytes):
            return ["bytes", value.hex()]
        if id(value) in self.active:
            return ["cycle"]
        self.active.add(id(value))
        try:
            return self._compound(value, depth)
        finally:
            self.active.discard(id(value))

    def _compound(self, value, depth):
        if isinstance(value, (np.ndarray, np.generic)):
            array = np.asarray(value)
            if array.dtype.hasobject:
                return ["object-array", [self(v, depth + 1) for v in array.reshape(-1).tolist()], list(array.shape)]
            data = np.ascontiguousarray(array).tobytes()
            return ["array", array.dtype.str, list(array.shape), hashlib.sha256(data).hexdigest()]
        if isinstance(value, (tuple, list, set, frozenset)):
            items = [self(v, depth + 1) for v in value]
            if isinstance(value, (set, frozenset)):
                items = sorted(items, key=json.dumps)
            return [type(value).__name__, items]
        if isinstance(value, dict):
            items = [[self(k, depth + 1), self(v, depth + 1)] for k, v in value.items()]
            return ["dict", sorted(items, key=json.dumps)]
        if isinstance(value, sp.Basic):
            return ["sympy", sp.srepr(value)]
        if isinstance(value, types.ModuleType):
            if _is_library(value):
                return ["module", value.__name__]
            return ["module", value.__name__, self._attributes(value, vars(value), depth)]
        if isinstance(value, types.FunctionType):
            if _is_library(value):
                return ["function", f"{value.__module__}.{value.__qualname__}"]
            return ["function", _function_identity(value, self, depth + 1)]
        if isinstance(value, types.MethodType):
            return ["method", self(value.__func__, depth + 1), self(value.__self__, depth + 1)]
        if isinstance(value, types.BuiltinFunctionType):
            owner = getattr(value, "__self__", None)
            if owner is None or isinstance(owner, types.ModuleType):
                return ["builtin", f"{getattr(value, '__module__', '')}.{value.__qualname__}"]
            return ["builtin-method", value.__qualname__, self(owner, depth + 1)]
        if isinstance(value, functools.partial):
            return ["partial", self(value.func, depth + 1), self(value.args, depth + 1),
                    self(value.keywords, depth + 1)]
        described = self._galinear(value, depth)
        if described is not None:
            return described
        if isinstance(value, type):
            name = f"{value.__module__}.{value.__qualname__}"
            if _is_library(value):
                return ["class", name]
            return ["class", name, self._attributes(value, vars(value), depth)]
        if hasattr(value, "__array__") and not isinstance(value, type):  # torch, jax, ... arrays: by content
            try:
                array = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value)
            except Exception:  # noqa: BLE001 - an array-like that will not convert cannot be keyed
                raise Uncacheable(f"a {type(value).__qualname__} value cannot be read as an array") from None
            return ["array-like", f"{type(value).__module__}.{type(value).__qualname__}", self(array, depth + 1)]
        if _is_library(type(value)):
            raise Uncacheable(f"a {type(value).__module__}.{type(value).__qualname__} value cannot be keyed exactly")
        state = getattr(value, "__dict__", None)
        if state is None:
            raise Uncacheable(f"a {type(value).__qualname__} value (no __dict__) cannot be keyed exactly")
        return ["object", f"{type(value).__module__}.{type(value).__qualname__}",
                self._attributes(value, state, depth), self(type(value), depth + 1)]

    def _galinear(self, value, depth):
        """galinear's numeric and symbolic multivectors and algebras, by their values."""
        from galinear.core.layout import Layout  # the core is not imported with the compiler

        if isinstance(value, Layout):
            return ["algebra", type(value).__qualname__, list(value.metric)]
        if isinstance(value, SymbolicMultiVector):
            return ["symbolic-multivector", list(value.metric), [self(c, depth + 1) for c in value.coefficients]]
        values, algebra = getattr(value, "values", None), getattr(value, "algebra", None)
        if isinstance(algebra, Layout) and values is not None:
            return ["multivector", list(algebra.metric), self(values, depth + 1)]
        return None

    def _attributes(self, owner, state, depth) -> list:
        """The values of the attributes the code names that ``owner`` holds (its own or its class's)."""
        out = []
        for name in sorted(self.names):
            if name in state:
                out.append([name, self(state[name], depth + 1)])
            elif not isinstance(owner, (type, types.ModuleType)) and hasattr(type(owner), name):
                try:
                    attribute = getattr(owner, name)
                except Exception:  # noqa: BLE001 - a property that fails cannot be keyed
                    raise Uncacheable(f"the attribute {name!r} cannot be read to key the cache") from None
                if not isinstance(attribute, types.MethodType):
                    out.append([name, self(attribute, depth + 1)])
        return out


def _code_identity(code) -> list:
    """The behaviour of a code object: bytecode, constants (nested code too), names, arguments."""
    consts = [(_code_identity(c) if isinstance(c, types.CodeType) else repr(c)) for c in code.co_consts]
    return [code.co_code.hex(), consts, list(code.co_names), list(code.co_varnames), code.co_argcount,
            code.co_kwonlyargcount, code.co_filename, code.co_firstlineno]  # the guards name the line


def _code_names(code) -> set:
    """Every name the code (and the code nested in it) reads as a global or an attribute."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _function_identity(func, describe: _Describer | None = None, depth: int = 0) -> str:
    """What the cache key holds of ``func``: its code (bytecode, constants, names; the text of a
    function built from an expression string, which is all it depends on), its defaults, its
    closure values and the values of the globals and attributes its code names."""
    explicit = getattr(func, "__galinear_source__", None)
    if explicit is not None:
        return json.dumps({"source": str(explicit)})
    code = getattr(func, "__code__", None)
    if code is None:
        raise Uncacheable(f"{type(func).__name__} has no code object to key the cache on")
    names = _code_names(code)
    if describe is None:
        describe = _Describer(names)
    else:
        describe.names = describe.names | names
    closure = []
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        try:
            closure.append([name, describe(cell.cell_contents, depth)])
        except ValueError as error:
            if isinstance(error, Uncacheable):
                raise
            closure.append([name, "<empty>"])
    named = []
    g = getattr(func, "__globals__", {})
    for name in sorted(names):
        if name in g:
            named.append([name, describe(g[name], depth)])
    defaults = [describe(func.__defaults__, depth), describe(func.__kwdefaults__, depth)]
    return json.dumps({"source": [sys.version, _code_identity(code)], "defaults": defaults,
                       "closure": closure, "globals": named})


@functools.lru_cache(maxsize=1)
def generator_digest() -> str:
    """SHA-256 of the generator's own sources: a changed generator never reuses old kernels."""
    digest = hashlib.sha256()
    files = [Path(module.__file__) for module in (_trace_module, _traced_module, _program_module, _lowering_module,
                                                  _emit_module, _numba_source_module, _functions_module,
                                                  _polynomials_module, _multivector_module, sys.modules[__name__])]
    files += sorted((Path(__file__).parent / "targets").glob("*.py"))  # every target's printer
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(func, metric, inputs: dict, target: str, strategy: str, grad: bool) -> str:
    """SHA-256 of everything the generated source depends on; raises :class:`Uncacheable` when a
    value the function reads cannot be keyed exactly."""
    payload = json.dumps({
        "generator": generator_digest(),
        "function": _function_identity(func),
        "metric": list(metric),
        "inputs": [[k, v if isinstance(v, (str, int)) else list(v)] for k, v in inputs.items()],
        "target": target, "strategy": strategy, "grad": bool(grad), "version": __version__,
        "format": FORMAT,
    }, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def cache_folder() -> Path | None:
    """The folder of the generated files of kind ``compiled`` when the numba disk cache folder can
    be trusted, else None (no cache)."""
    from galinear._numba import disk_cache_folder, generated_folder

    if disk_cache_folder() is None:
        return None
    return generated_folder("compiled")


_TEXTS = ("source", "header", "backward_source", "backward_header")


def _entry_path(folder: Path, key: str) -> Path:
    from galinear._numba import file_stem

    return folder / f"{file_stem('compiled', key)}.json"


def _load_cached(folder: Path, key: str) -> Built | None:
    from galinear._numba import read_checked

    body = read_checked(_entry_path(folder, key), key)
    if body is None:
        return None
    try:
        meta = json.loads(body)
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("format") != FORMAT:
        return None
    try:
        texts = {field: meta[field] for field in _TEXTS}
        if not isinstance(texts["source"], str) or not all(t is None or isinstance(t, str) for t in texts.values()):
            return None
        return Built(key=key, name=meta["name"], target=meta["target"],
                     input_blades={str(k): tuple(v) for k, v in meta["input_blades"]},
                     output_blades=tuple(meta["output_blades"]), operations=dict(meta["operations"]),
                     strategy=meta["strategy"], guards=tuple(meta["guards"]),
                     backward_operations=meta.get("backward_operations"),
                     backward_guards=tuple(meta.get("backward_guards") or ()), from_cache=True, **texts)
    except (KeyError, TypeError, AttributeError, ValueError):
        return None


def _store(folder: Path, built: Built) -> None:
    from galinear._numba import write_checked

    meta = {"key": built.key, "format": FORMAT, "name": built.name, "target": built.target,
            "input_blades": [[k, list(v)] for k, v in built.input_blades.items()],  # parameter order
            "output_blades": list(built.output_blades), "operations": built.operations,
            "strategy": built.strategy, "guards": list(built.guards),
            "backward_operations": built.backward_operations,
            "backward_guards": list(built.backward_guards), "version": __version__}
    meta.update({field: getattr(built, field) for field in _TEXTS})
    write_checked(_entry_path(folder, built.key), built.key, json.dumps(meta, indent=1, sort_keys=True))


def grad_input_name(inputs) -> str:
    """The name of a backward kernel's output-gradient input: ``grad``, unless an input has it."""
    name = "grad"
    while name in inputs:
        name += "_output"
    return name


def _header(name: str, target: str, metric, inputs, outputs, ops, strategy) -> str:
    lines = [f"Generated kernel {name} ({target}) by galinear.compile, galinear {__version__}.", "",
             f"metric: {tuple(metric)}"]
    for arg, blades in inputs.items():
        lines.append(f"input {arg}: {', '.join(blades)}")
    lines.append(f"output: {', '.join(outputs) if outputs else '(identically zero)'}")
    lines.append(f"operations ({strategy}): " + ", ".join(f"{k} {v}" for k, v in ops.items()))
    lines.append("Do not edit by hand.")
    return '"""' + "\n".join(lines) + '\n"""\n'


def build(func, metric, inputs: dict, target: str, *, strategy: str = "auto", grad: bool = False,
          name: str = "kernel", use_cache: bool = True, max_terms: int | None = MAX_TRACE_TERMS) -> Built:
    """Trace ``func``, lower it and print it for ``target`` (and its backward when ``grad``)."""
    folder = cache_folder() if use_cache else None
    key = ""
    if folder is not None:
        try:
            key = cache_key(func, metric, inputs, target, strategy, grad)
        except Uncacheable as error:
            warnings.warn(f"galinear.compile: built without the cache ({error}); pass cache=False to "
                          "silence this", CacheWarning, stacklevel=3)
            folder = None
    if folder is not None:
        cached = _load_cached(folder, key)
        if cached is not None:
            return cached
    graph = trace(func, metric, inputs, name, max_terms=max_terms)
    if not graph.outputs:
        raise ValueError("the function's result is identically zero for these input patterns: there is "
                         "nothing to compute (check the patterns, e.g. a wedge of parallel grades)")
    program = lower(graph, strategy)
    in_blades = graph.input_blades()
    header = _header(name, target, metric, in_blades, graph.output_blades, program.operations, program.strategy)
    printer = target_module(target)
    sources = emit(program, printer, name, header)
    built = Built(key=key, name=name, target=target, input_blades=in_blades, output_blades=graph.output_blades,
                  operations=program.operations, strategy=program.strategy, source=sources.text,
                  header=sources.header, guards=tuple(guard_messages(program)))
    if grad:
        back = backward(program)
        bheader = _header(f"{name}_backward", target, metric,
                          {**in_blades, grad_input_name(in_blades): graph.output_blades},
                          [f"grad of {k}" for k in in_blades], back.operations, back.strategy)
        sources = emit(back, printer, f"{name}_backward", bheader)
        built.backward_source, built.backward_header = sources.text, sources.header
        built.backward_operations = back.operations
        built.backward_guards = tuple(guard_messages(back))
    if folder is not None:
        _store(folder, built)
    return built


def op_sources(spec, target: str) -> Sources:
    """The kernel of a shipped operation (:class:`galinear.symbolic.spec.KernelSpec`, ``galinear
    codegen --op``) for any registered ``target``: in the shipped kernels' own frame for the targets
    that have one (:data:`galinear.symbolic.codegen.FRAMES`: ``kernel(*inputs, out)`` for numba, a
    function of tensors for torch), else the spec's program (:func:`galinear.symbolic.codegen.lowered`)
    printed by the target's printer, in the calling convention :func:`galinear.compile` gives that
    target; the functions are named after the module (``gp_ppp``)."""
    from galinear.symbolic import codegen

    printer = target_module(target)  # an unknown name is refused, naming the registered targets
    if target in codegen.FRAMES:
        return Sources(codegen.generate(spec, target))
    name = codegen.module_name(spec)
    return emit(codegen.lowered(spec), printer, name, codegen.header(spec, target, f"the {target} printer of galinear.compiler"))
