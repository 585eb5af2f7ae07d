"""From a user's function to generated sources: trace, lower, emit, with a SHA-256-checked cache.

The cache holds, per key, one JSON file (blade names, operation counts, the SHA-256 of each
source) and the sources themselves; nothing is pickled. The key is the SHA-256 of the function's
source (or its ``__galinear_source__``, for functions made from expression text), the values
its closure and the globals it names hold (their ``repr``), the metric, the
input patterns, the target, the lowering strategy and the galinear version. A source whose
digest differs from the JSON's is regenerated.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import sys
import textwrap
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from galinear._version import __version__
from galinear.symbolic import emit as _emit_module
from galinear.symbolic import lowering as _lowering_module
from galinear.symbolic import trace as _trace_module
from galinear.symbolic.emit import emit, guard_messages
from galinear.symbolic.lowering import backward, lower
from galinear.symbolic.trace import trace

__all__ = ["Built", "build", "cache_key", "cache_folder"]


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


def _describe_value(value, depth: int = 0) -> str:
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}"
    library = str(getattr(value, "__module__", "") or "").split(".")[0] in ("galinear", "numpy", "math", "sympy")
    if isinstance(value, types.FunctionType) and not library and depth < 8:
        return _function_identity(value, depth + 1)  # a helper of the user's: its code counts too
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', repr(value))}"
    return repr(value)


def _code_identity(code) -> list:
    """The behaviour of a code object: bytecode, constants (nested code too), names, arguments."""
    consts = [(_code_identity(c) if isinstance(c, types.CodeType) else repr(c)) for c in code.co_consts]
    return [code.co_code.hex(), consts, list(code.co_names), list(code.co_varnames), code.co_argcount]


def _function_identity(func, depth: int = 0) -> str:
    """What the cache key holds of ``func``: its code (bytecode, constants, names; the source of a
    function built from an expression string), its closure values and the globals it names."""
    code = getattr(func, "__code__", None)
    explicit = getattr(func, "__galinear_source__", None)
    if explicit is not None:
        source = str(explicit)
    elif code is not None:
        source = json.dumps([sys.version, _code_identity(code)])
    else:
        try:
            source = textwrap.dedent(inspect.getsource(func))
        except (OSError, TypeError):
            raise ValueError("the function has no code object or source to key the cache on") from None
    closure = []
    code = getattr(func, "__code__", None)
    if code is not None and func.__closure__:
        for name, cell in zip(code.co_freevars, func.__closure__):
            try:
                closure.append((name, _describe_value(cell.cell_contents, depth)))
            except ValueError:
                closure.append((name, "<empty>"))
    named = []
    if code is not None:
        g = getattr(func, "__globals__", {})
        for name in sorted(set(code.co_names)):
            if name in g:
                named.append((name, _describe_value(g[name], depth)))
    return json.dumps({"source": source, "closure": closure, "globals": named})


@lru_cache(maxsize=1)
def generator_digest() -> str:
    """SHA-256 of the generator's own sources: a changed generator never reuses old kernels."""
    digest = hashlib.sha256()
    for module in (_trace_module, _lowering_module, _emit_module, sys.modules[__name__]):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def cache_key(func, metric, inputs: dict, target: str, strategy: str, grad: bool) -> str:
    payload = json.dumps({
        "generator": generator_digest(),
        "function": _function_identity(func),
        "metric": list(metric),
        "inputs": {k: v if isinstance(v, (str, int)) else list(v) for k, v in inputs.items()},
        "target": target, "strategy": strategy, "grad": bool(grad), "version": __version__,
        "format": 1,
    }, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def cache_folder() -> Path | None:
    """``galinear_compiled`` in the numba disk cache folder when it can be trusted, else None."""
    from galinear._numba import disk_cache_folder

    root = disk_cache_folder()
    if root is None:
        return None
    folder = root / "galinear_compiled"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def _load_cached(folder: Path, key: str) -> Built | None:
    meta_path = folder / f"{key}.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("key") != key:
        return None
    texts = {}
    for field in ("source", "header", "backward_source", "backward_header"):
        digest = meta.get(f"{field}_sha256")
        if digest is None:
            texts[field] = None
            continue
        try:
            text = (folder / f"{key}.{field}").read_text(encoding="utf-8")
        except OSError:
            return None
        if _sha(text) != digest:
            return None
        texts[field] = text
    try:
        return Built(key=key, name=meta["name"], target=meta["target"],
                     input_blades={k: tuple(v) for k, v in meta["input_blades"].items()},
                     output_blades=tuple(meta["output_blades"]), operations=dict(meta["operations"]),
                     strategy=meta["strategy"], guards=tuple(meta["guards"]),
                     backward_operations=meta.get("backward_operations"),
                     backward_guards=tuple(meta.get("backward_guards") or ()), from_cache=True, **texts)
    except (KeyError, TypeError, AttributeError):
        return None


def _store(folder: Path, built: Built) -> None:
    from galinear._io import atomic_write_text

    meta = {"key": built.key, "name": built.name, "target": built.target,
            "input_blades": {k: list(v) for k, v in built.input_blades.items()},
            "output_blades": list(built.output_blades), "operations": built.operations,
            "strategy": built.strategy, "guards": list(built.guards),
            "backward_operations": built.backward_operations,
            "backward_guards": list(built.backward_guards), "version": __version__}
    for field in ("source", "header", "backward_source", "backward_header"):
        text = getattr(built, field)
        meta[f"{field}_sha256"] = _sha(text)
        if text is not None:
            atomic_write_text(str(folder / f"{built.key}.{field}"), text)
    atomic_write_text(str(folder / f"{built.key}.json"), json.dumps(meta, indent=1, sort_keys=True))


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
          name: str = "kernel", use_cache: bool = True) -> Built:
    """Trace ``func``, lower it and print it for ``target`` (and its backward when ``grad``)."""
    key = cache_key(func, metric, inputs, target, strategy, grad)
    folder = cache_folder() if use_cache else None
    if folder is not None:
        cached = _load_cached(folder, key)
        if cached is not None:
            return cached
    graph = trace(func, metric, inputs, name)
    if not graph.outputs:
        raise ValueError("the function's result is identically zero for these input patterns: there is "
                         "nothing to compute (check the patterns, e.g. a wedge of parallel grades)")
    program = lower(graph, strategy)
    in_blades = graph.input_blades()
    header = _header(name, target, metric, in_blades, graph.output_blades, program.operations, program.strategy)
    emitted = emit(program, target, name, header)
    source, c_header = emitted if isinstance(emitted, tuple) else (emitted, None)
    built = Built(key=key, name=name, target=target, input_blades=in_blades, output_blades=graph.output_blades,
                  operations=program.operations, strategy=program.strategy, source=source, header=c_header,
                  guards=tuple(guard_messages(program)))
    if grad:
        back = backward(program)
        bheader = _header(f"{name}_backward", target, metric, {**in_blades, "grad": graph.output_blades},
                          [f"grad of {k}" for k in in_blades], back.operations, back.strategy)
        emitted = emit(back, target, f"{name}_backward", bheader)
        built.backward_source, built.backward_header = emitted if isinstance(emitted, tuple) else (emitted, None)
        built.backward_operations = back.operations
        built.backward_guards = tuple(guard_messages(back))
    if folder is not None:
        _store(folder, built)
    return built
