"""Compiled user expressions: galinear.compile (numba) against kingdon and clifford, side by side.

Run: ``make bench-compile`` (= ``.venv/bin/python benchmarks/bench_compile.py``); a smoke run:
``.venv/bin/python benchmarks/bench_compile.py --quick``. Writes
benchmarks/results/bench_compile.{md,json}; ``--markdown`` prints the section of docs/performance.md.

Expressions (the same Python function for every library where the operators agree):
PGA Cl(3,0,1) motor applied to a point and to a plane (``M * x * ~M``), join of two points
(``a & b``), meet of two planes (``a ^ b``), the geometric product of two even multivectors;
CGA Cl(4,1) up-projection of a Euclidean point (``x + 0.5 * x * x * n_inf + n_o``, x on e1..e3 only),
and the chain of an up-projection, a motor sandwich and a down-projection (a division by
``-(Y | n_inf)``, which the rational order cancels to ``R x ~R / |R|^2 + t``);
rotor sandwiches in Cl(3) and Cl(4); an STA Cl(1,3) boost ``R * x * ~R``; the commutator
``(a * b - b * a) / 2`` of two bivectors of Cl(4).

Contenders, each on its own natural layout (the layout conversion is done before timing and not timed):

* galinear: ``galinear.compile(func, algebra, inputs, target="numba")`` called on arrays
  ``(N, k)`` (rows of the coefficients of the input blades); numba's default threads (the kernel
  runs its ``prange`` variant from 16,384 rows on);
* kingdon: ``kingdon.Algebra(p, q, r, wrapper=numba.njit).add_operator(func, symbolic=True)``
  (one generated function per input blade pattern, with kingdon's CSE, jitted by numba) called on
  kingdon multivectors holding one array of N values per blade (coefficients ``(k, N)``);
* clifford: clifford has no batched path for a user's expression; its numba support
  (``layout.MultiVector`` inside ``numba.njit``) runs the expression row by row over dense rows
  ``(N, 2**n)``: a per-object path, timed on at most 10,000 rows and scaled to N (labelled).

Times: best of --repeats samples after a warm-up call, taken round-robin (every repeat times
galinear and kingdon once) so that load drifts hit both alike (clifford's row-by-row loop is timed
on its own afterwards); a sample loops the call until it lasts at least
20 ms. Ratios are kingdon / galinear and clifford / galinear (above 1: galinear is faster). Besides
the public calls, galinear's call writing into a preallocated output (``out=``) is timed against
kingdon's bare jitted function on its value arrays: what separates the two without the cost of
fresh output memory (page faults of a new array) and call overheads. The 1,000,000-row case is also timed with numba
limited to 1 thread, and beside one busy process (a pure-Python loop this benchmark starts and kills).

Outputs are compared on 64 rows before timing (kingdon's blades mapped to galinear's by name, with
the sign of a reordered name; blades kingdon outputs that galinear proves zero must be zero).
Multiplications: galinear's ``kernel.operations["multiplications"]`` (sympy count) and, for both
generated programs by one rule, the ``*`` operators (``ast.Mult``) in the generated function body.
Compile time: cold (a fresh process with an empty numba cache folder, ``galinear.compile(cache=False)``,
until the kernel has run on 1 row and on 16,384 rows: both numba variants compiled) and cached (a
second process on the same folder, ``cache=True``); kingdon from ``add_operator`` to its first call
(kingdon keeps no disk cache: its second process compiles again). Both libraries are imported, and
numba has compiled one trivial function, before the first clock starts.
"""
from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))

import numpy as np  # noqa: E402

from _common import (RESULTS, BusyProcess, command_line, header, markdown_table, metadata, number,  # noqa: E402
                     ratio, round_robin, write_results)


OUT = RESULTS / "bench_compile"
BATCHES = (1, 1_000, 1_000_000)
QUICK_BATCHES = (1, 1_000, 20_000)
CLIFFORD_MAX_ROWS = 10_000
CHECK_ROWS = 64
SAMPLE_SECONDS = 0.02


# ---------------------------------------------------------------------------- expressions
def sandwich(M, x):
    return M * x * ~M


def join(a, b):
    return a & b


def meet(a, b):
    return a ^ b


def product(a, b):
    return a * b


def commutator(a, b):
    return (a * b - b * a) / 2


def cga_up_function(n_inf, n_o):
    """x -> x + x^2 n_inf / 2 + n_o, with the constant blades of the library at hand."""

    def cga_up(x):
        return x + 0.5 * x * x * n_inf + n_o

    return cga_up


