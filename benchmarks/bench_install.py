"""Install size and import time: galinear's core against its full install and against kingdon.

Each install goes into a fresh venv from one local folder of wheels, so that the times compare
pip's work (unpacking, byte-compiling) and not the network:

1. ``pip wheel`` fills ``WORK/wheels`` with galinear (built from this checkout) and every
   dependency of ``galinear[all]``, ``torch==TORCH`` and ``kingdon`` (untimed; downloads once);
2. per setup, a fresh ``python -m venv``, then ``pip install --no-index --find-links WORK/wheels``
   timed (pip's defaults otherwise: byte-compiled, as ``pip install galinear`` does), and the
   size of the venv's ``site-packages`` on disk after it, less the size of an empty venv's;
3. import times, each in a fresh interpreter (``time.perf_counter`` around the import statement,
   so the interpreter's own start is left out), the statements of a group taken in turn for
   ``--repeats`` rounds after one untimed round; medians, and the ratio of ``import galinear.nn``
   to ``import torch`` in the same venv.

The setups: ``core`` = ``pip install galinear``; ``full`` = ``pip install galinear[all]
torch==TORCH`` (what ``make install`` installs, less the offline data packages); ``kingdon`` =
``pip install kingdon``; ``kingdon-numba`` = ``pip install kingdon numba`` (kingdon with the numba
code generation it offers, the comparison with galinear's numba-compiled core).

Run it on an otherwise idle machine (the import of torch is seconds on a busy one):

    python benchmarks/bench_install.py                 # all three setups, 7 rounds of imports
    python benchmarks/bench_install.py --setups core kingdon --repeats 11

Writes benchmarks/results/bench_install.{md,json}; the venvs and wheels stay in ``--work``
(default: a folder under the system's temporary folder) for a second run, which reinstalls each
venv from scratch but downloads nothing.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402

SETUPS = {
    "core": lambda torch: ["galinear"],
    "full": lambda torch: ["galinear[all]", torch],
    "kingdon": lambda torch: ["kingdon"],
    "kingdon-numba": lambda torch: ["kingdon", "numba"],  # kingdon's optional numba code generation
}
#: Import statements timed per setup, each group in turn within a round.
IMPORTS = {
    "core": ["import galinear", "from galinear import Algebra", "import galinear.compiler"],
    "full": ["import galinear", "import torch", "import galinear.nn"],
    "kingdon": ["import kingdon"],
    "kingdon-numba": ["import kingdon, numba"],
}
PROBE = ("import time, sys\nt0 = time.perf_counter()\n{statement}\nt1 = time.perf_counter()\n"
         "print(t1 - t0, 'torch' in sys.modules, 'torch._dynamo' in sys.modules)")


def run(argv, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed ({done.returncode}):\n{done.stdout[-2000:]}\n"
                         f"{done.stderr[-4000:]}")
    return done


def disk_bytes(path: Path) -> int:
    """Bytes on disk of the files under ``path`` (``du``'s blocks, links counted once)."""
    seen, total = set(), 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def fill_wheels(wheels: Path, torch: str) -> None:
    """Every wheel the setups need, in ``wheels`` (galinear built from this checkout)."""
    wheels.mkdir(parents=True, exist_ok=True)
    for old in wheels.glob("galinear-*.whl"):
        old.unlink()
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(_common.ROOT)])
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels), "--find-links", str(wheels),
         f"{_common.ROOT}[all]", torch, "kingdon"])


