"""The import graph of galinear has no cycles, and each layer keeps to its own dependencies.

The graph is built from the source with :mod:`ast`; nothing of galinear is imported, so the test
runs in well under a second and sees imports that no run happens to execute.

What counts as an import of a galinear module (an edge ``importer -> target``, both files):

- ``import galinear.a.b`` and ``from galinear.a.b import name``, at module level or inside a
  function or method (a lazy import is a cycle waiting for the first call), absolute or relative;
- ``from galinear.a import b`` where ``b`` is a submodule (``a/b.py`` or ``a/b/__init__.py``):
  an edge to ``galinear.a.b`` only. Python resolves it through ``sys.modules`` even while
  ``a/__init__.py`` is still running, so it needs nothing that ``a/__init__.py`` defines;
- ``from galinear.a import name`` where ``name`` is not a submodule (a function, a class, a
  re-export): an edge to ``galinear.a`` itself, its ``__init__.py``. When that ``__init__.py``
  imports the importer, this IS a cycle: the name exists only once the ``__init__.py`` has run;
- the ``__init__.py`` of every package above the target that does not also hold the importer:
  Python runs it before the target. It is not counted for the importer's own packages, which
  have always started before the importer runs (so ``galinear/a/__init__.py`` importing its
  children is not a cycle by itself);
- a string literal naming a module, ``"galinear.a.b"`` or ``"galinear.a.b:function"``, as
  registries that import by name use (``importlib.import_module("galinear.a.b")``, backend tables,
  lazy attribute tables), and an f-string ``f"galinear.a.{name}"`` passed around for the same
  purpose: an edge to every module directly inside ``galinear.a``.

Not counted: imports under ``if TYPE_CHECKING:`` (they never run), and names built at run time
from variables only (the generated-kernel loader), which name leaf modules with no galinear
imports of their own.

A cycle is a closed path between module files. Its fix is never a deferred or hidden import
(that only moves the cycle to the first call): move the code both sides need down a layer, into
a module that imports neither of them.
"""
from __future__ import annotations

import ast
import configparser
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.core  # the source and a fresh interpreter: runs in the core install too

PACKAGE = "galinear"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# Third-party packages each layer never imports (docs/symbolic.md, README.md's layer table):
# the symbolic layer is sympy only, the core and the rotor kernels numpy + numba (the Triton kernels
# drive torch tensors, so they live in galinear.nn.functional).
FORBIDDEN = {
    "galinear.symbolic": ("numba", "torch"),
    "galinear.core": ("torch",),
    "galinear.rotor_kernels": ("torch", "triton"),
    "galinear.kernels": ("torch", "triton"),  # the former name of galinear.rotor_kernels
}

_MODULE_STRING = re.compile(r"^galinear(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?::[A-Za-z_][A-Za-z0-9_.]*)?$")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    kind: str  # "import", "lazy import", "package", "string"
    eager: bool  # runs when the importer is imported (module level, not a function, not a string)


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``root``."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join([package, *parts])] = path
    return modules


