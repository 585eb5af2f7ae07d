"""The API reference of the docs site, written at build time from the packages' ``__all__``.

Every package of galinear whose name has no leading underscore and that declares ``__all__`` gets
an index page (its docstring and a table of its names), and every name in its ``__all__`` gets a
page of its own under ``reference/<package path>/<name>.md``. The packages and their names are
read statically with griffe (the loader mkdocstrings uses), so the build imports neither torch
nor numba. A name whose object is already rendered on another page (``galinear.Algebra`` is
``galinear.core.Algebra``) gets a short page that points there, so each object is rendered once.

``mkdocs.yml`` loads this file as a hook; ``tests/docs/test_reference.py`` imports
:func:`reference_pages` and checks it against the packages' ``__all__`` at run time.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "galinear"
REFERENCE = "reference"
NAV_TITLE = "API reference"


@dataclasses.dataclass(frozen=True)
class Page:
    package: str          # the package whose __all__ holds the name, e.g. "galinear.nn"
    name: str             # the public name, e.g. "RotorLinear"
    target: str | None    # the dotted path mkdocstrings renders, or None for a pointer page
    same_as: str | None   # for a pointer page: the public path of the page that renders it
    summary: str          # the first line of the object's docstring

    @property
    def public_path(self) -> str:
        return f"{self.package}.{self.name}"

    @property
    def uri(self) -> str:
        return page_uri(self.package, self.name)


def page_uri(package: str, name: str | None = None) -> str:
    folder = "/".join([REFERENCE, *package.split(".")])
    return f"{folder}/index.md" if name is None else f"{folder}/{name}.md"


def _first_line(obj) -> str:
    doc = obj.docstring.value.strip() if obj.docstring else ""
    return doc.split("\n\n")[0].replace("\n", " ").strip() if doc else ""


def _lazy_names(init: pathlib.Path) -> dict[str, tuple[str, str | None]]:
    """galinear/__init__.py's ``_LAZY`` table: public name -> (module, attribute or None)."""
    tree = ast.parse(init.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_LAZY" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


@functools.lru_cache(maxsize=1)
def _loaded():
    import griffe

    return griffe.load(PACKAGE, search_paths=[str(ROOT)], resolve_aliases=True, resolve_external=False)


def _lookup(path: str):
    root = _loaded()
    parts = path.split(".")[1:]
    obj = root
    for part in parts:
        obj = obj.members[part]
    return obj.final_target if obj.is_alias else obj


def public_packages() -> dict[str, list[str]]:
    """Dotted package name -> its ``__all__``, for every public package that declares one."""
    found: dict[str, list[str]] = {}

    def walk(module) -> None:
        if module.is_alias or any(part.startswith("_") for part in module.path.split(".")):
            return
        if module.is_init_module and module.exports is not None:
            found[module.path] = [str(name) for name in module.exports]
        for sub in module.modules.values():
            walk(sub)

    walk(_loaded())
    return found


def _resolve(package: str, name: str, lazy: dict) -> tuple[str, object]:
    """(dotted path for mkdocstrings, griffe object) of ``package.name``."""
    if package == PACKAGE and name in lazy:
        module, attribute = lazy[name]
        path = module if attribute is None else f"{module}.{attribute}"
    else:
        path = f"{package}.{name}"
    obj = _lookup(path)
    # a function that shadows the submodule it lives in (galinear.nn.freeze, galinear.compiler.prove):
    # griffe sees the module, Python the function
    if obj.is_module and name in obj.members and not obj.members[name].is_module:
        inner = obj.members[name]
        obj = inner.final_target if inner.is_alias else inner
        path = f"{path}.{name}"
    return path, obj


def reference_pages() -> list[Page]:
    """One page per public name; the subpackages' pages come first, so they render shared objects."""
    packages = public_packages()
    lazy = _lazy_names(ROOT / PACKAGE / "__init__.py")
    order = sorted(packages, key=lambda p: (p == PACKAGE, p))
    rendered: dict[str, str] = {}   # canonical path -> public path of the page that renders it
    pages: dict[tuple[str, str], Page] = {}
    for package in order:
        for name in packages[package]:
            path, obj = _resolve(package, name, lazy)
            canonical = obj.path
            if obj.is_module and canonical in packages:
                same_as = canonical                          # a package with its own index page
                pages[package, name] = Page(package, name, None, same_as, _first_line(obj))
                continue
            if canonical in rendered:
                pages[package, name] = Page(package, name, None, rendered[canonical], _first_line(obj))
                continue
            rendered[canonical] = f"{package}.{name}"
            pages[package, name] = Page(package, name, path, None, _first_line(obj))
    return [pages[package, name] for package in sorted(packages) for name in packages[package]]


def _relative(from_uri: str, to_uri: str) -> str:
    import posixpath

    return posixpath.relpath(to_uri, posixpath.dirname(from_uri))


def _uri_of(public_path: str, pages_by_path: dict[str, Page], packages) -> str:
    if public_path in packages:
        return page_uri(public_path)
    return pages_by_path[public_path].uri


def page_markdown(page: Page, pages_by_path: dict[str, Page], packages) -> str:
    if page.target is not None:
        return f"::: {page.target}\n    options:\n      show_root_heading: true\n      show_root_full_path: true\n      heading_level: 1\n"
    link = _relative(page.uri, _uri_of(page.same_as, pages_by_path, packages))
    what = "the package" if page.same_as in packages else "the same object as"
    return (f"# {page.public_path}\n\n`{page.public_path}` is {what} [`{page.same_as}`]({link}), "
            f"documented there.\n\n{page.summary}\n")


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def package_markdown(package: str, names: list[str], pages_by_path: dict[str, Page]) -> str:
    lines = [f"# {package}", "", f"::: {package}", "    options:", "      members: false",
             "      show_root_heading: false", "      show_root_toc_entry: false", "",
             "| name | summary |", "|---|---|"]
    uri = page_uri(package)
    for name in names:
        page = pages_by_path[f"{package}.{name}"]
        lines.append(f"| [`{name}`]({_relative(uri, page.uri)}) | {_escape(page.summary)} |")
    return "\n".join(lines) + "\n"


def index_markdown(packages: dict[str, list[str]], pages_by_path: dict[str, Page]) -> str:
    uri = f"{REFERENCE}/index.md"
    lines = ["# API reference", "",
             "Every name in `galinear.__all__` and in the `__all__` of each public subpackage has a page, "
             "generated from its docstring. Packages:", "",
             "| package | names | summary |", "|---|---|---|"]
    root = _loaded()
    for package in sorted(packages):
        obj = root if package == PACKAGE else _lookup(package)
        lines.append(f"| [`{package}`]({_relative(uri, page_uri(package))}) | {len(packages[package])} | "
                     f"{_escape(_first_line(obj))} |")
    return "\n".join(lines) + "\n"


def all_markdown() -> dict[str, str]:
    """Every generated page: URI -> Markdown."""
    packages = public_packages()
    pages = reference_pages()
    by_path = {page.public_path: page for page in pages}
    out = {f"{REFERENCE}/index.md": index_markdown(packages, by_path)}
    for package, names in packages.items():
        out[page_uri(package)] = package_markdown(package, names, by_path)
    for page in pages:
        out[page.uri] = page_markdown(page, by_path, packages)
    return out


def navigation() -> list:
    packages = public_packages()
    nav: list = [{"Overview": f"{REFERENCE}/index.md"}]
    for package in sorted(packages):
        entries = [{"Overview": page_uri(package)}]
        entries += [{name: page_uri(package, name)} for name in packages[package]]
        nav.append({package: entries})
    return nav


# mkdocs hooks


def on_config(config, **kwargs):
    """Replaces the nav entry titled NAV_TITLE by the generated pages."""
    nav = config.get("nav") or []
    for i, entry in enumerate(nav):
        if isinstance(entry, dict) and NAV_TITLE in entry:
            nav[i] = {NAV_TITLE: navigation()}
    return config


def on_files(files, config, **kwargs):
    from mkdocs.structure.files import File

    for uri, text in all_markdown().items():
        existing = files.get_file_from_path(uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, uri, content=text))
    return files


_ROLE = None


def on_page_content(html, page, config, files):
    """Docstrings name objects with Sphinx roles (:func:`~a.b`); the page shows the name alone."""
    import re

    global _ROLE
    if _ROLE is None:
        _ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|obj|exc|const):<code>~?([^<]*)</code>")
    return _ROLE.sub(r"<code>\1</code>", html)
