"""`galinear train-mlp`: train rotor, dense and low-rank MLPs on Fashion-MNIST or MNIST."""
import argparse

from galinear.commands._config_options import (
    Option, add_config_options, config_from_args, nonnegative_float, nonnegative_int, positive_int, probability, run_tag,
    seed, thread_count,
)

HELP = "Train rotor / dense / low-rank MLPs on Fashion-MNIST or MNIST; write JSON, a table and a plot."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the model and optimiser defaults are the fields of MLPConfig and TrainConfig (the measured
    # configuration of docs/results.md), written once there
    from galinear.train.config import ACTIVATIONS, HEADS, MODEL_KINDS, ROTOR_GRADIENTS, MLPConfig, TrainConfig

    chunk_n = MLPConfig().chunk_size.bit_length() - 1
    parser.add_argument("--data", choices=("fashion-mnist", "mnist"), default="fashion-mnist")
    parser.add_argument("--data-dir", default=None,
                        help="folder of the idx files (default: $GALINEAR_FASHION_MNIST / $GALINEAR_MNIST, "
                             "then /usr/share/datasets/fashion-mnist)")
    parser.add_argument("--model", nargs="+", choices=MODEL_KINDS, default=["rotor", "dense"],
                        help="one or more model kinds, trained one after another (default: rotor dense)")
    parser.add_argument("--seeds", nargs="+", type=seed, default=[0, 1, 2],
                        help="one run per seed and model, each an integer in 0..2**64 - 1 (default 0 1 2)")
    add_config_options(parser, MLPConfig, [
        Option("hidden", "hidden width (default %(default)s)"),
        Option("depth", "hidden layers (default %(default)s)"),
        Option("activation", "(default %(default)s)", choices=ACTIVATIONS),
        Option("layer_norm", "drop the parameter-free LayerNorm after each hidden map", flag="--no-layer-norm"),
        Option("bias", "no biases in the hidden maps", flag="--no-bias"),
        Option("head", "last map hidden -> 10 (default %(default)s)", choices=HEADS),
        Option("rank", "rank of the low-rank maps (default %(default)s)"),
        Option("chunk_size", f"rotor chunk size, a power of two (default %(default)s: Cl({chunk_n}), "
                             f"{chunk_n * (chunk_n - 1) // 2} bivector coefficients per rotor, one rotor pair per "
                             "pair of blocks); capped, per layer, at the largest power of two <= both widths, so a "
                             "large value gives one chunk per layer"),
        Option("backend", "rotor sandwich backend (default %(default)s; dense: for n <= 10 and batches of "
                          "hundreds, building the chunk matrices once per step costs less CPU than the factored "
                          "kernels; see docs/results.md)"),
        Option("rotor_init_std", "std of the normal initialisation of rotor bivector coefficients (default "
                                 "%(default)s; a large value starts from rotations far from the identity)",
               type=nonnegative_float),
        Option("dropout", "probability of dropping a hidden unit after each activation in training "
                          "(default %(default)s)", type=probability),
        Option("rotor_gradient", "gradient of the rotor layers: the exact derivative of exp(B) (exact) or "
                                 "the paper's one-step approximation (power-step); default %(default)s",
               choices=ROTOR_GRADIENTS),
    ])
    add_config_options(parser, TrainConfig, [
        Option("epochs", "(default %(default)s)"),
        Option("batch_size", "(default %(default)s)"),
        Option("lr", "peak Adam learning rate, the same for every model (default %(default)s)"),
        Option("weight_decay", "AdamW weight decay (default %(default)s)", type=nonnegative_float),
        Option("warmup_steps", "linear warm-up steps before the cosine decay (default %(default)s)",
               type=nonnegative_int),
    ])
    parser.add_argument("--out", default="runs", help="results folder; runs go to OUT/DATA/<name>-seed<k> (default runs)")
    parser.add_argument("--tag", type=run_tag, default="",
                        help="suffix of the run names, to keep variants apart (letters, digits, '.', '_', '-')")
    parser.add_argument("--threads", type=thread_count, default=None,
                        help="torch and numba threads, or 'auto' (each step's count chosen from the step times; "
                             "default: all cores)")
    parser.add_argument("--limit-train", type=positive_int, default=None, help="use only the first N training images")
    parser.add_argument("--limit-test", type=positive_int, default=None, help="use only the first N test images")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    parser.add_argument("--report-only", action="store_true", help="only rewrite the table and plot from saved runs")


ON_INTERRUPT = "every finished epoch is kept in its run's checkpoint (no file is left half written)"

#: Options --report-only reads (the results folder, the data set's name, the report's title).
_REPORT_OPTIONS = ("out", "data", "hidden", "depth", "progress")


def _rotor_widths(args) -> list:
    """(d_in, d_out) of every rotor map of the models asked (28 x 28 images, 10 classes)."""
    from galinear.train.data import class_count

    widths = []
    if "rotor" in args.model:
        widths += [(28 * 28, args.hidden)] + [(args.hidden, args.hidden)] * (args.depth - 1)
    if args.head == "rotor":
        widths.append((args.hidden, class_count(args.data)))
    return widths or [(1, 1)]


def check_options(args) -> None:
    """Refuse an option that has no effect in the combination given, naming both options."""
    from galinear.commands._options import refuse_repeats, refuse_unused, refuse_with_report_only
    from galinear.train.config import largest_chunk

    refuse_with_report_only(args, _REPORT_OPTIONS)
    kinds = set(args.model)
    listed = f"--model {' '.join(args.model)}"
    rotor_maps = "rotor" in kinds or args.head == "rotor"
    refuse_unused(args, [
        ("rank", "lowrank" in kinds, f"--rank sets the rank of lowrank models, and {listed} has none"),
        ("chunk_size", rotor_maps, f"--chunk-size sets the chunks of rotor maps, and {listed} with --head "
                                   f"{args.head} has none"),
        ("backend", rotor_maps, f"--backend chooses the sandwich of rotor maps, and {listed} with --head {args.head} "
                                "has none"),
        ("rotor_gradient", rotor_maps, f"--rotor-gradient is the gradient of rotor maps, and {listed} with --head "
                                       f"{args.head} has none"),
        ("chunk_size", not rotor_maps or args.chunk_size <= largest_chunk(_rotor_widths(args)),
         f"every rotor map caps its chunks at the largest power of two <= both its widths, {largest_chunk(_rotor_widths(args))} "
         f"at most here (--hidden {args.hidden}), so --chunk-size {args.chunk_size} runs as that; give at most "
         f"{largest_chunk(_rotor_widths(args))}"),
        ("rotor_init_std", "rotor" in kinds, f"--rotor-init-std draws the bivectors of rotor models, and {listed} "
                                             "has none"),
    ])
    refuse_repeats(args.seeds, "--seeds")
    refuse_repeats(args.model, "--model")


def run(args) -> int:
    """Every check first (arguments, sizes, run folders), then the data, the runs and the report.

    Errors are raised as ValueError (TooLargeError, CorruptFileError, IdxFormatError) or
    DatasetNotFoundError and reach the user as one line through the command line's error boundary
    (galinear.commands._report.run_command)."""
    from pathlib import Path

    from galinear.commands._options import apply_threads, check_threads

    check_options(args)
    check_threads(args.threads)

    import torch

    from dataclasses import asdict

    from galinear.train.data import class_count, image_tensors
    from galinear.train.loop import TrainConfig, check_run_folder, data_sha256, train_classifier
    from galinear.train.models import MLPConfig, check_training_memory
    from galinear.train.report import collect_runs, markdown_table, write_report
    from galinear.train.run_folder import make_results_folder, run_folder_name

    def model_config(kind, in_features=784, num_classes=class_count(args.data)):
        return config_from_args(MLPConfig, args, kind=kind, in_features=in_features, num_classes=num_classes,
                                rotor_init_std=args.rotor_init_std if kind == "rotor" else None)

    def train_config(seed):
        return config_from_args(TrainConfig, args, seed=seed)

    if not args.report_only:  # every check that needs no data, before the data load
        for kind in args.model:
            config = model_config(kind)  # both data sets: 28 x 28 images, 10 classes
            config.validate()
            train_config(args.seeds[0]).validate()
            check_training_memory(config, args.batch_size)
    apply_threads(args.threads)
    root = Path(args.out) / args.data
    make_results_folder(root)
    if not args.report_only:  # every run folder's files, before the data load and any training
        for kind in args.model:
            for seed in args.seeds:
                check_run_folder(root / run_folder_name(kind, seed, args.tag),
                                 {"model": model_config(kind).to_dict(), "train": asdict(train_config(seed))})
    collect_runs(root, log=print)  # a damaged run folder beside these runs is named now, not after training
    title = f"{args.data}: MLP {args.hidden} x {args.depth}"
    # published Fashion-MNIST test accuracies (Pence et al. 2025), drawn as dashed lines
    references = {"paper rotor MLP 88.36%": 88.36, "paper dense MLP 89.67%": 89.67} if args.data == "fashion-mnist" else None
    if not args.report_only:
        data = image_tensors(args.data, args.data_dir, args.limit_train, args.limit_test)
        identity = {"name": args.data, "data_sha256": data_sha256(data)}
        print(f"{args.data}: {data[0].shape[0]} training and {data[2].shape[0]} test images; "
              f"torch threads {'chosen by step time' if args.threads == 'auto' else torch.get_num_threads()}; runs in {root}")
        for kind in args.model:
            for seed in args.seeds:
                name = run_folder_name(kind, seed, args.tag)
                history = train_classifier(model_config(kind, data[0].shape[1]), train_config(seed), data,
                                           root / name, progress=args.progress, description=name,
                                           data_identity=identity)
                print(f"{name}: {history['parameters']:,} parameters, final test accuracy "
                      f"{100 * history['epochs'][-1]['test_accuracy']:.2f}%")
                write_report(root, title, references, log=print)
    try:
        rows = write_report(root, title, references, log=print)
    except OSError as error:  # results.md, summary.json or accuracy.png cannot be written
        raise ValueError(f"cannot write the report into {root} ({error}); choose another --out folder") from None
    if not rows:
        print(f"no finished runs in {root}: train some first (galinear train-mlp --out {args.out})")
        return 1
    print(markdown_table(rows))
    print(f"table: {root / 'results.md'}; plot: {root / 'accuracy.png'}; summary: {root / 'summary.json'}")
    return 0