def _is_package(name: str, path: Path) -> bool:
    return path.name == "__init__.py"


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _contains(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


class _Collector(ast.NodeVisitor):
    """Every reference to a galinear module in one file."""

    def __init__(self, name: str, path: Path, modules: dict[str, Path]):
        self.name = name
        self.modules = modules
        self.package = name if _is_package(name, path) else name.rpartition(".")[0]
        self.depth = 0
        self.found: list[tuple[str, int, str, bool]] = []
        self.external: list[tuple[str, int, bool]] = []  # (top-level package, line, eager)

    # scopes ---------------------------------------------------------------------------------
    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node):
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    # imports --------------------------------------------------------------------------------
    def _add(self, target: str, line: int, kind: str | None = None):
        if kind is None:
            kind = "lazy import" if self.depth else "import"
        self.found.append((target, line, kind, kind == "import"))

    def visit_Import(self, node):
        for alias in node.names:
            if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                target = self._existing(alias.name)
                if target is not None:
                    self._add(target, node.lineno)
            else:
                self.external.append((alias.name.partition(".")[0], node.lineno, not self.depth))

    def visit_ImportFrom(self, node):
        if node.level:
            base_parts = self.package.split(".")
            if node.level > 1:
                base_parts = base_parts[: len(base_parts) - node.level + 1]
            base = ".".join(base_parts)
            if node.module:
                base = f"{base}.{node.module}"
        else:
            base = node.module or ""
        if not (base == PACKAGE or base.startswith(PACKAGE + ".")):
            if not node.level and base:
                self.external.append((base.partition(".")[0], node.lineno, not self.depth))
            return
        target = self._existing(base)
        if target is None:
            return
        if target != base:  # a name below a missing module: count what exists
            self._add(target, node.lineno)
            return
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            self._add(sub if sub in self.modules else base, node.lineno)

    # strings --------------------------------------------------------------------------------
    def visit_Constant(self, node):
        if isinstance(node.value, str) and _MODULE_STRING.match(node.value):
            target = self._existing(node.value.partition(":")[0], strict=":" in node.value)
            if target is not None:
                self._add(target, node.lineno, "string")

    def visit_JoinedStr(self, node):
        if node.values and isinstance(node.values[0], ast.Constant) and len(node.values) > 1:
            prefix = node.values[0].value
            if isinstance(prefix, str) and prefix.endswith(".") and prefix[:-1] in self.modules:
                package = prefix[:-1]
                for module in self.modules:
                    if module.rpartition(".")[0] == package and module != package:
                        self._add(module, node.lineno, "string")
        self.generic_visit(node)

    # ----------------------------------------------------------------------------------------
    def _existing(self, dotted: str, strict: bool = True) -> str | None:
        """The module ``dotted`` names, or (``a.b.Name``) the longest existing module prefix."""
        if dotted in self.modules:
            return dotted
        if strict:
            parts = dotted.split(".")
            for i in range(len(parts) - 1, 0, -1):
                prefix = ".".join(parts[:i])
                if prefix in self.modules:
                    return prefix
        return None


def _collect(modules: dict[str, Path]) -> tuple[list[Edge], dict[str, list[tuple[str, int, bool]]]]:
    edges: set[Edge] = set()
    external = {}
    for name, path in modules.items():
        collector = _Collector(name, path, modules)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        external[name] = collector.external
        for target, line, kind, eager in collector.found:
            if target != name:
                edges.add(Edge(name, target, line, kind, eager))
            # packages above the target that do not hold the importer run first
            for package in _ancestors(target):
                if not _contains(package, name) and package in modules:
                    edges.add(Edge(name, package, line, "package", eager))
    return sorted(edges, key=lambda e: (e.source, e.target, e.line, e.kind)), external


def collect_edges(modules: dict[str, Path] | None = None) -> list[Edge]:
    """Every edge of the import graph, with the line of the import that makes it."""
    return _collect(module_files() if modules is None else modules)[0]


