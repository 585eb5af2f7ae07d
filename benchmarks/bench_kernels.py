"""Rotor-chain kernels against dense layers, side by side in one run (``make bench-kernels``).

Measures (float32, torch threads = numba threads = --threads):
  1. forward of one single-chunk double-rotor map (d -> d) vs ``torch.nn.functional.linear``
     with a dense (d, d) weight, 2048 tokens, d = 512 ... 4096; also the pure-torch "factored"
     backend of galinear.nn.functional and a whole ``RotorLinear(d, d)`` forward;
  2. forward + backward (gradients for x and for the weight / the bivectors; the rotor map with
     the exact gradient of galinear.nn.dexp, which runs the backend's forward map on x and,
     transposed, on the output gradient);
  3. one training step (Adam, MSE, batch 256) of the paper's q-network
     ``RotorNetwork(2048, 2048)`` (hidden 2048) with the numba backend vs the dense backend,
     which rebuilds every 2048 x 2048 matrix at every step as the paper's code does;
  4. peak memory of forward + backward above the memory held before it, in a fresh process
     (peak resident set size, /proc/self/status VmHWM after /proc/self/clear_refs; glibc's
     mmap threshold fixed so freed blocks go back to the system), in units of one activation.

Timings: median of --repeats runs, ours and dense interleaved in every repeat, after a warm-up.
Writes benchmarks/results/bench_kernels.{md,json} and docs/bench_kernels_time_vs_d.png.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, ROOT, command_line, header, markdown_table, metadata, ratio,  # noqa: E402
                     round_robin, set_threads, statistic, write_results)

PLOT = ROOT / "docs" / "bench_kernels_time_vs_d.png"


def random_factors(P, n, dtype, requires_grad=False, seed=0):
    import torch

    gen = torch.Generator().manual_seed(seed)
    k = n // 2
    out = []
    for _ in range(4):
        t = (torch.randn(P, k, n, generator=gen) / n**0.5).to(dtype)
        out.append(t.requires_grad_(requires_grad))
    return out


def bench_forward(sizes, tokens, repeats, factored_max_d=512):
    import torch

    from galinear.nn import RotorLinear
    from galinear.nn import functional as F

    rows = []
    for d in sizes:
        n = d.bit_length() - 1
        x = torch.randn(tokens, d)
        weight = torch.randn(d, d) / d**0.5
        VL, WL, VR, WR = random_factors(1, n, torch.float32)
        x3 = x.view(tokens, 1, d)
        layer = RotorLinear(d, d, backend="numba").eval()

        def dense():
            torch.nn.functional.linear(x, weight)

        def numba():
            F.rotor_sandwich(x3, (VL, WL), (VR, WR), backend="numba")

        def factored():
            F.rotor_sandwich(x3, (VL, WL), (VR, WR), backend="factored")

        def rotor_linear():
            layer(x)

        with torch.no_grad():
            fns = {"dense": dense, "numba": numba, "rotor_linear_numba": rotor_linear}
            if d <= factored_max_d:  # the pure-torch path takes seconds beyond this
                fns["factored"] = factored
            t = statistic(round_robin(fns, repeats))
        row = {"d": d, "n": n, **{f"{k}_s": v for k, v in t.items()}}
        row["speedup_numba"] = t["dense"] / t["numba"]
        row["speedup_rotor_linear"] = t["dense"] / t["rotor_linear_numba"]
        if "factored" in t:
            row["speedup_factored"] = t["dense"] / t["factored"]
        rows.append(row)
        print(f"forward d={d}: dense {t['dense']*1e3:.1f} ms, numba {t['numba']*1e3:.1f} ms "
              f"({row['speedup_numba']:.2f}x), RotorLinear {t['rotor_linear_numba']*1e3:.1f} ms "
              f"({row['speedup_rotor_linear']:.2f}x)"
              + (f", factored {t['factored']*1e3:.1f} ms" if "factored" in t else ""), flush=True)
    return rows


def exact_rotor_map(n, backend, seed=0):
    """(map, bivectors): x (B, 1, 2**n) -> exp(B) x exp(C)~ on ``backend`` with the exact gradient
    in x, B and C (random bivectors B, C (1, C(n, 2)) requiring gradients, exact factors precomputed)."""
    import torch

    from galinear.nn import functional as F
    from galinear.nn.dexp import exact_rotor_sandwich

    gen = torch.Generator().manual_seed(seed)
    B, C = ((0.3 * torch.randn(1, n * (n - 1) // 2, generator=gen)).requires_grad_(True) for _ in range(2))
    with torch.no_grad():
        left, right = (F.invariant_decomposition(b, method="exact") for b in (B, C))

    def apply(x):
        return exact_rotor_sandwich(x, B, C, (left.V, left.W), (right.V, right.W), backend=backend)

    return apply, (B, C)


def bench_forward_backward(sizes, tokens, repeats):
    import torch

    rows = []
    for d in sizes:
        n = d.bit_length() - 1
        x = torch.randn(tokens, d, requires_grad=True)
        weight = (torch.randn(d, d) / d**0.5).requires_grad_(True)
        grad = torch.randn(tokens, d)
        rotor_map, bivectors = exact_rotor_map(n, "numba")
        x3 = x.detach().view(tokens, 1, d).requires_grad_(True)
        grad3 = grad.view(tokens, 1, d)

        def dense():
            torch.autograd.grad(torch.nn.functional.linear(x, weight), (x, weight), grad)

        def numba():
            torch.autograd.grad(rotor_map(x3), (x3, *bivectors), grad3)

        t = statistic(round_robin({"dense": dense, "numba": numba}, repeats))
        row = {"d": d, "n": n, "dense_s": t["dense"], "numba_s": t["numba"],
               "speedup_numba": t["dense"] / t["numba"]}
        rows.append(row)
        print(f"forward+backward d={d}: dense {t['dense']*1e3:.1f} ms, numba {t['numba']*1e3:.1f} ms "
              f"({row['speedup_numba']:.2f}x)", flush=True)
    return rows


def bench_training_step(batch, repeats):
    import torch

    from galinear.nn import RotorNetwork

    torch.manual_seed(0)
    x = torch.randn(batch, 2048)
    target = torch.randn(batch, 2048)
    nets = {}
    for backend in ("numba", "dense"):
        torch.manual_seed(1)
        net = RotorNetwork(2048, 2048, hidden=2048, backend=backend)
        nets[backend] = (net, torch.optim.Adam(net.parameters(), lr=0.05))

    def step(backend):
        net, opt = nets[backend]
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(net(x), target)
        loss.backward()
        opt.step()

    t = statistic(round_robin({"dense": lambda: step("dense"), "numba": lambda: step("numba")}, repeats))
    params = sum(p.numel() for p in nets["numba"][0].parameters())
    row = {"batch": batch, "parameters": params, "dense_s": t["dense"], "numba_s": t["numba"],
           "speedup_numba": t["dense"] / t["numba"]}
    print(f"q-network training step (batch {batch}, {params} parameters): dense {t['dense']*1e3:.0f} ms, "
          f"numba {t['numba']*1e3:.0f} ms ({row['speedup_numba']:.2f}x)", flush=True)
    return row


_MEMORY_CHILD = r"""
import gc, json, sys
import torch
from bench_kernels import exact_rotor_map
backend, d, tokens, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
try:
    import numba
    numba.set_num_threads(threads)
