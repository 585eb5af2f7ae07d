"""Run every gallery example (docs/gallery/plot_*.py), write its picture into docs/gallery/images/
and the page docs/gallery/index.md (each picture with its script).

    python docs/gallery/build.py                 # all examples (make gallery)
    python docs/gallery/build.py --only pga_motor cga_spheres
    python docs/gallery/build.py --out /tmp/pictures --no-index

The examples run one after the other in this process (matplotlib's Agg backend), so the imports
and compiled kernels they share are paid once. Each example's seconds are printed; a failing
example stops the build with its traceback.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import runpy
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
INTRO = """# Gallery

Pictures of the geometry and of the results, each made by the small script below it. Every script
runs as it stands (`python docs/gallery/plot_pga_motor.py`); `make gallery` runs them all and
writes the pictures into `docs/gallery/images/`. The geometry is drawn with `galinear.plot`
(matplotlib; `pip install 'galinear[plot]'`): every drawing function takes `ax=None` and returns
the axes, so the pictures work offline and in a notebook. The result pictures read the committed
tables and JSON files under `docs/` and `benchmarks/results/`; they run no benchmark.
"""


def examples(only=None) -> list[Path]:
    """The example scripts, in name order (``only``: names without ``plot_`` and ``.py``)."""
    scripts = sorted(HERE.glob("plot_*.py"))
    if only:
        wanted = set(only)
        unknown = wanted - {s.stem[len("plot_"):] for s in scripts}
        if unknown:
            raise SystemExit(f"build.py: no example named {', '.join(sorted(unknown))}")
        scripts = [s for s in scripts if s.stem[len("plot_"):] in wanted]
    return scripts


def outputs(script: Path) -> list[str]:
    """The PNG names a script saves (the string literals ending in .png)."""
    return sorted({node.value for node in ast.walk(ast.parse(script.read_text(encoding="utf-8")))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".png")})


def run(scripts, out: Path) -> dict:
    """Run each script with its pictures going to ``out``; {script name: seconds}."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    os.environ["GALLERY_OUT"] = str(out)
    out.mkdir(parents=True, exist_ok=True)
    seconds = {}
    for script in scripts:
        start = time.perf_counter()
        runpy.run_path(str(script), run_name="__main__")
        plt.close("all")
        seconds[script.name] = time.perf_counter() - start
        missing = [name for name in outputs(script) if not (out / name).is_file()]
        if missing:
            raise SystemExit(f"build.py: {script.name} did not write {', '.join(missing)}")
        print(f"{script.name}: {seconds[script.name]:.1f} s", flush=True)
    return seconds


def index(scripts) -> str:
    """The gallery page: per script its title, description, picture(s) and code."""
    parts = [INTRO]
    for script in scripts:
        source = script.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(source)) or script.stem
        title, _, text = doc.partition("\n")
        body = re.sub(r'^""".*?"""\n+', "", source, count=1, flags=re.S)
        parts.append(f"## {title.strip()}\n\n{text.strip()}\n")
        parts.extend(f"![{title.strip()}](images/{name})\n" for name in outputs(script))
        parts.append(f"`docs/gallery/{script.name}`:\n\n```python\n{body.rstrip()}\n```\n")
    return "\n".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="run the gallery examples and write their pictures")
    parser.add_argument("--out", type=Path, default=HERE / "images", help="folder for the PNGs (default: %(default)s)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these examples (e.g. pga_motor)")
    parser.add_argument("--no-index", action="store_true", help="do not rewrite docs/gallery/index.md")
    args = parser.parse_args(argv)
    scripts = examples(args.only)
    start = time.perf_counter()
    run(scripts, args.out)
    if not args.no_index and not args.only:
        (HERE / "index.md").write_text(index(scripts), encoding="utf-8")
    print(f"{len(scripts)} examples in {time.perf_counter() - start:.1f} s, pictures in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