def build_graph(edges) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node (or a self loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0

    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    components.append(sorted(component))
    return sorted(components)


def find_cycles(graph: dict[str, set[str]], limit: int = 10_000) -> list[tuple[str, ...]]:
    """Every elementary cycle, each starting at its alphabetically first module, sorted."""
    cycles = []
    for component in strongly_connected(graph):
        members = set(component)
        for start in component:  # cycles whose smallest node is ``start``
            allowed = {m for m in members if m >= start}
            path = [start]
            on_path = {start}
            work = [iter(sorted(graph[start] & allowed))]
            while work:
                child = next(work[-1], None)
                if child is None:
                    work.pop()
                    on_path.discard(path.pop())
                    continue
                if child == start:
                    cycles.append(tuple(path))
                    if len(cycles) > limit:
                        raise RuntimeError(f"more than {limit} cycles; the graph is badly knotted")
                elif child not in on_path:
                    path.append(child)
                    on_path.add(child)
                    work.append(iter(sorted(graph[child] & allowed)))
    return sorted(cycles)


def chain(cycle: tuple[str, ...]) -> str:
    """``a -> b -> c -> a``, module names without the ``galinear.`` prefix."""
    short = [name[len(PACKAGE) + 1:] if name.startswith(PACKAGE + ".") else name for name in cycle]
    return " -> ".join([*short, short[0]])


def _where(edges, cycle) -> list[str]:
    lines = []
    for a, b in zip(cycle, [*cycle[1:], cycle[0]]):
        first = min((e for e in edges if e.source == a and e.target == b), key=lambda e: e.line)
        path = module_files()[a].relative_to(ROOT.parent)
        lines.append(f"    {path}:{first.line} ({first.kind}) imports {b}")
    return lines


def cycle_report(cycles, known, edges=None) -> str:
    """The failure message for ``cycles`` against the ``known`` chains ('' when they agree)."""
    found = {chain(c): c for c in cycles}
    new = [name for name in found if name not in known]
    gone = [name for name in known if name not in found]
    message = []
    if new:
        message.append(f"{len(new)} import cycle(s) between galinear modules:")
        for name in new:
            message.append(f"  {name}")
            if edges is not None:
                message.extend(_where(edges, found[name]))
        message.append(
            "Fix: move the code both sides need down a layer, into a module that imports "
            "neither of them (a deferred import only moves the cycle to the first call)."
        )
    if gone:
        message.append("Cycles listed as known that no longer exist; delete them from the list:")
        message.extend(f"  {name}" for name in gone)
    return "\n".join(message)


@pytest.fixture(scope="module")
def collected():
    return _collect(module_files())


@pytest.fixture(scope="module")
def edges(collected):
    return collected[0]


def test_the_graph_is_read(edges):
    """The collector sees each kind of import, so an empty graph cannot pass as acyclic."""
    kinds = {e.kind for e in edges}
    assert {"import", "lazy import", "string", "package"} <= kinds, kinds
    pairs = {(e.source, e.target) for e in edges}
    assert ("galinear.compress.fitting.objective", "galinear.compress.methods.targets") in pairs  # lazy
    assert ("galinear.nn.functional.backends", "galinear.nn.numba_backend") in pairs  # "module:function"
    assert ("galinear.cli", "galinear.commands.compress") in pairs  # f"galinear.commands.{name}"
    assert ("galinear", "galinear.core") in pairs  # the lazy attribute table of galinear/__init__.py
    assert ("galinear.compress.methods.records", "galinear.nn") in pairs  # the package above galinear.nn.*


def test_no_import_cycles(edges):
    message = cycle_report(find_cycles(build_graph(edges)), (), edges)
    assert not message, message


def test_cycle_finder_reports_a_cycle():
    """A synthetic graph: the cycle is found, written as a chain, and fails the check."""
    graph = {
        "galinear.a": {"galinear.b"},
        "galinear.b": {"galinear.c", "galinear.d"},
        "galinear.c": {"galinear.a"},
        "galinear.d": set(),
        "galinear.e": {"galinear.e"},
    }
    cycles = find_cycles(graph)
    assert [chain(c) for c in cycles] == ["a -> b -> c -> a", "e -> e"]
    message = cycle_report(cycles, known=("e -> e",))
    assert "a -> b -> c -> a" in message and "down a layer" in message
    assert "e -> e" not in message
    assert "no longer exist" in cycle_report([], known=("a -> b -> a",))
    assert find_cycles({"galinear.a": {"galinear.b"}, "galinear.b": set()}) == []


def test_collector_rules(tmp_path):
    """Submodule, package, relative, lazy and string imports on a small package in tmp_path."""
    root = tmp_path / "galinear"
    (root / "sub" / "deep").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "sub/__init__.py": "from galinear.sub import leaf\nNAME = 1\n",
        "sub/leaf.py": "from . import other\n",
        "sub/other.py": "def f():\n    from galinear.sub import NAME\n",
        "sub/deep/__init__.py": "",
        "sub/deep/x.py": "import galinear.top\nREG = {'t': 'galinear.top:run'}\n",
        "top.py": "from galinear.sub.deep import x\nfrom typing import TYPE_CHECKING\n"
                  "if TYPE_CHECKING:\n    from galinear.sub import other\n",
    }
    for rel, text in files.items():
        (root / rel).write_text(text)
    got = {(e.source, e.target, e.kind) for e in collect_edges(module_files(root))}
    assert got == {
        ("galinear.sub", "galinear.sub.leaf", "import"),            # a submodule, not the package
        ("galinear.sub.leaf", "galinear.sub.other", "import"),      # relative
        ("galinear.sub.other", "galinear.sub", "lazy import"),      # a name of sub/__init__.py
        ("galinear.sub.deep.x", "galinear.top", "import"),
        ("galinear.sub.deep.x", "galinear.top", "string"),
        ("galinear.top", "galinear.sub.deep.x", "import"),
        ("galinear.top", "galinear.sub.deep", "package"),           # packages above, not holding top
        ("galinear.top", "galinear.sub", "package"),
    }
    cycles = [chain(c) for c in find_cycles(build_graph(collect_edges(module_files(root))))]
    assert cycles == [
        "sub -> sub.leaf -> sub.other -> sub",
        "sub.deep.x -> top -> sub.deep.x",
    ]