except ImportError:
    pass
n = d.bit_length() - 1

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

rotor_map, bivectors = (None, ()) if backend == "linear" else exact_rotor_map(n, backend)

def run(x, grad, weights):
    if backend == "linear":
        y = torch.nn.functional.linear(x.view(x.shape[0], d), weights[0])
        return torch.autograd.grad(y, [x, *weights], grad.view(x.shape[0], d))
    return torch.autograd.grad(rotor_map(x), [x, *weights], grad)

def make(tokens):
    x = torch.randn(tokens, 1, d, requires_grad=True)
    grad = torch.randn(tokens, 1, d)
    if backend == "linear":
        weights = [(torch.randn(d, d) / d**0.5).requires_grad_(True)]
    else:
        weights = list(bivectors)
    return x, grad, weights

run(*make(32))  # compile / warm up on a small batch
x, grad, weights = make(tokens)
gc.collect()
before = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")
grads = run(x, grad, weights)
peak = status("VmHWM")
print(json.dumps({"before": before, "peak": peak, "extra": peak - before, "activation": x.numel() * 4}))
"""


def bench_memory(d, tokens, threads):
    rows = []
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")]))
    for backend in ("numba", "linear", "factored"):
        proc = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, backend, str(d), str(tokens), str(threads)],
                              capture_output=True, text=True, env=env, cwd=ROOT)
        if proc.returncode != 0:
            print(f"memory run for {backend} failed:\n{proc.stderr[-2000:]}", flush=True)
            continue
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        result["backend"] = backend
        result["extra_over_activation"] = result["extra"] / result["activation"]
        rows.append(result)
        print(f"memory d={d}, {tokens} tokens, {backend}: peak extra {result['extra'] / 2**20:.1f} MiB = "
              f"{result['extra_over_activation']:.2f} activations ({result['activation'] / 2**20:.1f} MiB each)",
              flush=True)
    return rows


def plot(forward_rows, path, tokens):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    d = np.array([r["d"] for r in forward_rows], dtype=float)
    n = np.log2(d)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.loglog(d, [r["dense_s"] * 1e3 for r in forward_rows], "o-", label="dense F.linear")
    ax.loglog(d, [r["numba_s"] * 1e3 for r in forward_rows], "s-", label="rotor map, numba")
    fact = [(r["d"], r["factored_s"] * 1e3) for r in forward_rows if "factored_s" in r]
    if fact:
        ax.loglog(*zip(*fact), "^-", label="rotor map, factored (torch)")
    anchor_dense = forward_rows[0]["dense_s"] * 1e3
    anchor_rotor = forward_rows[0]["numba_s"] * 1e3
    ax.loglog(d, anchor_dense * (d / d[0]) ** 2, "k--", lw=0.8, label=r"slope $4^n = d^2$")
    ax.loglog(d, anchor_rotor * (n**2 * d) / (n[0] ** 2 * d[0]), "k:", lw=0.8, label=r"slope $n^2 2^n$")
    ax.set_xlabel("d = 2^n (features)")
    ax.set_ylabel(f"forward time, {tokens} tokens (ms)")
    ax.set_title("Double-rotor map vs dense layer (float32)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(results) -> str:
    lines = ["# Rotor-chain kernels vs dense layers", "",
             header(results) + f" Float32; {results['tokens']} tokens; median of {results['repeats']} interleaved "
             "repeats.", "", "## Forward (speed-up = dense time / our time)", ""]
    lines.append(markdown_table(
        ["d", "dense F.linear (ms)", "numba map (ms)", "speed-up", "RotorLinear numba (ms)", "speed-up",
         "factored torch (ms)", "speed-up"],
        ([r["d"], r["dense_s"] * 1e3, r["numba_s"] * 1e3, ratio(r["speedup_numba"], suffix="x"),
          r["rotor_linear_numba_s"] * 1e3, ratio(r["speedup_rotor_linear"], suffix="x"),
          r["factored_s"] * 1e3 if "factored_s" in r else None, ratio(r.get("speedup_factored"), suffix="x")]
         for r in results["forward"]),
        formats=[None, ".1f", ".1f", None, ".1f", None, ".1f", None]))
    lines += ["", "## Forward + backward", ""]
    lines.append(markdown_table(
        ["d", "dense (ms)", "numba (ms)", "speed-up"],
        ([r["d"], r["dense_s"] * 1e3, r["numba_s"] * 1e3, ratio(r["speedup_numba"], suffix="x")]
         for r in results["forward_backward"]), formats=[None, ".1f", ".1f", None]))
    if results.get("training_step"):
        r = results["training_step"]
        lines += ["", "## Training step of the q-network RotorNetwork(2048, 2048), hidden 2048", ""]
        lines.append(markdown_table(
            ["batch", "parameters", "dense backend (ms)", "numba backend (ms)", "speed-up"],
            [[r["batch"], r["parameters"], r["dense_s"] * 1e3, r["numba_s"] * 1e3,
              ratio(r["speedup_numba"], suffix="x")]],
            formats=[None, None, ".0f", ".0f", None]))
    if results.get("memory"):
        lines += ["", "## Peak memory of forward + backward (peak RSS above the state before it)", ""]
        lines.append(markdown_table(
            ["backend", "d", "tokens", "peak extra (MiB)", "in activations"],
            ([r["backend"], results["memory_d"], results["tokens"], r["extra"] / 2**20, r["extra_over_activation"]]
             for r in results["memory"]), formats=[None, None, None, ".1f", ".2f"]))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--fb-sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--train-batch", type=int, default=256)
    parser.add_argument("--train-repeats", type=int, default=3)
    parser.add_argument("--skip-train", action="store_true")
    parser.add_argument("--memory-d", type=int, default=2048)
    parser.add_argument("--factored-max-d", type=int, default=512,
                        help="also time the pure-torch factored backend up to this d")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="folder for bench_kernels.{md,json} (and the plot, when not the default)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))
    set_threads(args.threads)
    results = metadata(command_line(__file__, argv, make_target="bench-kernels"), tokens=args.tokens,
                       repeats=args.repeats)
    results["forward"] = bench_forward(args.sizes, args.tokens, args.repeats, args.factored_max_d)
    results["forward_backward"] = bench_forward_backward(args.fb_sizes, args.tokens, args.repeats)
    results["training_step"] = None if args.skip_train else bench_training_step(args.train_batch, args.train_repeats)
    results["memory_d"] = args.memory_d
    results["memory"] = bench_memory(args.memory_d, args.tokens, args.threads)
    text = markdown(results)
    print(text)
    if not args.no_write:
        written = write_results(args.out / "bench_kernels", results, text)
        figure = PLOT if args.out == RESULTS else args.out / PLOT.name
        plot(results["forward"], figure, args.tokens)
        print(f"wrote {written[1]}, {written[0]}, {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