def cga_chain_function(n_inf, n_o):
    """Up-project x, move it by the motor (1 - t n_inf / 2) R, project down: R x ~R / |R|^2 + t."""

    def cga_chain(x, R, t):
        X = x + 0.5 * x * x * n_inf + n_o
        M = (1 - 0.5 * t * n_inf) * R
        Y = M * X * ~M
        Y = Y / (-(Y | n_inf))
        E = n_inf ^ n_o
        return (Y ^ E) * E

    return cga_chain


#: name, label, (p, q, r), function, inputs (galinear patterns), needs the CGA constants
CASES = [
    ("pga_motor_point", "PGA motor on a point `M * x * ~M` (M even, x grade 3)", (3, 0, 1), sandwich,
     {"M": "even", "x": 3}),
    ("pga_motor_plane", "PGA motor on a plane `M * x * ~M` (M even, x grade 1)", (3, 0, 1), sandwich,
     {"M": "even", "x": 1}),
    ("pga_join_points", "PGA join of two points `a & b` (grade 3)", (3, 0, 1), join, {"a": 3, "b": 3}),
    ("pga_meet_planes", "PGA meet of two planes `a ^ b` (grade 1)", (3, 0, 1), meet, {"a": 1, "b": 1}),
    ("pga_even_product", "PGA product of two even multivectors `a * b`", (3, 0, 1), product,
     {"a": "even", "b": "even"}),
    ("cga_up", "CGA up-projection `x + 0.5 * x * x * n_inf + n_o` (x on e1, e2, e3)", (4, 1, 0), "cga_up",
     {"x": ["e1", "e2", "e3"]}),
    ("cga_chain", "CGA up-projection, motor `(1 - t n_inf / 2) R` sandwich, down-projection (x, t on e1..e3; "
     "R in 1, e12, e13, e23)", (4, 1, 0), "cga_chain",
     {"x": ["e1", "e2", "e3"], "R": ["1", "e12", "e13", "e23"], "t": ["e1", "e2", "e3"]}),
    ("cl3_rotor", "Cl(3) rotor sandwich `R * x * ~R` (R even, x grade 1)", (3, 0, 0), sandwich,
     {"M": "even", "x": 1}),
    ("cl4_rotor", "Cl(4) rotor sandwich `R * x * ~R` (R even, x grade 1)", (4, 0, 0), sandwich,
     {"M": "even", "x": 1}),
    ("sta_boost", "STA Cl(1,3) boost `R * x * ~R` (R even, x grade 1)", (1, 3, 0), sandwich,
     {"M": "even", "x": 1}),
    ("cl4_commutator", "Cl(4) commutator `(a * b - b * a) / 2` of two bivectors", (4, 0, 0), commutator,
     {"a": 2, "b": 2}),
]


CGA_FACTORIES = {"cga_up": cga_up_function, "cga_chain": cga_chain_function}


def _galinear_cga_constants(metric):
    """n_inf = e4 + e5 and n_o = (e5 - e4) / 2 as constant symbolic multivectors (e4^2 = 1, e5^2 = -1)."""
    from galinear import blades
    from galinear.symbolic import MultiVector as SymbolicMultiVector

    names = blades.blade_names(len(metric))
    zero = [0] * (1 << len(metric))
    n_inf, n_o = list(zero), list(zero)
    n_inf[names.index("e4")], n_inf[names.index("e5")] = 1, 1
    n_o[names.index("e4")], n_o[names.index("e5")] = -0.5, 0.5
    import sympy as sp

    return (SymbolicMultiVector(metric, [sp.nsimplify(c) for c in n_inf]),
            SymbolicMultiVector(metric, [sp.nsimplify(c) for c in n_o]))


def galinear_function(case):
    name, _, signature, func, _ = case
    if func in CGA_FACTORIES:
        from galinear import Algebra

        return CGA_FACTORIES[func](*_galinear_cga_constants(Algebra(*signature).metric))
    return func


def kingdon_function(case, kalg):
    func = case[3]
    if func in CGA_FACTORIES:
        e4, e5 = kalg.blades.e4, kalg.blades.e5
        return CGA_FACTORIES[func](e4 + e5, 0.5 * (e5 - e4))
    return func


# ---------------------------------------------------------------------------- blade maps
def _mask(name: str) -> int:
    """Bitmask of a galinear blade name ("1", "e124"; n <= 9 here)."""
    return 0 if name == "1" else sum(1 << (int(c) - 1) for c in name[1:])


