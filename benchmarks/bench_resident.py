"""Tile kernel vs token-resident kernel vs torch, side by side in one run (``make bench-resident``).

Prints time ratios ``F.linear time / our time`` (above 1: ours is faster), float32:
  1. forward (eval, no grad) of one single-chunk double-rotor map d -> d on ``--tokens`` tokens,
     d = 512 ... 4096, with the "numba" backend's kernels "tile" (galinear.kernels.rotor_chain),
     "resident" (galinear.kernels.resident) and "auto" (the cross-over rule), against
     ``torch.nn.functional.linear`` with a dense (d, d) weight;
  2. the backend work of a training step at ``--fb-d``: the map on x and the transposed map on the
     output gradient (all the exact gradient of galinear.nn.dexp asks of a backend), against
     forward + backward of ``F.linear`` (gradients for x and the weight);
  3. one-token latency with 1 thread of ``RotorLinear(d, d)`` (eval, no grad), d = 576 and 2048,
     each kernel, against ``F.linear``; the kernel's own time on the layer's factors and the rest
     of the call (per-call overhead: decomposition, checks, reshapes) are shown apart;
  4. the cross-over: time of the map plus the transposed map of both kernels against the number
     of tokens.

Timings: medians of --repeats interleaved runs after a warm-up (``_common.round_robin``). Writes
nothing unless --json PATH is given.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, command_line, metadata, ratio, round_robin, set_threads, statistic, write_json  # noqa: E402

KERNELS = ("tile", "resident", "auto")


def factors(P, n, requires_grad=False, seed=0):
    import torch

    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(P, n // 2, n, generator=gen) / n**0.5).requires_grad_(requires_grad) for _ in range(4)]


def map_and_transposed(x3, grad3, fs, kernel):
    """The backend work of one exact-gradient step: the map on x, the transposed map on the gradient."""
    from galinear.nn.dexp import transposed_factors
    from galinear.nn.numba_backend import numba_sandwich

    VL, WL, VR, WR = fs
    numba_sandwich(x3, VL, WL, VR, WR, kernel=kernel)
    numba_sandwich(grad3, *transposed_factors(VL, WL), *transposed_factors(VR, WR), kernel=kernel)


def show(label, t):
    dense = t["linear"]
    parts = [f"F.linear {dense*1e3:.3f} ms"]
    parts += [f"{k} {v*1e3:.3f} ms ({ratio(dense / v, suffix='x')})" for k, v in t.items() if k != "linear"]
    print(f"{label}: " + ", ".join(parts), flush=True)


def bench_forward(sizes, tokens, repeats):
    import torch

    from galinear.nn.numba_backend import numba_sandwich

    rows = []
    for d in sizes:
        n = d.bit_length() - 1
        x = torch.randn(tokens, d)
        weight = torch.randn(d, d) / d**0.5
        fs = factors(1, n)
        x3 = x.view(tokens, 1, d)
        fns = {"linear": lambda: torch.nn.functional.linear(x, weight)}
        for k in KERNELS:
            fns[k] = functools.partial(numba_sandwich, x3, *fs, kernel=k)
        with torch.no_grad():
            t = statistic(round_robin(fns, repeats))
        show(f"forward d={d}, {tokens} tokens", t)
        rows.append({"d": d, **t})
    return rows


def bench_forward_backward(d, tokens, repeats):
    import torch

    n = d.bit_length() - 1
    x = torch.randn(tokens, d, requires_grad=True)
    weight = (torch.randn(d, d) / d**0.5).requires_grad_(True)
    grad = torch.randn(tokens, d)
    fs = factors(1, n)
    x3, grad3 = x.detach().view(tokens, 1, d), grad.view(tokens, 1, d)

    fns = {"linear": lambda: torch.autograd.grad(torch.nn.functional.linear(x, weight), (x, weight), grad)}
    fns.update({k: functools.partial(map_and_transposed, x3, grad3, fs, k) for k in KERNELS})
    t = statistic(round_robin(fns, repeats))
    show(f"map + transposed map d={d}, {tokens} tokens (F.linear: forward + backward)", t)
    return {"d": d, **t}


def bench_one_token(sizes, repeats):
    import torch

    from galinear.nn import RotorLinear
    from galinear.nn.numba_backend import numba_sandwich
    from galinear.nn.functional import backends

    set_threads(1)
    for k in ("tile", "resident"):
        backends.register_sandwich_backend(f"numba-{k}", functools.partial(numba_sandwich, kernel=k), priority=-1)
    rows = []
    for d in sizes:
        torch.manual_seed(0)
        layer = RotorLinear(d, d).eval()
        x = torch.randn(1, d)
        weight = torch.randn(d, d) / d**0.5
        P, n = layer.pairs, layer.chunk_size.bit_length() - 1
        x3 = torch.randn(1, P, 1 << n)
        fs = factors(P, n)

        def whole(kernel):
            layer.backend = f"numba-{kernel}"
            layer(x)

        fns = {"linear": lambda: torch.nn.functional.linear(x, weight)}
        fns.update({f"RotorLinear {k}": functools.partial(whole, k) for k in ("tile", "resident")})
        fns.update({f"kernel {k}": functools.partial(numba_sandwich, x3, *fs, kernel=k) for k in ("tile", "resident")})
        with torch.no_grad():
            t = statistic(round_robin(fns, repeats))
        show(f"one token, 1 thread, RotorLinear({d}, {d}) ({P} chunk pairs of 2**{n})", t)
        rows.append({"d": d, **t})
    return rows


def bench_cross_over(d, token_counts, repeats):
    import torch

    n = d.bit_length() - 1
    fs = factors(1, n)
    rows = []
    for tokens in token_counts:
        x3 = torch.randn(tokens, 1, d)
        grad = torch.randn(tokens, 1, d)
        t = statistic(round_robin({k: functools.partial(map_and_transposed, x3, grad, fs, k)
                                   for k in ("tile", "resident")}, repeats))
        print(f"cross-over d={d}, {tokens} tokens, map + transposed map: tile {t['tile']*1e3:.2f} ms, "
              f"resident {t['resident']*1e3:.2f} ms (tile / resident {t['tile'] / t['resident']:.2f})", flush=True)
        rows.append({"tokens": tokens, **t})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--fb-d", type=int, default=2048)
    parser.add_argument("--one-token", type=int, nargs="+", default=[576, 2048])
    parser.add_argument("--cross-over-d", type=int, nargs="+", default=[64, 512, 2048])
    parser.add_argument("--cross-over-tokens", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--json", type=Path, default=None, help="also write the timings here")
    args = parser.parse_args(argv)

    os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".cache" / "numba"))
    set_threads(args.threads)
    meta = metadata(command_line(__file__, argv, make_target="bench-resident"), repeats=args.repeats)
    print(f"float32; threads: torch {args.threads}, numba {args.threads} (one-token rows: 1); "
          f"median of {args.repeats} interleaved repeats; ratio = F.linear time / ours", flush=True)
    results = {"forward": bench_forward(args.sizes, args.tokens, args.repeats),
               "forward_backward": bench_forward_backward(args.fb_d, args.tokens, args.repeats)}
    results["cross_over"] = {d: bench_cross_over(d, args.cross_over_tokens, args.repeats) for d in args.cross_over_d}
    results["one_token"] = bench_one_token(args.one_token, max(args.repeats, 20))
    if args.json is not None:
        write_json(args.json, {"meta": meta, **results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
