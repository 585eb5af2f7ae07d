"""Projection MSE (the qkv objective) against the joint attention / logits objectives, by ln PPL.

The setting of ``galinear demo`` (SmolLM2-135M-Instruct, layer 15, Wikipedia, 16 training
windows, 8 held-out windows; see ``compare_gradients_smollm2.demo_setting``). For each method the
three replacements start from the same initialisation (the study's seeds) and take the same number
of Adam steps, cosine schedule from the method's learning rate:

- ``qkv``: each projection on its own, batches of 256 rows
  (:func:`galinear.compress.fitting.projection.fit_projection`); ``round(epochs * 32)`` steps each;
- ``attention`` / ``logits``: q, k and v jointly (:func:`galinear.compress.fitting.objective.fit_layer`),
  one window (512 tokens + BOS) per step, the same number of steps.

Prints ln PPL on the 8 held-out windows, the relative test MSE of q, k, v (2 held-out windows)
and the fit time. Usage::

    python benchmarks/compare_objectives_smollm2.py --methods rotor --objectives qkv,attention --epochs 1
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import markdown_row, markdown_table  # noqa: E402
from compare_gradients_smollm2 import demo_setting, relative_test_mse  # noqa: E402


def fit_method(setting, name: str, objective_name: str, epochs: float, seed: int, hidden: int, extra=None):
    """Replacements {proj: module} of ``name`` fitted with ``objective_name``, and the fit time."""
    import torch

    from galinear.compress.fitting import projection, seeds
    from galinear.compress.methods import catalogue as methods
    from galinear.compress.fitting import objective
    from galinear.lm import models

    model, layer = setting["loaded"].model, setting["layer"]
    spec = methods.MethodSpec(name, epochs=epochs, hidden=hidden if name == "rotor" else None)
    modules = {}
    for j, proj in enumerate(models.PROJECTIONS):
        orig = models.projection(model, layer, proj)
        torch.manual_seed(seeds.fit_seed(seed, layer, j))
        modules[proj] = methods.build_module(spec, orig.in_features, orig.out_features, bias=orig.bias is not None)
    x = setting["x_train"]
    steps = objective.steps_for(len(x), epochs, spec.batch_size)
    t0 = time.perf_counter()
    if objective_name == "qkv":
        for j, proj in enumerate(models.PROJECTIONS):
            orig = models.projection(model, layer, proj)
            projection.fit_projection(modules[proj], x, x, orig.weight, lr=spec.learning_rate, epochs=epochs,
                                      seed=seeds.fit_seed(seed, layer, j), bias=orig.bias,
                                      progress=f"qkv {name} {proj}")
    else:
        windows, length = setting["train_ids"].shape
        if objective_name == "attention":
            inputs = x.reshape(windows, length, -1)
        else:
            inputs = setting["train_residual"]
        target = objective.LayerObjective(model, layer, objective_name, inputs, inputs)
        objective.fit_layer(modules, target, lr=spec.learning_rate, steps=steps, seed=seeds.fit_seed(seed, layer),
                            progress=f"{objective_name} {name}")
    return modules, steps, time.perf_counter() - t0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="rotor,lr1,lr4,bh1")
    parser.add_argument("--objectives", default="qkv,attention")
    parser.add_argument("--epochs", type=float, default=1.0, help="1 = 32 Adam steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layer", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="append the results to this JSON-lines file")
    args = parser.parse_args(argv)

    from galinear.compress.fitting import surgery
    from galinear.lm import models
    from galinear.lm.perplexity import heldout_log_perplexity

    setting = demo_setting(args.layer, threads=args.threads)
    model, layer, w = setting["loaded"].model, args.layer, setting["windows"]
    start = (layer, setting["heldout_residual"])
    original = heldout_log_perplexity(model, w, start=start)["log_ppl"]
    print(f"original ln PPL {original:.4f}")
    print(markdown_table(["method", "objective", "steps", "ln PPL", "rel. test MSE q", "k", "v", "fit time (s)"], []))
    for name in args.methods.split(","):
        for obj in args.objectives.split(","):
            modules, steps, seconds = fit_method(setting, name, obj, args.epochs, args.seed, args.hidden)
            with surgery.swapped(model, {(layer, p): m for p, m in modules.items()}):
                log_ppl = heldout_log_perplexity(model, w, start=start)["log_ppl"]
            mse = {p: relative_test_mse(m, setting["x_test"], models.projection(model, layer, p))
                   for p, m in modules.items()}
            print(markdown_row([name, obj, steps, log_ppl, *(mse[p] for p in models.PROJECTIONS), seconds],
                               [None, None, None, ".4f", *(".3f" for _ in models.PROJECTIONS), ".0f"]), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"method": name, "objective": obj, "epochs": args.epochs, "seed": args.seed,
                                        "steps": steps, "log_ppl": log_ppl, "original": original,
                                        "relative_test_mse": mse, "seconds": seconds}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