def _maps(metric, ksig):
    """(galinear mask -> (kingdon key, sign)), (kingdon key -> (galinear mask, sign))."""
    from galinear.core.mvinterop import _blade_map

    g2k, g2k_sign = _blade_map(tuple(metric), tuple(ksig))
    k2g, k2g_sign = _blade_map(tuple(ksig), tuple(metric))
    return ((lambda m: (int(g2k[m]), float(g2k_sign[m]))), (lambda k: (int(k2g[k]), float(k2g_sign[k]))))


class Contenders:
    """The three libraries' callables for one expression, built once; ``data(N)`` makes inputs."""

    def __init__(self, case, use_clifford: bool):
        import numba
        import kingdon

        import galinear
        from galinear import Algebra

        self.case = case
        name, _, signature, _, inputs = case
        self.algebra = Algebra(*signature)
        self.metric = tuple(int(m) for m in self.algebra.metric)
        self.kernel = galinear.compile(galinear_function(case), self.algebra, inputs, target="numba", name=name)
        self.kalg = kingdon.Algebra(*signature, wrapper=numba.njit)
        ksig = tuple(int(s) for s in np.asarray(self.kalg.signature))
        self.to_k, self.from_k = _maps(self.metric, ksig)
        kfunc = kingdon_function(case, self.kalg)
        self.kop = self.kalg.add_operator(kfunc, symbolic=True, name=name)
        self.clifford = None
        self.clifford_path = "per-row numba loop"
        if use_clifford:
            self.clifford = self._clifford_loop(case)

    # -- inputs in each layout
    def data(self, rows: int, seed: int = 0) -> dict:
        from galinear import blades

        rng = np.random.default_rng(seed)
        names = blades.blade_names(self.algebra.n)
        ours, theirs, dense = [], [], []
        for arg, blade_names in self.kernel.input_blades.items():
            values = rng.standard_normal((rows, len(blade_names)))
            ours.append(np.ascontiguousarray(values))
            keys, signs = zip(*(self.to_k(_mask(b)) for b in blade_names))
            kvalues = np.ascontiguousarray((values * np.asarray(signs)).T)  # (k, N): kingdon's layout
            theirs.append(self.kalg.multivector(values=kvalues, keys=tuple(keys)))
            full = np.zeros((rows, 1 << self.algebra.n))
            full[:, [names.index(b) for b in blade_names]] = values
            dense.append(full)
        return {"galinear": ours, "kingdon": theirs, "dense": dense, "rows": rows}

    # -- calls
    def galinear_call(self, d):
        return lambda: self.kernel(*d["galinear"])

    def galinear_bare(self, d):
        """galinear's public call writing into a preallocated output (``out=``, numpy's convention)."""
        out = np.empty((d["rows"], len(self.kernel.output_blades)))
        args = d["galinear"]
        return (lambda: self.kernel(*args, out=out)), "serial"

    def galinear_unchecked(self, d):
        """``kernel.unchecked``: the numba kernel without the call's checks, into a preallocated output."""
        out = np.empty((d["rows"], len(self.kernel.output_blades)))
        args, fn = d["galinear"], self.kernel.unchecked
        return lambda: fn(*args, out)

    def galinear_parallel(self, d):
        """The public call with the prange variant (``parallel=True``), on a fresh output."""
        args = d["galinear"]
        return lambda: self.kernel(*args, parallel=True)

    def kingdon_call(self, d):
        mvs = d["kingdon"]
        return lambda: self.kop(*mvs)

    def kingdon_bare(self, d):
        compiled = self.kop[tuple(d["kingdon"])]
        values = tuple(mv.values() for mv in d["kingdon"])
        fn = compiled.wrapped_func
        return lambda: fn(*values)

    def clifford_call(self, d):
        rows = min(d["rows"], CLIFFORD_MAX_ROWS)
        args = [np.ascontiguousarray(a[:rows]) for a in d["dense"]]
        out = np.empty((rows, 1 << self.algebra.n))
        loop = self.clifford
        return lambda: loop(*args, out), out

    def _clifford_loop(self, case):
        import clifford
        import numba

        p, q, r = case[2]
        layout, _ = clifford.Cl(p, q, r)
        if tuple(int(s) for s in layout.sig) != self.metric:
            return None
        func = case[3]
        if func == "cga_up":
            names = list(layout.names)
            e4, e5 = np.zeros(layout.gaDims), np.zeros(layout.gaDims)
            e4[names.index("e4")], e5[names.index("e5")] = 1.0, 1.0
            n_inf_v, n_o_v = e4 + e5, 0.5 * (e5 - e4)

            @numba.njit
            def loop(xs, out):
                n_inf, n_o = layout.MultiVector(n_inf_v), layout.MultiVector(n_o_v)
                for i in range(xs.shape[0]):
                    x = layout.MultiVector(xs[i])
                    out[i] = (x + 0.5 * x * x * n_inf + n_o).value
            return loop
        if func in CGA_FACTORIES:  # the chain: clifford's objects one by one, with its own n_inf and n_o
            names = list(layout.names)
            e4, e5 = np.zeros(layout.gaDims), np.zeros(layout.gaDims)
            e4[names.index("e4")], e5[names.index("e5")] = 1.0, 1.0
            chain = CGA_FACTORIES[func](layout.MultiVector(e4 + e5), layout.MultiVector(0.5 * (e5 - e4)))
            self.clifford_path = "per-object Python loop"

            def chain_loop(*arrays):
                *inputs, out = arrays
                for i in range(inputs[0].shape[0]):
                    out[i] = chain(*(layout.MultiVector(a[i]) for a in inputs)).value
            return chain_loop

        def python_loop(a_s, b_s, out):  # clifford's objects one by one (its numba support lacks &)
            for i in range(a_s.shape[0]):
                out[i] = func(layout.MultiVector(a_s[i]), layout.MultiVector(b_s[i])).value

        if func is join:
            self.clifford_path = "per-object Python loop"
            return python_loop
        body = numba.njit(func)

        @numba.njit
        def loop(a_s, b_s, out):
            for i in range(a_s.shape[0]):
                out[i] = body(layout.MultiVector(a_s[i]), layout.MultiVector(b_s[i])).value
        return loop

    # -- the check
    def check(self) -> dict:
        """Largest difference of kingdon (and clifford) from galinear on CHECK_ROWS rows, scaled by
        max(1, |galinear row|); kingdon's extra blades must be zero."""
        from galinear import blades

        d = self.data(CHECK_ROWS, seed=1)
        ours = np.asarray(self.kernel(*d["galinear"]))
        scale = np.maximum(1.0, np.max(np.abs(ours), axis=1, keepdims=True))
        res = self.kop(*d["kingdon"])
        theirs = np.zeros_like(ours)
        extra = 0.0
        position = {_mask(b): i for i, b in enumerate(self.kernel.output_blades)}
        kvalues = res.values()
        for key, v in zip(res.keys(), kvalues):
            mask, sign = self.from_k(int(key))
            v = np.broadcast_to(np.asarray(v, dtype=np.float64), (CHECK_ROWS,))
            if mask in position:
                theirs[:, position[mask]] = sign * v
            else:
                extra = max(extra, float(np.max(np.abs(v))))
        out = {"kingdon_max_diff": float(np.max(np.abs(theirs - ours) / scale)), "kingdon_extra_blades_max": extra,
               "kingdon_output_blades": len(res.keys()), "galinear_output_blades": len(ours[0])}
        if self.clifford is not None:
            fn, cout = self.clifford_call(d)
            fn()
            names = blades.blade_names(self.algebra.n)
            cols = [names.index(b) for b in self.kernel.output_blades]
            rest = [i for i in range(len(names)) if i not in cols]
            out["clifford_path"] = self.clifford_path
            out["clifford_max_diff"] = float(np.max(np.abs(cout[:, cols] - ours) / scale))
            out["clifford_extra_blades_max"] = float(np.max(np.abs(cout[:, rest]))) if rest else 0.0
        return out