def _reach(edges, start_modules):
    """Modules loaded by importing ``start_modules``: eager edges only, transitively."""
    eager: dict[str, set[str]] = {}
    for e in edges:
        if e.eager:
            eager.setdefault(e.source, set()).add(e.target)
    seen, todo = set(start_modules), list(start_modules)
    while todo:
        for child in eager.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_keep_their_dependencies(collected, layer):
    """No module of the layer imports a forbidden package, at module level or in a function, and
    importing any of them loads no galinear module that imports one at module level."""
    edges, external = collected
    forbidden = FORBIDDEN[layer]
    own = [m for m in external if _contains(layer, m)]
    assert own, f"no modules found for {layer}"
    problems = [
        f"{module_files()[m].relative_to(ROOT.parent)}:{line} imports {pkg}"
        for m in own for pkg, line, _ in external[m] if pkg in forbidden
    ]
    for m in sorted(_reach(edges, own) - set(own)):
        problems += [
            f"{module_files()[m].relative_to(ROOT.parent)}:{line} imports {pkg} (loaded by {layer})"
            for pkg, line, eager in external[m] if eager and pkg in forbidden
        ]
    assert not problems, f"{layer} must not import {', '.join(forbidden)}:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------- layer order
#: Layers from the bottom up (README.md, "Three layers"): a module may import its own layer and
#: those below it, never one above. ``galinear.compiler`` loads generated kernels for numba, C and
#: (lazily) torch, so it sits above the core and below the torch layer. ``galinear.testing`` serves
#: the tests and is not ranked; neither are the package's own ``__init__``, ``__main__`` and
#: ``cli`` (entry points that name every layer).
LAYER_ORDER = (
    ("galinear._buffers", "galinear._extras", "galinear._io", "galinear._limits", "galinear._numba",
     "galinear._progress", "galinear._switch_points", "galinear._util", "galinear._version", "galinear.blades", "galinear.symbolic", "galinear.proofs",
     "galinear._generated"),
    ("galinear.core", "galinear.rotor_kernels", "galinear.kernels", "galinear.matrix_rep", "galinear.data"),
    ("galinear.compiler",),
    ("galinear.nn",),
    ("galinear.lm", "galinear.optim", "galinear.plot"),
    ("galinear.compress", "galinear.train", "galinear.quantize"),
    ("galinear.commands",),
)
UNRANKED = ("galinear", "galinear.__main__", "galinear.cli", "galinear.testing")

#: Upward imports that exist, each a debt to pay by moving code down: listed so that no new one
#: appears unnoticed (none today).
KNOWN_UPWARD: set = set()

#: Layers that share a rank and still keep apart: (importer, target) packages with no edge between
#: them. What both need lives a layer down (the language-model plumbing in ``galinear.lm``).
SIDEWAYS_FORBIDDEN = (("galinear.train", "galinear.compress"),)


def layer_of(module: str) -> int | None:
    for rank, prefixes in enumerate(LAYER_ORDER):
        if any(_contains(p, module) for p in prefixes):
            return rank
    return None


def _family(module: str) -> str:
    for prefixes in LAYER_ORDER:
        for p in prefixes:
            if _contains(p, module):
                return p
    return module


def upward_imports(edges) -> dict:
    """{(importer family, target family): [edge, ...]} for edges from a lower layer to a higher one."""
    found: dict = {}
    for e in edges:
        if e.source in UNRANKED or e.target in UNRANKED or _contains("galinear.testing", e.source):
            continue
        low, high = layer_of(e.source), layer_of(e.target)
        if low is None or high is None or high <= low:
            continue
        found.setdefault((_family(e.source), _family(e.target)), []).append(e)
    return found


def test_every_module_has_a_layer():
    unranked = [m for m in module_files() if layer_of(m) is None and m not in UNRANKED
                and not _contains("galinear.testing", m)]
    assert not unranked, f"modules outside LAYER_ORDER (give each a layer): {unranked}"


