"""One hidden stage of a RotorNetwork at n = 8 in two forms: parity blocks against the spinor form.

A chunk map x -> R x S~ of Cl(8) keeps the parity of a blade, so in the even-then-odd basis it is two
128 x 128 blocks (the parity blocks the network trains with). In the spinor form Cl(8) = M_16(R) and
both rotors are block diagonal, so in the coordinates of the 16 x 16 matrix the map is four 64 x 64
blocks: half the multiply-adds, but the stage's input must be taken to those coordinates and its
outputs back (``galinear.kernels.spinor``'s transforms: a signed gather, four butterfly levels and a
placement per chunk and token). Timed side by side in one run (forward of one hidden stage: width
256, ``--branches`` branches sharing the input, ``--tokens`` tokens, float32, ``--threads`` threads):

- the parity-block product (two GEMMs of (T, 128) x (128, 128 B));
- the spinor-form product (four GEMMs of (T, 64) x (64, 64 B));
- the transforms the spinor form adds: the input chunk to its matrix, the B outputs back.

The transforms are timed in the layouts of the existing kernels; a stage built in the spinor form
would need its own, for no less work. Random values: the cost does not depend on them.

    python benchmarks/bench_stage_forms.py [--tokens 2048] [--branches 3] [--threads 1] [--repeats 20] [--busy]

``--busy`` times them beside one busy process (a pure-Python loop).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import (BusyProcess, command_line, header, markdown_table, metadata, round_robin,  # noqa: E402
                     set_threads, write_results)
from galinear.rotor_kernels import spinor  # noqa: E402
from galinear.matrix_rep import representation  # noqa: E402

N_BITS = 8
RESULTS = Path(__file__).resolve().parent / "results" / "bench_stage_forms"


def contenders(tokens: int, branches: int) -> dict:
    c = 1 << N_BITS
    tab = representation(N_BITS)
    if not tab.real or tab.blocks != 2:
        raise RuntimeError(f"Cl({N_BITS}) is expected real with block-diagonal rotors; got {tab}")
    N, W = tab.N, tab.N // 2
    rng = np.random.default_rng(0)
    h = torch.from_numpy(rng.standard_normal((tokens, c), dtype=np.float32))
    parity = torch.from_numpy(rng.standard_normal((2, c // 2, branches * c // 2), dtype=np.float32))
    blocks = torch.from_numpy(rng.standard_normal((4, W * W, branches * W * W), dtype=np.float32))
    x = h.numpy().reshape(tokens, 1, c)
    matrices = np.empty((1, N, tokens, N), dtype=np.float32)
    Y = rng.standard_normal((2, branches, N, tokens, W), dtype=np.float32)
    y = np.empty((tokens, branches, c), dtype=np.float32)
    return {
        "parity blocks: product": lambda: torch.bmm(h.view(tokens, 2, c // 2).transpose(0, 1), parity),
        "spinor form: product": lambda: torch.bmm(h.view(tokens, 4, W * W).transpose(0, 1), blocks),
        "spinor form: input to its matrix": lambda: spinor.to_matrix(x, matrices),
        "spinor form: outputs from theirs": lambda: spinor.from_matrix(Y, y),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--branches", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--busy", action="store_true", help="time beside one busy process (a pure-Python loop)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write benchmarks/results")
    args = parser.parse_args(argv)
    for name in ("tokens", "branches", "threads", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    set_threads(args.threads)
    runs = contenders(args.tokens, args.branches)
    with BusyProcess() if args.busy else contextlib.nullcontext():
        timings = round_robin(runs, args.repeats, warmup=2)
    ms = {name: t.median * 1e3 for name, t in timings.items()}
    parity = ms["parity blocks: product"]
    spinor_total = sum(v for k, v in ms.items() if k.startswith("spinor form"))
    rows = [[name, value, value / parity] for name, value in ms.items()]
    rows.append(["spinor form: product and transforms", spinor_total, spinor_total / parity])
    meta = metadata(command_line("benchmarks/bench_stage_forms.py", argv),
                    load="beside one busy process" if args.busy else "idle")
    table = markdown_table(["contender", "ms (median)", "/ parity-block product"], rows,
                           formats=[None, ".3f", lambda v: f"{v:.2f}x"])
    text = header(meta) + "\n\n" + table
    print(text)
    if not args.no_write:
        write_results(RESULTS, {**meta, "milliseconds": ms, "spinor_over_parity": spinor_total / parity}, text)


if __name__ == "__main__":
    main()