# ---------------------------------------------------------------------------- counting
def count_mult(source: str, function: str | None = None) -> int:
    """``*`` operators (ast.Mult BinOps) in the body of ``function`` (the first def when None)."""
    tree = ast.parse(textwrap.dedent(source))
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    target = next(n for n in defs if function is None or n.name == function)
    return sum(1 for n in ast.walk(target) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult))


def program_facts(c: Contenders) -> dict:
    d = c.data(1)
    compiled = c.kop[tuple(d["kingdon"])]
    ksource = inspect.getsource(compiled.func)
    return {
        "galinear_multiplications": int(c.kernel.operations["multiplications"]),
        "galinear_additions": int(c.kernel.operations["additions"]),
        "galinear_strategy": c.kernel.strategy,
        "galinear_ast_mult": count_mult(c.kernel.source, "kernel_serial"),
        "kingdon_ast_mult": count_mult(ksource),
        "kingdon_docstring": (compiled.func.__doc__ or "").strip(),
        "galinear_source_lines": len(c.kernel.source.splitlines()),
        "kingdon_source_lines": len(ksource.splitlines()),
        "galinear_inputs": {k: len(v) for k, v in c.kernel.input_blades.items()},
        "galinear_outputs": len(c.kernel.output_blades),
        "kingdon_source": ksource,
    }