def test_no_module_imports_upward(edges):
    found = upward_imports(edges)
    new = {k: v for k, v in found.items() if k not in KNOWN_UPWARD}
    lines = []
    for (low, high), es in sorted(new.items()):
        for e in sorted(es, key=lambda e: (e.source, e.line))[:3]:
            path = module_files()[e.source].relative_to(ROOT.parent)
            lines.append(f"  {path}:{e.line} imports {e.target} ({low} is below {high})")
    assert not lines, ("imports from a lower layer to a higher one (the order is symbolic -> core/rotor_kernels -> "
                       "compiler -> nn -> lm -> compress/train -> commands); move the shared code down:\n"
                       + "\n".join(lines))
    gone = sorted(KNOWN_UPWARD - set(found))
    assert not gone, f"known upward imports that no longer exist; delete them from KNOWN_UPWARD: {gone}"


def test_the_layer_check_sees_a_planted_upward_import():
    planted = [Edge("galinear.core.products", "galinear.nn.rotor", 1, "import", True)]
    assert set(upward_imports(planted)) == {("galinear.core", "galinear.nn")}


def sideways_imports(edges) -> list:
    """Edges from a package of :data:`SIDEWAYS_FORBIDDEN` to the package it must not import."""
    return [e for e in edges for low, other in SIDEWAYS_FORBIDDEN
            if _contains(low, e.source) and _contains(other, e.target)]


def test_train_imports_nothing_from_compress(edges):
    found = sideways_imports(edges)
    lines = [f"  {module_files()[e.source].relative_to(ROOT.parent)}:{e.line} imports {e.target} ({e.kind})"
             for e in sorted(found, key=lambda e: (e.source, e.line))]
    assert not lines, ("galinear.train imports galinear.compress; move what both need into galinear.lm "
                       "(or another lower layer):\n" + "\n".join(lines))


def test_the_sideways_check_sees_a_planted_import():
    planted = [Edge("galinear.train.lm", "galinear.compress.methods.catalogue", 3, "lazy import", False),
               Edge("galinear.train.lm", "galinear.lm.models", 4, "import", True),
               Edge("galinear.compress.orchestrator", "galinear.train.loop", 5, "import", True)]
    assert sideways_imports(planted) == planted[:1]


def test_lm_sits_between_nn_and_compress():
    assert layer_of("galinear.nn.rotor") < layer_of("galinear.lm.models") < layer_of("galinear.compress.orchestrator")
    assert layer_of("galinear.compress.orchestrator") == layer_of("galinear.train.lm") < layer_of("galinear.commands.compress")
    planted = [Edge("galinear.lm.models", "galinear.compress.fitting.projection", 1, "import", True)]
    assert set(upward_imports(planted)) == {("galinear.lm", "galinear.compress")}


# ---------------------------------------------------------------------------- the orchestrator
#: The study's orchestrator: it builds the plain values (settings, Store, captures cache, context)
#: and passes them to the steps, which never import it back.
ORCHESTRATOR = "galinear.compress.orchestrator"
#: Modules under galinear.compress that may import it: the package's entry point (its
#: ``__init__.py``, which exports ``Study``) and the orchestrator itself. The command line
#: (``galinear.commands``) sits above galinear.compress and is not checked here.
ORCHESTRATOR_ENTRY_POINTS = ("galinear.compress", ORCHESTRATOR)


def orchestrator_imports(edges) -> list:
    """Edges from a module under galinear.compress, other than the entry points, to the orchestrator
    or to ``galinear.compress`` itself (whose ``__init__.py`` imports the orchestrator)."""
    return [e for e in edges if _contains("galinear.compress", e.source) and e.source not in ORCHESTRATOR_ENTRY_POINTS
            and e.target in (ORCHESTRATOR, "galinear.compress")]


def test_nothing_under_compress_imports_the_orchestrator(edges):
    found = orchestrator_imports(edges)
    lines = [f"  {module_files()[e.source].relative_to(ROOT.parent)}:{e.line} imports {e.target} ({e.kind})"
             for e in sorted(found, key=lambda e: (e.source, e.line))]
    assert not lines, (f"modules under galinear.compress import the orchestrator ({ORCHESTRATOR}); pass them the "
                       "values they need (config, Store, captures cache, context) instead:\n" + "\n".join(lines))
    assert ("galinear.compress", ORCHESTRATOR) in {(e.source, e.target) for e in edges}  # the entry point is seen