def fresh_venv(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    run([sys.executable, "-m", "venv", str(path)])
    return path / "bin" / "python"


def install(work: Path, wheels: Path, name: str, requirements: list[str]) -> dict:
    python = fresh_venv(work / f"venv-{name}")
    empty = disk_bytes(site_packages(python.parent.parent))
    start = time.perf_counter()
    run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheels),
         "--disable-pip-version-check", *requirements])
    seconds = time.perf_counter() - start
    listed = run([str(python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"]).stdout
    packages = sorted(line.split("==")[0] for line in listed.splitlines()
                      if line and line.split("==")[0].lower() not in ("pip", "setuptools", "wheel"))
    size = disk_bytes(site_packages(python.parent.parent)) - empty
    return {"requirements": requirements, "install_seconds": seconds, "site_packages_bytes": size,
            "packages": packages, "python": str(python)}


def time_imports(python: str, statements: list[str], repeats: int) -> dict:
    """statement -> {"seconds": [...], "median": m, "torch": bool, "dynamo": bool}; fresh interpreters,
    the statements in turn each round, one untimed round first (byte-compiled files, disk cache)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env["NUMBA_CACHE_DIR"] = os.path.join(os.path.dirname(os.path.dirname(python)), "numba-cache")
    found = {s: {"seconds": []} for s in statements}
    for round_ in range(repeats + 1):
        for statement in statements:
            done = run([python, "-c", PROBE.format(statement=statement)], env=env, cwd=tempfile.gettempdir())
            seconds, torch, dynamo = done.stdout.split()
            if round_:
                found[statement]["seconds"].append(float(seconds))
            found[statement].update(torch=torch == "True", dynamo=dynamo == "True")
    for entry in found.values():
        entry["median"] = statistics.median(entry["seconds"])
    return found


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n / 2**20:.1f} MiB"


def report(meta: dict, installs: dict, imports: dict) -> str:
    lines = [_common.header(meta), "", "### Install (fresh venv, local wheels, pip's defaults)", ""]
    core = installs.get("core")
    rows = []
    for name, found in installs.items():
        rows.append([f"`pip install {' '.join(found['requirements'])}`", mib(found["site_packages_bytes"]),
                     f"{found['install_seconds']:.1f} s", len(found["packages"]),
                     _common.ratio(found["site_packages_bytes"] / core["site_packages_bytes"], 1, "x") if core else None])
    lines.append(_common.markdown_table(["install", "site-packages on disk", "install time", "packages",
                                         "size / core"], rows))
    if core:
        lines += ["", f"core packages: {', '.join(core['packages'])}"]
    lines += ["", f"### Import (fresh interpreter each, median of {meta['repeats']} rounds)", ""]
    rows = []
    for name, found in imports.items():
        for statement, entry in found.items():
            rows.append([name, f"`{statement}`", f"{entry['median']:.3f} s", f"{min(entry['seconds']):.3f} s",
                         f"{max(entry['seconds']):.3f} s", "yes" if entry["torch"] else "no",
                         "yes" if entry["dynamo"] else "no"])
    lines.append(_common.markdown_table(["venv", "statement", "median", "best", "worst", "loads torch",
                                         "loads torch._dynamo"], rows))
    full = imports.get("full")
    if full:
        nn, torch = full["import galinear.nn"]["median"], full["import torch"]["median"]
        lines += ["", f"`import galinear.nn` / `import torch` (medians, same venv, taken in turn): "
                      f"**{nn / torch:.2f}x** ({nn:.2f} s / {torch:.2f} s)"]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "galinear-bench-install",
                        help="folder for the wheels and the venvs (kept for a second run)")
    parser.add_argument("--setups", nargs="+", choices=sorted(SETUPS), default=list(SETUPS))
    parser.add_argument("--torch", default="torch==2.13.0", help="torch requirement of the full install")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds of imports (default 7)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/results alone")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    wheels = args.work / "wheels"
    print(f"wheels into {wheels} (downloads what is missing; not timed)", flush=True)
    fill_wheels(wheels, args.torch)
    installs, imports = {}, {}
    for name in args.setups:
        print(f"installing {name} ...", flush=True)
        installs[name] = install(args.work, wheels, name, SETUPS[name](args.torch))
        found = installs[name]
        print(f"  {mib(found['site_packages_bytes'])}, {found['install_seconds']:.1f} s, "
              f"{len(found['packages'])} packages", flush=True)
    for name in args.setups:
        print(f"timing imports in {name} ...", flush=True)
        imports[name] = time_imports(installs[name]["python"], IMPORTS[name], args.repeats)
    meta = _common.metadata(_common.command_line(__file__), packages=(), thread_counts=False,
                            repeats=args.repeats, torch_requirement=args.torch,
                            python=sys.version.split()[0], load_average=os.getloadavg())
    markdown = report(meta, installs, imports)
    print(markdown)
    if not args.no_write:
        payload = {"meta": meta, "installs": installs, "imports": imports}
        for path in _common.write_results(_common.RESULTS / "bench_install", payload, markdown):
            print(f"wrote {path.relative_to(_common.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