# ---------------------------------------------------------------------------- timing
def time_case(c: Contenders, rows: int, repeats: int, threads: int | None = None) -> dict:
    import numba

    d = c.data(rows)
    bare, variant = c.galinear_bare(d)
    fns = {"galinear": c.galinear_call(d), "kingdon": c.kingdon_call(d),
           "galinear_bare": bare, "kingdon_bare": c.kingdon_bare(d), "galinear_parallel": c.galinear_parallel(d),
           "galinear_unchecked": c.galinear_unchecked(d)}
    error = None
    try:
        fns["galinear"]()
    except Exception as e:  # noqa: BLE001 - the public call failed: reported, the bare kernel still timed
        error = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        del fns["galinear"]
    clifford_rows = None
    previous = numba.get_num_threads()
    if threads is not None:
        numba.set_num_threads(threads)
    try:
        best = {k: t.best for k, t in round_robin(fns, repeats, min_sample_seconds=SAMPLE_SECONDS).items()}
    finally:
        numba.set_num_threads(previous)
    if c.clifford is not None and threads is None:
        # timed on its own, after the others: its long per-row loop, taken round-robin with the
        # parallel kernels, left numba's worker threads contending with the next calls
        clifford, _ = c.clifford_call(d)
        alone = round_robin({"clifford": clifford}, repeats, min_sample_seconds=SAMPLE_SECONDS)
        best["clifford"] = alone["clifford"].best
        clifford_rows = min(rows, CLIFFORD_MAX_ROWS)
    out = {f"{k}_ms": v * 1e3 for k, v in best.items()}
    out["galinear_bare_variant"] = variant
    if error is not None:
        out["galinear_error"] = error
        out["galinear_ms"] = None
    if clifford_rows is not None:
        out["clifford_rows_timed"] = clifford_rows
        out["clifford_ms"] *= rows / clifford_rows  # scaled to the batch (a per-row loop)
    out["kingdon_over_galinear"] = None if error else best["kingdon"] / best["galinear"]
    out["bare_kingdon_over_galinear"] = best["kingdon_bare"] / best["galinear_bare"]
    out["unchecked_kingdon_over_galinear"] = best["kingdon_bare"] / best["galinear_unchecked"]
    if "clifford_ms" in out and not error:
        out["clifford_over_galinear"] = out["clifford_ms"] / out["galinear_ms"]
    return out


# ---------------------------------------------------------------------------- compile times
def _child_compile(mode: str, names: list) -> dict:
    """In a fresh process: seconds to a ready kernel per expression (galinear and kingdon)."""
    import numba
    import kingdon

    import galinear
    import galinear.compiler  # noqa: F401  (imported before the clock, as kingdon is)
    from galinear.compiler.kernel import PARALLEL_ROWS

    @numba.njit(cache=False)
    def _start(x):
        return x + 1.0

    _start(1.0)  # numba's one-time start (LLVM) is paid here, not by whichever library goes first
    out = {}
    for case in CASES:
        name, _, signature, _, inputs = case
        if name not in names:
            continue
        alg = galinear.Algebra(*signature)
        t0 = time.perf_counter()
        kernel = galinear.compile(galinear_function(case), alg, inputs, target="numba", name=name,
                                  cache=(mode == "cached"))
        traced = time.perf_counter() - t0
        small = [np.ones((1, len(v))) for v in kernel.input_blades.values()]
        large = [np.ones((PARALLEL_ROWS, len(v))) for v in kernel.input_blades.values()]
        kernel(*small)
        serial = time.perf_counter() - t0
        try:
            kernel(*large, parallel=True)
            ready = time.perf_counter() - t0
        except Exception:  # noqa: BLE001 - the parallel variant failed to compile: reported as None
            ready = None
        if mode == "cold":  # fill the source cache for the cached process (untimed)
            galinear.compile(galinear_function(case), alg, inputs, target="numba", name=name, cache=True)
        t0 = time.perf_counter()
        kalg = kingdon.Algebra(*signature, wrapper=numba.njit)
        kfunc = kingdon_function(case, kalg)
        kop = kalg.add_operator(kfunc, symbolic=True, name=name)
        mvs = []
        for arg, blade_names in kernel.input_blades.items():
            contenders_map = _maps(alg.metric, tuple(int(s) for s in np.asarray(kalg.signature)))[0]
            keys = tuple(contenders_map(_mask(b))[0] for b in blade_names)
            mvs.append(kalg.multivector(values=np.ones((len(keys), 1)), keys=keys))
        kop(*mvs)
        kready = time.perf_counter() - t0
        out[name] = {"galinear_generate_s": traced, "galinear_serial_ready_s": serial, "galinear_ready_s": ready,
                     "kingdon_ready_s": kready}
    return out


