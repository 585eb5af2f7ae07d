"""Rotor layers through the matrix representation ("spinor") against dense layers, side by side.

``make bench-spinor`` (= ``python benchmarks/bench_spinor.py``). Float32, torch threads = numba
threads = --threads, --tokens tokens, d = 2**n; every contender runs interleaved with the dense
layer for --repeats rounds after a warm-up, and its ratio is the pair's ratio of medians:

1. inference: ``torch.nn.functional.linear`` with a (d, d) weight; the map alone
   (``F.rotor_sandwich``, single-chunk double rotor) with the "spinor" and "numba" backends; a whole
   ``RotorLinear(d, d)`` in eval mode under ``torch.no_grad()`` with each backend (which follows
   the thread policy of :mod:`galinear.nn.functional.plan`: "spinor" runs its calls with one
   thread; ``benchmarks/bench_contention.py`` times it beside a busy process);
2. training: forward + backward of ``F.linear`` (gradients for x and W) against forward + backward of
   ``RotorLinear(d, d)`` in training mode (invariant decomposition, exact gradient of exp, gradients for
   x and both bivectors) with each backend;
3. the roofline: multiply-adds per token of each method (dense d**2; spinor from the representation
   tables; the factor chain 2 * 2k * (2n + 1) * d) against the machine's GEMM rate measured by the
   dense layer at the largest d, and the time each method would take at that rate.

Writes benchmarks/results/bench_spinor.{md,json}, docs/bench_spinor_time_vs_d.png and
docs/bench_spinor_roofline.png (achieved multiply-add rate against bytes moved per multiply-add,
under the machine's measured bandwidth and GEMM rate).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, ROOT, command_line, header, markdown_table, metadata, ratio,  # noqa: E402
                     round_robin, set_threads, statistic, write_results)

PLOT = ROOT / "docs" / "bench_spinor_time_vs_d.png"
ROOFLINE = ROOT / "docs" / "bench_spinor_roofline.png"


def paired_times(calls: dict, repeats: int) -> dict:
    """Each contender interleaved with "dense" alone (a heavy neighbour in the same round, such
    as the numba tile kernel, flushes the caches the next call would find warm); the dense time
    stored under a contender's name is scaled so that dense / contender is that pair's ratio."""
    out = {}
    dense_times = []
    for name, fn in calls.items():
        if name == "dense":
            continue
        pair = statistic(round_robin({"dense": calls["dense"], name: fn}, repeats))
        dense_times.append(pair["dense"])
        out[name] = pair[name]
        out[f"{name}_dense"] = pair["dense"]
    out["dense"] = float(np.median(dense_times))
    for name in list(out):
        if name.endswith("_dense"):
            out[name[:-6]] *= out["dense"] / out.pop(name)   # the pair's ratio, on the common dense time
    return out


def memory_bandwidth(torch, megabytes=512, repeats=5) -> float:
    """Bytes per second of a large copy (read + write), the machine's memory bandwidth."""
    src = torch.ones(megabytes * 2**20 // 4)
    dst = torch.empty_like(src)
    seconds = round_robin({"copy": lambda: dst.copy_(src)}, repeats)["copy"].median
    return 2 * src.numel() * 4 / seconds


def spinor_macs(n: int) -> float:
    """Real multiply-adds per token of the two products (one chunk of 2**n)."""
    from galinear import matrix_rep

    tab = matrix_rep.representation(n)
    W = tab.N // tab.blocks
    per_side = tab.irreps * tab.blocks * tab.blocks * W**3        # every block of X times one block
    return 2 * per_side * (1 if tab.real else 4)


def chain_macs(n: int) -> float:
    k = n // 2
    return 2 * 2 * k * (2 * n + 1) * 2**n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="folder for bench_spinor.{md,json} (and the plots, when not the default)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    import torch

    from galinear.nn import RotorLinear
    from galinear.nn import functional as F

    set_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    for d in args.sizes:
        n = d.bit_length() - 1
        if 2**n != d:
            parser.error(f"--sizes must be powers of two, got {d}")
        T = args.tokens
        x = torch.randn(T, d)
        weight = torch.randn(d, d) / d**0.5
        k = n // 2
        VL, WL, VR, WR = (torch.randn(1, k, n) / n**0.5 for _ in range(4))
        x3 = x.view(T, 1, d)
        layers = {b: RotorLinear(d, d, backend=b) for b in ("spinor", "numba")}
        layers["numba"].load_state_dict(layers["spinor"].state_dict())
        for layer in layers.values():
            layer.eval()
        calls = {
            "dense": lambda: torch.nn.functional.linear(x, weight),
            "map_spinor": lambda: F.rotor_sandwich(x3, (VL, WL), (VR, WR), backend="spinor"),
            "map_numba": lambda: F.rotor_sandwich(x3, (VL, WL), (VR, WR), backend="numba"),
            "layer_spinor": lambda: layers["spinor"](x),
            "layer_numba": lambda: layers["numba"](x),
        }
        with torch.no_grad():
            inference = paired_times(calls, args.repeats)

        xg = x.clone().requires_grad_(True)
        wg = weight.clone().requires_grad_(True)
        g = torch.randn(T, d)
        for layer in layers.values():
            layer.train()

        def dense_train():
            torch.autograd.grad(torch.nn.functional.linear(xg, wg), (xg, wg), g)

        def layer_train(backend):
            layer = layers[backend]
            params = [p for p in layer.parameters() if p.requires_grad]
            torch.autograd.grad(layer(xg), [xg] + params, g)

        training = paired_times({"dense": dense_train, "spinor": lambda: layer_train("spinor"),
                                 "numba": lambda: layer_train("numba")}, max(3, args.repeats - 2))
        row = {"d": d, "n": n, "tokens": T,
               **{f"inference_{k}_s": v for k, v in inference.items()},
               **{f"training_{k}_s": v for k, v in training.items()},
               "macs_dense": float(d * d), "macs_spinor": spinor_macs(n), "macs_chain": float(chain_macs(n))}
        rows.append(row)
        print(f"d={d}: inference dense {inference['dense']*1e3:.1f} ms | map spinor "
              f"{inference['dense']/inference['map_spinor']:.2f}x, numba {inference['dense']/inference['map_numba']:.2f}x"
              f" | RotorLinear spinor {inference['dense']/inference['layer_spinor']:.2f}x, numba "
              f"{inference['dense']/inference['layer_numba']:.2f}x || training dense {training['dense']*1e3:.1f} ms | "
              f"RotorLinear spinor {training['dense']/training['spinor']:.2f}x, numba "
              f"{training['dense']/training['numba']:.2f}x", flush=True)

    peak = rows[-1]["macs_dense"] * rows[-1]["tokens"] / rows[-1]["inference_dense_s"]   # MAC/s of the GEMM
    bandwidth = memory_bandwidth(torch)
    for row in rows:
        d = row["d"]
        # bytes to and from memory per token: x read and y written (4 bytes each) for both; the
        # dense layer's weight is read once per call (4 d^2 bytes over the tokens), the spinor
        # blocks' matrices stay in the caches (1 MiB)
        row["bytes_dense"] = 8.0 * d + 4.0 * d * d / row["tokens"]
        row["bytes_spinor"] = 8.0 * d
    for row in rows:
        for kind in ("dense", "spinor", "chain"):
            row[f"limit_{kind}_s"] = row[f"macs_{kind}"] * row["tokens"] / peak
    result = metadata(command_line(__file__, argv, make_target="bench-spinor"), threads=args.threads,
                      tokens=args.tokens, gemm_macs_per_s=peak, bandwidth_bytes_per_s=bandwidth, rows=rows)
    if args.no_write:
        return 0
    written = write_results(args.out / "bench_spinor", result, markdown(result))
    figures = (PLOT, ROOFLINE) if args.out == RESULTS else (args.out / PLOT.name, args.out / ROOFLINE.name)
    plot(result, figures[0])
    plot_roofline(result, figures[1])
    print(f"wrote {written[1]}, {written[0]}, {figures[0]}, {figures[1]}")
    return 0


def markdown(result) -> str:
    rows = result["rows"]

    def x(value):
        return ratio(value, suffix="x")

    lines = [header(result) + f" Float32, {result['threads']} threads, {result['tokens']} tokens; ratios = "
             "F.linear time / ours (above 1: faster than dense).", ""]
    lines.append(markdown_table(
        ["d", "F.linear (ms)", "map spinor", "map numba", "RotorLinear spinor", "RotorLinear numba",
         "train F.linear (ms)", "train spinor", "train numba"],
        ([r["d"], f"{r['inference_dense_s'] * 1e3:.1f}",
          *(x(r["inference_dense_s"] / r[f"inference_{k}_s"]) for k in ("map_spinor", "map_numba", "layer_spinor",
                                                                         "layer_numba")),
          f"{r['training_dense_s'] * 1e3:.1f}",
          *(x(r["training_dense_s"] / r[f"training_{k}_s"]) for k in ("spinor", "numba"))]
         for r in rows)))
    lines += ["", f"Roofline: the dense GEMM at d = {rows[-1]['d']} runs at {result['gemm_macs_per_s']/1e9:.1f} GMAC/s; "
              "multiply-adds per token and the time at that rate:", ""]
    lines.append(markdown_table(
        ["d", "dense MACs", "spinor MACs", "chain MACs", "dense at peak (ms)", "spinor at peak (ms)",
         "spinor measured (ms)", "spinor share of peak"],
        ([r["d"], r["macs_dense"], r["macs_spinor"], r["macs_chain"], r["limit_dense_s"] * 1e3,
          r["limit_spinor_s"] * 1e3, r["inference_map_spinor_s"] * 1e3,
          r["limit_spinor_s"] / r["inference_map_spinor_s"]]
         for r in rows), formats=[None, ".0f", ".0f", ".0f", ".2f", ".2f", ".2f", ".0%"]))
    bw = result["bandwidth_bytes_per_s"]
    lines += ["", f"Memory: a 512 MiB copy moves {bw/1e9:.1f} GB/s. Bytes to and from memory per token "
              "(x and y; the dense weight once per call, the spinor blocks' matrices stay in the caches), "
              "arithmetic intensity and the time those bytes take at that bandwidth:", ""]
    lines.append(markdown_table(
        ["d", "dense bytes", "dense MAC/byte", "spinor bytes", "spinor MAC/byte", "spinor bytes at bandwidth (ms)",
         "spinor achieved GMAC/s"],
        ([r["d"], r["bytes_dense"], r["macs_dense"] / r["bytes_dense"], r["bytes_spinor"],
          r["macs_spinor"] / r["bytes_spinor"], r["bytes_spinor"] * r["tokens"] / bw * 1e3,
          r["macs_spinor"] * r["tokens"] / r["inference_map_spinor_s"] / 1e9]
         for r in rows), formats=[None, ".0f", ".0f", ".0f", ".1f", ".2f", ".1f"]))
    return "\n".join(lines) + "\n"


def plot_roofline(result, path=ROOFLINE):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    peak = result["gemm_macs_per_s"] / 1e9
    bw = result["bandwidth_bytes_per_s"] / 1e9
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    x = np.logspace(-1, 3, 200)
    ax.loglog(x, np.minimum(peak, bw * x), "k-", label=f"roof: {bw:.1f} GB/s, {peak:.0f} GMAC/s")
    for kind, marker in (("dense", "o"), ("spinor", "s")):
        key = "inference_dense_s" if kind == "dense" else "inference_map_spinor_s"
        xs = [r[f"macs_{kind}"] / r[f"bytes_{kind}"] for r in rows]
        ys = [r[f"macs_{kind}"] * r["tokens"] / r[key] / 1e9 for r in rows]
        ax.loglog(xs, ys, marker, label="F.linear" if kind == "dense" else "rotor map, spinor")
        for r, xv, yv in zip(rows, xs, ys):
            ax.annotate(str(r["d"]), (xv, yv), textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xlabel("multiply-adds per byte to and from memory")
    ax.set_ylabel("achieved GMAC/s (its own multiply-adds)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"roofline, float32, {result['threads']} threads")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot(result, path=PLOT):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    d = np.array([r["d"] for r in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.loglog(d, [r["inference_dense_s"] * 1e3 for r in rows], "o-", label="F.linear")
    ax.loglog(d, [r["inference_map_spinor_s"] * 1e3 for r in rows], "s-", label="rotor map, spinor")
    ax.loglog(d, [r["inference_map_numba_s"] * 1e3 for r in rows], "^-", label="rotor map, numba")
    ax.loglog(d, [r["limit_dense_s"] * 1e3 for r in rows], "k:", label="dense MACs at GEMM rate")
    ax.loglog(d, [r["limit_spinor_s"] * 1e3 for r in rows], "k--", label="spinor MACs at GEMM rate")
    ax.set_xlabel("d")
    ax.set_ylabel(f"forward time for {result['tokens']} tokens (ms)")
    ax.set_xticks(d)
    ax.set_xticklabels([str(int(v)) for v in d])
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"float32, {result['threads']} threads")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
