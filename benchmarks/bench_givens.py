"""Givens control vs rotor layers vs a dense layer: one forward + backward, side by side in one run.

Contenders per shape (in=out, chunk c, ``--tokens`` rows, float32, one thread by default):
``nn.Linear``; ``RotorLinear``; ``GivensLinear`` on the path its cost model picks, and forced to
apply its layers to the rows and to build the c x c matrices; then a ``GivensNetwork`` step against
a ``RotorNetwork`` step of the same shape. Ratios are to ``nn.Linear`` (to ``RotorNetwork`` for the
networks).

    python benchmarks/bench_givens.py [--tokens 2048] [--threads 1] [--repeats 5]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from _common import header, markdown_table, metadata, command_line, round_robin, set_threads  # noqa: E402
from galinear.nn import GivensLinear, GivensNetwork, RotorLinear, RotorNetwork  # noqa: E402

SHAPES = ((576, 64), (256, 256))


def step(module, x):
    def call():
        module.zero_grad(set_to_none=True)
        module(x).square().mean().backward()
    return call


def forced(module, rows: bool):
    module.uses_rows = lambda tokens: rows
    return module


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--network-hidden", type=int, default=None)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    torch.manual_seed(0)
    print(header(metadata(command_line("benchmarks/bench_givens.py", argv))))
    rows = []
    for width, chunk in SHAPES:
        x = torch.randn(args.tokens, width)
        contenders = {
            "nn.Linear": step(torch.nn.Linear(width, width, bias=False), x),
            "RotorLinear": step(RotorLinear(width, width, chunk_size=chunk), x),
            "GivensLinear (chosen path)": step(GivensLinear(width, width, chunk_size=chunk), x),
            "GivensLinear (rows)": step(forced(GivensLinear(width, width, chunk_size=chunk), True), x),
            "GivensLinear (matrices)": step(forced(GivensLinear(width, width, chunk_size=chunk), False), x),
        }
        timings = round_robin(contenders, args.repeats, warmup=1)
        base = timings["nn.Linear"].median
        rows += [(f"{width}/{width} c={chunk}", name, t.median * 1e3, t.median / base) for name, t in timings.items()]
        net_args = dict(hidden=args.network_hidden or width, chunk_size=chunk)
        contenders = {"RotorNetwork": step(RotorNetwork(width, width, **net_args), x),
                      "GivensNetwork": step(GivensNetwork(width, width, **net_args), x)}
        timings = round_robin(contenders, args.repeats, warmup=1)
        base = timings["RotorNetwork"].median
        rows += [(f"{width}/{width} c={chunk}", name, t.median * 1e3, t.median / base) for name, t in timings.items()]
    print(markdown_table(["shape", "contender", "ms (median)", "ratio"], rows, formats=[None, None, ".2f", ".2f"]))


if __name__ == "__main__":
    main()