def compile_times(names: list) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-compile-numba-") as folder:
        os.chmod(folder, 0o700)
        env = {**os.environ, "NUMBA_CACHE_DIR": folder}
        result = {}
        for mode in ("cold", "cached"):
            proc = subprocess.run([sys.executable, __file__, "--child-compile", mode, "--only", *names],
                                  env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"the {mode} compile process failed:\n{proc.stderr[-3000:]}")
            result[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------------- report
def _r(x) -> str:
    """A ratio in bold, or "fails" when galinear's call raised."""
    return ratio(x, bold=True, missing="fails")


def _ms(cell) -> str:
    if cell.get("galinear_error"):
        return f"fails ({cell['galinear_error'].split(':')[0]}); bare {cell['galinear_bare_variant'].split(' ')[0]}: " \
               f"{number(cell['galinear_bare_ms'])}"
    return number(cell["galinear_ms"])


def _ready(times: dict) -> str:
    if not times:
        return "-"
    if times.get("galinear_ready_s") is None:
        return f"{number(times['galinear_serial_ready_s'], 2)} (serial only: parallel fails)"
    return number(times["galinear_ready_s"], 2)


def markdown(result: dict) -> str:
    meta = result["meta"]
    lines = [
        "## Compiled expressions against kingdon and clifford",
        "",
        header(meta) + " Tables: benchmarks/results/bench_compile.{md,json}.",
        "",
        "galinear: `galinear.compile(func, algebra, inputs, target=\"numba\")` on arrays (N, k); kingdon: "
        "`kingdon.Algebra(p, q, r, wrapper=numba.njit).add_operator(func, symbolic=True)` on its multivectors "
        "(one array of N values per blade, (k, N)); clifford: the expression on `layout.MultiVector` inside "
        f"`numba.njit`, row by row over dense rows (N, 2**n), the per-object path clifford has: timed on at "
        f"most {CLIFFORD_MAX_ROWS:,} rows and scaled to N. Each library gets its own layout; the "
        "conversion is done before timing and is not timed. Times: milliseconds per call, the best of "
        f"{meta['repeats']} round-robin samples after a warm-up, float64. Ratios above 1: galinear is faster. "
        "\"out=\": galinear's public call writing into a preallocated array (`kernel(*args, out=buffer)`, "
        "numpy's convention), against kingdon's jitted function alone on its value arrays (its bare "
        "generated code, which allocates what it returns). \"unchecked\": `kernel.unchecked(*args, buffer)`, "
        "galinear's numba kernel without the call's checks (callable from numba code), against the same "
        "bare kingdon function.",
        "",
    ]
    if meta.get("provisional"):
        lines += [f"**Provisional**: {meta['provisional']}", ""]

    def clifford_ms(n, cell):
        cl = cell.get("clifford_ms")
        if cl is None or cell.get("clifford_rows_timed") == int(n):
            return number(cl)
        return f"{number(cl)} (from {cell['clifford_rows_timed']:,} rows)"

    lines.append(markdown_table(
        ["expression", "N", "galinear ms", "kingdon ms", "kingdon / galinear", "out=: kingdon bare / galinear",
         "unchecked: kingdon bare / galinear", "galinear parallel=True ms", "clifford ms", "clifford / galinear"],
        ([row["name"], f"{int(n):,}", _ms(cell), number(cell["kingdon_ms"]), _r(cell["kingdon_over_galinear"]),
          ratio(cell["bare_kingdon_over_galinear"]), ratio(cell.get("unchecked_kingdon_over_galinear")),
          number(cell.get("galinear_parallel_ms")), clifford_ms(n, cell),
          number(cell.get("clifford_over_galinear"), 1)]
         for row in result["rows"] for n, cell in row["times"].items())))
    big = str(max(int(n) for n in result["rows"][0]["times"]))
    lines += ["", f"{int(big):,} rows with numba limited to 1 thread, and beside one busy process (a pure-Python "
              "loop started by the benchmark and killed after; default threads):", ""]
    lines.append(markdown_table(
        ["expression", "1 thread: galinear ms", "1 thread: kingdon ms", "1 thread: kingdon / galinear",
         "busy: galinear ms", "busy: kingdon ms", "busy: kingdon / galinear"],
        ([row["name"], _ms(row["one_thread"]), number(row["one_thread"]["kingdon_ms"]),
          _r(row["one_thread"]["kingdon_over_galinear"]), _ms(row["busy"]), number(row["busy"]["kingdon_ms"]),
          _r(row["busy"]["kingdon_over_galinear"])] for row in result["rows"] if row.get("one_thread") is not None)))
    lines += ["", "Multiplications of the generated programs (`*` operators in the generated function body, one "
              "rule for both, `ast.Mult`; galinear's own count `kernel.operations[\"multiplications\"]` beside it), "
              "the agreement of the outputs (max |difference| / max(1, |row|) on 64 rows) and compile times "
              "(cold: fresh process, empty numba cache, until the kernel ran: on 1 row, the default call, which "
              "compiles the serial variant, and then also on 16,384 rows with parallel=True, both variants; "
              "cached: a second process on the same cache; kingdon keeps no disk cache):", ""]

    def program_row(row):
        p, ch, ct = row["program"], row["check"], row.get("compile")
        cold = ct["cold"] if ct else {}
        cached = ct["cached"] if ct else {}
        clifford = "-" if "clifford_max_diff" not in ch else format(ch["clifford_max_diff"], ".1e")
        if ch.get("clifford_path", "").startswith("per-object Python"):
            clifford += " (Python loop)"
        return [row["name"], p["galinear_ast_mult"], p["kingdon_ast_mult"],
                ratio(p["kingdon_ast_mult"] / p["galinear_ast_mult"], bold=True), p["galinear_multiplications"],
                p["galinear_strategy"], format(ch["kingdon_max_diff"], ".1e"), clifford,
                number(cold.get("galinear_serial_ready_s"), 2), _ready(cold), _ready(cached),
                number(cold.get("kingdon_ready_s"), 2), number(cached.get("kingdon_ready_s"), 2)]

    lines.append(markdown_table(
        ["expression", "galinear `*`", "kingdon `*`", "kingdon / galinear", "galinear operations", "strategy",
         "kingdon diff", "clifford diff", "galinear cold s: default call", "galinear cold s: both variants",
         "galinear cached s", "kingdon cold s",
         "kingdon 2nd process s"], (program_row(row) for row in result["rows"])))
    lines += ["", "Expressions: " + "; ".join(f"`{c[0]}`: {c[1]}" for c in CASES
                                               if any(r["name"] == c[0] for r in result["rows"])) + "."]
    losses = result.get("losses") or []
    if losses:
        hit = len({x.split(":")[0].split(",")[0] for x in losses})
        lines += ["", f"Where galinear fails, is slower or uses more multiplications ({hit} of "
                  f"{len(result['rows'])} expressions):", *[f"- {x}" for x in losses]]
    return "\n".join(lines) + "\n"


COMPARISONS = (("kingdon_over_galinear", "galinear_ms", "kingdon_ms", "the public call against kingdon's"),
               ("bare_kingdon_over_galinear", "galinear_bare_ms", "kingdon_bare_ms",
                "the public call with out= against kingdon's bare function"),
               ("unchecked_kingdon_over_galinear", "galinear_unchecked_ms", "kingdon_bare_ms",
                "kernel.unchecked against kingdon's bare function"))


def losses(result: dict) -> list:
    """Every row, batch and comparison where galinear fails, is slower or multiplies more."""
    out = []
    for row in result["rows"]:
        p = row["program"]
        for n, cell in row["times"].items():
            if cell.get("galinear_error"):
                out.append(f"{row['name']}: galinear's call fails at {int(n):,} rows ({cell['galinear_error']})")
            for key, ours, theirs, what in COMPARISONS:
                value = cell.get(key)
                if value is not None and value < 1:
                    out.append(f"{row['name']}, {int(n):,} rows: {what} is slower ({cell[ours]:.4f} ms against "
                               f"{cell[theirs]:.4f} ms, ratio {value:.2f})")
        if p["galinear_ast_mult"] > p["kingdon_ast_mult"]:
            out.append(f"{row['name']}: {p['galinear_ast_mult']} multiplications against kingdon's "
                       f"{p['kingdon_ast_mult']} (galinear {p['galinear_strategy']} program, "
                       f"{p['galinear_source_lines']} source lines; kingdon {p['kingdon_source_lines']} lines)")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=None, help=f"rows (default {BATCHES})")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", nargs="+", default=None, help="expression names (default: all)")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: batches {QUICK_BATCHES}, 2 repeats")
    parser.add_argument("--no-clifford", action="store_true")
    parser.add_argument("--no-compile-times", action="store_true")
    parser.add_argument("--out", default=str(OUT), help="path stem of the .md and .json (default %(default)s)")
    parser.add_argument("--markdown", action="store_true", help="print the docs section from the saved .json")
    parser.add_argument("--provisional", default=None, help="a note printed above the table")
    parser.add_argument("--child-compile", choices=["cold", "cached"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = args.only or [c[0] for c in CASES]
    unknown = sorted(set(names) - {c[0] for c in CASES})
    if unknown:
        parser.error(f"unknown expressions {unknown}; choose from {[c[0] for c in CASES]}")
    if args.child_compile:
        print(json.dumps(_child_compile(args.child_compile, names)))
        return 0
    out = Path(args.out)
    if args.markdown:
        print(markdown(json.loads(out.with_suffix(".json").read_text())))
        return 0
    batches = args.batches or (QUICK_BATCHES if args.quick else BATCHES)
    repeats = 2 if args.quick else args.repeats

    import clifford
    import kingdon
    import numba

    meta = metadata(command_line(__file__, argv, make_target="bench-compile"),
                    packages=("numpy", "numba", "kingdon", "clifford"), repeats=repeats, batches=list(batches),
                    clifford_max_rows=CLIFFORD_MAX_ROWS, provisional=args.provisional)
    print(f"# compiled expressions: galinear vs kingdon {kingdon.__version__} (numba wrapper) and clifford "
          f"{clifford.__version__}; {meta['machine']['logical_cpus']} cores, numba {numba.get_num_threads()} threads; "
          f"ms per call, best of {repeats}", flush=True)
    rows = []
    big = max(batches)
    for case in CASES:
        if case[0] not in names:
            continue
        c = Contenders(case, use_clifford=not args.no_clifford)
        row = {"name": case[0], "label": case[1], "signature": case[2], "inputs": case[4],
               "check": c.check(), "program": program_facts(c), "times": {}}
        p = row["program"]
        print(f"{case[0]}: multiplications galinear {p['galinear_ast_mult']} ({p['galinear_strategy']}, "
              f"operations {p['galinear_multiplications']}) kingdon {p['kingdon_ast_mult']}; "
              f"max diff kingdon {row['check']['kingdon_max_diff']:.1e}"
              + (f" clifford {row['check']['clifford_max_diff']:.1e}" if "clifford_max_diff" in row["check"] else ""),
              flush=True)
        for rows_n in batches:
            cell = time_case(c, rows_n, repeats)
            row["times"][str(rows_n)] = cell
            print(f"  N={rows_n:>9,}  galinear {_ms(cell)} ms  kingdon {cell['kingdon_ms']:9.4f} ms  "
                  f"kingdon/galinear {_r(cell['kingdon_over_galinear'])}  bare {cell['bare_kingdon_over_galinear']:5.2f}"
                  f"  unchecked {cell['unchecked_kingdon_over_galinear']:5.2f}"
                  + (f"  clifford/galinear {cell['clifford_over_galinear']:7.1f}" if "clifford_over_galinear" in cell else ""),
                  flush=True)
        row["one_thread"] = time_case(c, big, repeats, threads=1)
        with BusyProcess():
            row["busy"] = time_case(c, big, repeats, threads=numba.get_num_threads())
        print(f"  N={big:>9,}  1 thread: kingdon/galinear {_r(row['one_thread']['kingdon_over_galinear'])} "
              f"(bare {row['one_thread']['bare_kingdon_over_galinear']:.2f}); beside a busy process: "
              f"{_r(row['busy']['kingdon_over_galinear'])} (bare {row['busy']['bare_kingdon_over_galinear']:.2f})",
              flush=True)
        rows.append(row)
    if not args.no_compile_times:
        times = compile_times([r["name"] for r in rows])
        for row in rows:
            row["compile"] = {mode: times[mode][row["name"]] for mode in times}
    result = {"meta": meta, "rows": rows}
    result["losses"] = losses(result)
    text = markdown(result)
    write_results(out, result, text)
    print()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
