"""What trained rotor layers learned: planes and angles of a Fashion-MNIST rotor MLP and of a
SmolLM2 q-replacement, listed and plotted with :mod:`galinear.nn.introspect`.

    python benchmarks/inspect_trained.py --mlp-run RUN_DIR --compressed SAVED_DIR --layer 15

``RUN_DIR`` is a ``galinear train-mlp --model rotor`` run folder (config.json + checkpoint.pt),
``SAVED_DIR`` one model folder written by ``galinear compress ... --save DIR`` with a rotor
replacement at ``--layer``. Prints a summary per RotorLinear and the leading planes of one chunk
pair, and writes ``docs/inspect-mlp-spectra.png`` and ``docs/inspect-q-spectra.png``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, markdown_table  # noqa: E402


def summary(listings: dict) -> str:
    """One line per RotorLinear: Cl(n), chunk pairs, and the spread of its rotation angles 2 theta."""
    rows = []
    for name, listing in listings.items():
        angles = [listing.left_angles] + ([listing.right_angles] if listing.right_angles is not None else [])
        turns = np.degrees(2 * np.concatenate([a.reshape(-1) for a in angles]))
        rows.append([name, listing.n, listing.pairs, turns.size, np.median(turns), np.percentile(turns, 90),
                     turns.max(), np.mean(turns < 1), np.median(np.abs(listing.alpha))])
    return markdown_table(["layer", "Cl(n)", "chunk pairs", "planes", "median 2θ (deg)", "90th pct", "max",
                           "share < 1 deg", "|alpha| median"], rows,
                          formats=[None, None, None, None, ".1f", ".1f", ".1f", ".2f", ".3f"])


def mlp_model(run_dir: str):
    from galinear import _io
    from galinear.train.config import MLPConfig
    from galinear.train.models import build_mlp

    config = json.loads(Path(run_dir, "config.json").read_text())
    fields = config.get("model", config)
    model = build_mlp(MLPConfig(**{k: v for k, v in fields.items() if k in MLPConfig.__dataclass_fields__}))
    state = _io.load_state(Path(run_dir, "checkpoint.pt"))
    model.load_state_dict(state["model"])
    return model.eval()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlp-run", required=True)
    parser.add_argument("--compressed", required=True)
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--out", default=str(ROOT / "docs"))
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from galinear.compress import load
    from galinear.nn.introspect import plot_angle_spectra, rotor_layers

    mlp = mlp_model(args.mlp_run)
    listings = rotor_layers(mlp)
    print("## Fashion-MNIST rotor MLP\n")
    print(summary(listings))
    first = next(iter(listings.values()))
    print("\nleading planes of the first chunk pairs of", next(iter(listings)))
    print(first.table(limit=8))
    plot_angle_spectra(mlp, os.path.join(args.out, "inspect-mlp-spectra.png"))

    model = load(args.compressed)
    q = model.model.layers[args.layer].self_attn.q_proj
    listings = rotor_layers(q)
    print(f"\n## SmolLM2 layer {args.layer} q_proj replacement ({type(q).__name__})\n")
    print(summary(listings))
    name, first = next(iter(listings.items()))
    print("\nleading planes of the first chunk pairs of", name)
    print(first.table(limit=8))
    plot_angle_spectra(q, os.path.join(args.out, "inspect-q-spectra.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