def test_the_orchestrator_check_sees_a_planted_import():
    planted = [Edge("galinear.compress.fitting.objective", ORCHESTRATOR, 3, "lazy import", False),
               Edge("galinear.compress.study.units", "galinear.compress", 4, "import", True),
               Edge("galinear.compress.study.units", "galinear.compress.study.layers", 5, "import", True),
               Edge("galinear.compress", ORCHESTRATOR, 6, "import", True),
               Edge(ORCHESTRATOR, "galinear.compress.study.units", 7, "import", True),
               Edge("galinear.commands.compress", ORCHESTRATOR, 8, "import", True)]
    assert orchestrator_imports(planted) == planted[:2]


def test_fitting_imports_nothing_from_study(edges):
    """The fits take tensors, settings, the Store and the captures cache; they never import the study."""
    found = [e for e in edges if _contains("galinear.compress.fitting", e.source)
             and _contains("galinear.compress.study", e.target)]
    lines = [f"  {module_files()[e.source].relative_to(ROOT.parent)}:{e.line} imports {e.target} ({e.kind})"
             for e in found]
    assert not lines, "galinear.compress.fitting imports galinear.compress.study:\n" + "\n".join(lines)


# ---------------------------------------------------------------------------- the core install
#: What ``pip install galinear`` brings (setup.cfg, ``install_requires``) and what those bring.
CORE_REQUIRES = ("numpy", "sympy", "numba")
CORE_PACKAGES = {*CORE_REQUIRES, "llvmlite", "mpmath"}
#: What the core install offers (README.md, "Install"): the package, Algebra and MultiVector, the
#: compiler and the prover, the symbolic layer and its proofs, and the commands verify, codegen and
#: tour (and the parser of every command, which imports only the standard library).
CORE_ENTRY_POINTS = ("galinear", "galinear.core", "galinear.rotor_kernels", "galinear.kernels", "galinear.compiler",
                     "galinear.symbolic",
                     "galinear.blades", "galinear.proofs", "galinear.cli", "galinear.commands.verify",
                     "galinear.commands.codegen", "galinear.commands.tour")
#: Modules that ``import galinear.nn`` must not load: they cost seconds (torch._dynamo alone takes
#: longer than the rest of torch) and the layers use none of them until asked.
HEAVY_FOR_NN = ("torch._dynamo", "torch._inductor", "sympy", "numba", "scipy", "matplotlib", "transformers",
                "triton", "onnx", "onnxruntime", "safetensors")


def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT.parent / "setup.cfg", encoding="utf-8")
    return config


