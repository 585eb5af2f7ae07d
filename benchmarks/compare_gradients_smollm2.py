"""The paper's approximate rotor gradient against the exact one, on one SmolLM2 q/k/v fit.

The setting of ``galinear demo``: SmolLM2-135M-Instruct, layer 15, Wikipedia, its 16 training
windows (8,192 rows of 512 tokens + BOS) and its first 2 held-out windows for the test MSE. Each
of q, k and v gets a ``RotorNetwork(576, d_out, hidden=512)`` fitted by Adam (lr 0.05, batches of
256 rows, cosine schedule, :func:`galinear.compress.fitting.projection.fit_projection`) with the same seed, the
same initialisation and the same batch order; only the rotor gradient differs:

- ``paper``: ``decomposition="power", gradient="power-step"`` (the paper's one-step gradient);
- ``exact``: the defaults (``decomposition="exact", gradient="exact"``, galinear.nn.dexp).

Prints the held-out relative MSE (MSE / mean square of the target) of q, k and v after the
same number of steps, and the fit time. Usage::

    python benchmarks/compare_gradients_smollm2.py --epochs 1 --seed 0
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import markdown_table, write_json  # noqa: E402

GRADIENTS = {"paper": dict(decomposition="power", gradient="power-step"),
             "exact": dict(decomposition="exact", gradient="exact")}


def demo_setting(layer: int = 15, train_windows: int = 16, eval_windows: int = 8, mse_windows: int = 2,
                 valid_windows: int = 2, threads: int | None = None, cache: str | None = "runs/bench-cache") -> dict:
    """The demo's model, windows and layer-``layer`` captures (as ``galinear demo`` cuts them);
    the captures are kept under ``cache`` (safetensors) for the next run."""
    import torch

    from galinear.compress.fitting import activations
    from galinear.compress.storage import checkpoints
    from galinear.lm import models, sources
    from galinear.lm import windows as win
    from galinear.data.text import load_text

    if threads:
        torch.set_num_threads(threads)
    loaded = models.load_model(sources.DEFAULT_MODEL)
    window, stride, group = 512, 256, 4
    budget = stride * (3 * train_windows + 4 * eval_windows + 4 * group + 8)
    tokens = win.tokenize(loaded.tokenizer, load_text("wikipedia"), max_tokens=budget + window)
    w = win.split_windows(tokens, window, stride, 0.2, 0, group, max_train=train_windows, max_heldout=eval_windows,
                          max_valid=valid_windows, bos=win.bos_token(loaded.tokenizer))
    train_ids, test_ids = w.batch(w.train), w.batch(w.heldout[:mse_windows])
    t0 = time.perf_counter()
    path = cache and os.path.join(cache, f"smollm2-L{layer}-t{train_windows}-e{eval_windows}-m{mse_windows}.safetensors")
    held = checkpoints.load(path) if path else None
    if held is None or not torch.equal(held["train_ids"], torch.as_tensor(train_ids)):
        with torch.no_grad():
            held = {"train_ids": torch.as_tensor(train_ids),
                    "x_train": activations.capture(loaded.model, layer, train_ids),
                    "x_test": activations.capture(loaded.model, layer, test_ids),
                    "heldout_residual": activations.residual_inputs(loaded.model, layer, w.batch(w.heldout)),
                    "train_residual": activations.residual_inputs(loaded.model, layer, train_ids)}
        if path:
            os.makedirs(cache, exist_ok=True)
            checkpoints.atomic_save(held, path)
    print(f"layer {layer}: {tuple(held['x_train'].shape)} training rows, {tuple(held['x_test'].shape)} test rows, "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return {"loaded": loaded, "windows": w, "layer": layer, "train_ids": train_ids, **held}


def relative_test_mse(module, x_test, orig) -> float:
    from galinear.compress.fitting import heldout_error

    target = x_test @ orig.weight.T + (0 if orig.bias is None else orig.bias)
    return heldout_error.mse(module, x_test, target) / float(target.double().pow(2).mean())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=float, default=1.0, help="passes over the 8,192 rows (1 = 32 steps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--projections", default="q_proj,k_proj,v_proj")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    import torch

    from galinear.compress.fitting import projection, seeds
    from galinear.lm import models
    from galinear.nn import RotorNetwork

    setting = demo_setting(args.layer, threads=args.threads)
    model, layer = setting["loaded"].model, args.layer
    rows = {}
    projections = [p for p in models.PROJECTIONS if p in args.projections.split(",")]
    for j, proj in enumerate(models.PROJECTIONS):
        if proj not in projections:
            continue
        orig = models.projection(model, layer, proj)
        for name, options in GRADIENTS.items():
            torch.manual_seed(seeds.fit_seed(args.seed, layer, j))  # the study's initialisation seed
            module = RotorNetwork(orig.in_features, orig.out_features, hidden=args.hidden, **options)
            t0 = time.perf_counter()
            stats = projection.fit_projection(module, setting["x_train"], setting["x_train"], orig.weight, lr=0.05,
                                              epochs=args.epochs, seed=seeds.fit_seed(args.seed, layer, j),
                                              progress=f"{name} {proj}")
            rows.setdefault(name, {})[proj] = {"relative_test_mse": relative_test_mse(module, setting["x_test"], orig),
                                               "steps": stats["steps"], "seconds": time.perf_counter() - t0}
            print(f"{name} {proj}: relative test MSE {rows[name][proj]['relative_test_mse']:.4f}", flush=True)
    steps = rows["exact"][projections[0]]["steps"]
    print(f"\nlayer {layer}, seed {args.seed}, {steps} Adam steps per projection; held-out relative MSE")
    print(markdown_table(["gradient", *(p[0] for p in projections), "fit time (s)"],
                         ([name, *(f"{per[p]['relative_test_mse']:.4f}" for p in projections),
                           f"{sum(per[p]['seconds'] for p in per):.0f}"] for name, per in rows.items())))
    if args.json:
        write_json(args.json, {"args": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