def _requirement_names(text: str) -> list[str]:
    return [re.split(r"[<>=!~;\[ ]", line.strip(), maxsplit=1)[0].lower()
            for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_core_install_requires_only_numpy_sympy_numba():
    config = _setup_cfg()
    assert sorted(_requirement_names(config["options"]["install_requires"])) == sorted(CORE_REQUIRES)
    extras = {name: _requirement_names(value) for name, value in config["options.extras_require"].items()}
    assert "torch" in extras["torch"] and "torch" in extras["all"]
    everything = set(extras["all"])
    missing = {name: sorted(set(reqs) - everything) for name, reqs in extras.items() if set(reqs) - everything}
    assert not missing, f"extras whose packages `all` leaves out: {missing}"


def test_every_extra_package_is_named_in_the_messages():
    """galinear._extras.EXTRAS maps each package of an extra to its extra (the error names it)."""
    from galinear._extras import EXTRAS

    config = _setup_cfg()
    import_names = {"lm-eval": "lm_eval", "pytest-xdist": "xdist", "mkdocs-material": "material", "mkdocstrings-python": "mkdocstrings"}
    for extra, value in config["options.extras_require"].items():
        if extra == "all":
            continue
        for requirement in _requirement_names(value):
            name = import_names.get(requirement, requirement.replace("-", "_"))
            assert name in EXTRAS, f"{requirement} (extra {extra}) is missing from galinear._extras.EXTRAS"


def test_the_core_imports_only_core_packages(collected):
    """Importing a module of the core install loads, at module level, only the standard library,
    numpy, sympy and numba (a lazy import inside a function is for a feature of an extra)."""
    edges, external = collected
    problems = []
    for module in sorted(_reach(edges, CORE_ENTRY_POINTS)):
        for package, line, eager in external[module]:
            if eager and package not in CORE_PACKAGES and package not in sys.stdlib_module_names \
                    and package != "__future__":
                problems.append(f"{module_files()[module].relative_to(ROOT.parent)}:{line} imports {package}")
    assert not problems, ("modules of the core install import packages the core does not install "
                          "(move the import into the function that needs it):\n" + "\n".join(problems))


def test_the_core_check_sees_a_planted_import(tmp_path):
    root = tmp_path / "galinear"
    root.mkdir()
    (root / "__init__.py").write_text("from galinear import core\n")
    (root / "core.py").write_text("import numpy\nimport torch\n\ndef f():\n    import matplotlib\n")
    edges, external = _collect(module_files(root))
    reached = _reach(edges, ["galinear"])
    assert reached == {"galinear", "galinear.core"}
    eager = {pkg for m in reached for pkg, _, is_eager in external[m] if is_eager}
    assert eager - CORE_PACKAGES == {"torch"}


def _python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter (this one's), from the checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT.parent)


def _loaded(statement: str, names) -> list[str]:
    done = _python(f"import sys\n{statement}\nprint(sorted(m for m in {tuple(names)!r} if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])  # a list of str printed by the child


def test_import_galinear_loads_no_layer():
    """``import galinear`` loads its version and the table of lazy names: no torch, numba, sympy."""
    assert _loaded("import galinear", ("torch", "numba", "sympy", "numpy", "scipy", "matplotlib")) == []


def test_the_core_runs_without_torch():
    """Algebra, MultiVector, compile (numpy target) and prove with torch blocked: nothing imports it."""
    code = """
import sys
sys.modules["torch"] = None  # any import of torch now raises
import numpy as np
import galinear
alg = galinear.Algebra(3)
e = galinear.MultiVector.basis(alg)
x = (0.5 * e["e12"]).exp() @ e["e1"]
kernel = galinear.compile(lambda a, b: a ^ b, alg, {"a": 1, "b": 1}, target="numpy")
out = kernel(np.eye(3), np.roll(np.eye(3), 1, axis=0))
report = galinear.prove(lambda a, b: (a ^ b, -(b ^ a)), {"a": 1, "b": 1}, [(2, 0, 0)])
print(type(out).__name__, report.holds)
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ndarray", "True"]


def test_galinear_nn_without_torch_names_the_extra():
    done = _python("import sys\nsys.modules['torch'] = None\nimport galinear.nn")
    assert done.returncode != 0
    assert "galinear.nn needs torch: pip install 'galinear[torch]'" in done.stderr.splitlines()[-1]
    assert "MissingExtraError" in done.stderr.splitlines()[-1]


def test_a_command_without_torch_names_the_extra():
    """A command that needs torch says which extra to install, on one line, exit status 2."""
    done = _python("import sys\nsys.modules['torch'] = None\nfrom galinear.cli import main\n"
                   "sys.exit(main(['train-mlp', '--epochs', '1']))")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "galinear train-mlp: error: this command needs torch: pip install 'galinear[torch]'"


def test_missing_extra_names_only_missing_extras():
    from galinear._extras import MissingExtraError, missing_extra

    error = missing_extra(ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib.pyplot"), "a figure")
    if _python("import matplotlib").returncode == 0:  # installed: a broken import is not a missing extra
        assert not isinstance(error, MissingExtraError)
    else:
        assert isinstance(error, MissingExtraError) and error.name == "matplotlib"
        assert str(error) == "a figure needs matplotlib: pip install 'galinear[plot]'"
    unknown = ModuleNotFoundError("No module named 'no_such_package'", name="no_such_package")
    assert missing_extra(unknown, "x") is unknown
    other = ImportError("cannot import name 'x'")
    assert missing_extra(other, "x") is other
    made = MissingExtraError("galinear.nn", "torch")
    assert isinstance(made, ImportError) and made.name == "torch" and made.extra == "torch"
    assert str(made) == "galinear.nn needs torch: pip install 'galinear[torch]'"


def test_import_galinear_nn_loads_no_compiler_or_other_heavy_module():
    """``import galinear.nn`` costs about ``import torch``: no torch._dynamo (the decorators that
    keep functions eager under torch.compile wait for torch.compile), no sympy, numba or scipy."""
    pytest.importorskip("torch")
    assert _loaded("import galinear.nn", HEAVY_FOR_NN) == []
