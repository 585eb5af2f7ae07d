"""``galinear compress``: replace q/k/v projections of a causal LM by rotor networks and baselines."""
import os

from galinear.commands._config_options import thread_count
from galinear.commands._report import fail

HELP = ("Compress the attention q/k/v projections of a causal LM (or any of q,k,v,o,gate,up,down: --targets) layer "
        "by layer, up to every layer (--layers all), "
        "with rotor networks and baselines (the linear ones also at their closed-form optimum), optionally "
        "followed by a joint distillation stage (--distill), and report ln PPL on the whole WikiText-2 test "
        "split (the default when its file is installed) and on the held-out windows of the texts")



class PresetNames:
    """The names of :data:`galinear.compress.study.config.PRESETS` as the choices of --preset: read (with
    the torch stack that module imports) when an argument is checked or a help text shows them,
    never while the parser is built, so ``galinear --help`` stays fast."""

    def _names(self):
        from galinear.compress.study.config import PRESETS

        return sorted(PRESETS)

    def __contains__(self, name):
        return name in self._names()

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())


BASELINE_FITS = ("adam", "closed-form", "both")


class StudyDefault:
    """The default of an option that is a :class:`~galinear.compress.study.config.StudyConfig` field of the
    same name: the field of the default preset (``galinear.compress.study.config.DEFAULT_PRESET``), read
    (with the torch stack that module imports) when a help text shows it, never while the parser is
    built, so ``galinear --help`` stays fast."""

    def __init__(self, field: str):
        self.field = field

    def value(self):
        from galinear.compress.study.config import DEFAULT_PRESET, preset

        return getattr(preset(DEFAULT_PRESET), self.field)

    def __str__(self):
        return str(self.value())

    def __repr__(self):
        return f"StudyDefault({self.field!r})"


# options whose default is the default preset's StudyConfig field of the same name
STUDY_FIELDS = ("model", "window", "stride", "split_seed", "hidden", "o_epochs", "valid_windows", "objective",
                "wikitext_window", "wikitext_windows", "distill_lr", "distill_max_steps", "distill_eval_every")


def expand_methods(names, baseline_fit: str) -> tuple:
    """Apply --baseline-fit to the method list: lr1/lr4/bh1 become their Adam fit, their closed-form
    fit (lr1-cf, ...) or both; other methods (and explicit -cf names) are kept as given."""
    from galinear.compress.methods.catalogue import CLOSED_FORM

    if baseline_fit not in BASELINE_FITS:
        raise ValueError(f"--baseline-fit must be one of {', '.join(BASELINE_FITS)}, got {baseline_fit!r}")
    out = []
    for name in names:
        if name in CLOSED_FORM and baseline_fit != "adam":
            out += [CLOSED_FORM[name]] if baseline_fit == "closed-form" else [name, CLOSED_FORM[name]]
        else:
            out.append(name)
    return tuple(dict.fromkeys(out))


def text_files(paths) -> tuple:
    """((name, path), ...) for --text: each name is the file (or folder) name without extension,
    made unique with -2, -3, ... when two files share one."""
    from galinear.data.text import DATASETS, text_name

    out, used = [], set(DATASETS)
    for path in paths:
        name, k = text_name(path), 2
        base = name
        while name in used:
            name, k = f"{base}-{k}", k + 1
        used.add(name)
        out.append((name, path))
    return tuple(out)


def _ints(text, what):
    try:
        return tuple(int(x) for x in text.split(",") if x.strip() != "")
    except ValueError:
        raise ValueError(f"{what} must be comma-separated integers, got {text!r}") from None


def parse_layer_sets(text):
    """'4;15;15,16' -> ((4,), (15,), (15, 16)): sets separated by ';', layers inside by ','; ranges
    ('0-29') and 'all' (every layer) as in :func:`galinear.compress.study.sequential.parse_layer_sets`."""
    from galinear.compress.study.sequential import parse_layer_sets as parse

    return parse(text)


class _LazyText:
    """Text made on first use: argparse expands ``%(name)s`` in a help text from the action's
    attributes when the help is shown, so the method records load then, not while the parser is
    built."""

    def __init__(self, make):
        self.make = make

    def __str__(self):
        from galinear.compress.methods import records

        return self.make(records)


def _lazy_help(action, **texts) -> None:
    """Give ``action`` the attributes its help names, each ``make(records)`` on first use."""
    for name, make in texts.items():
        setattr(action, name, _LazyText(make))


def add_arguments(parser):
    parser.add_argument("--preset", choices=PresetNames(), default=None,
                        help="the settings every option not given takes (galinear.compress.study.config.PRESETS): "
                             "standard (the default: the paper's one-layer protocol, scored on WikiText-2 too), "
                             "paper (the same on the held-out texts only), demo (what `galinear demo` runs: "
                             "consecutive layers, the attention objective and the joint distillation), full, "
                             "converged (docs/compress.md, \"Presets\")")
    parser.add_argument("--model", default=StudyDefault("model"),
                        help="'%(default)s' (embedded default), a save_pretrained folder, a folder with "
                             "--gguf-file, or a .gguf path")
    parser.add_argument("--gguf-file", default=None, help="GGUF file name inside --model")
    parser.add_argument("--texts", dest="datasets", default=None,
                        help="comma-separated: wikipedia,shakespeare,kjv (they stand in for C4/PTB; WikiText-2 "
                             "ships with galinear: --wikitext)")
    parser.add_argument("--text", dest="text_paths", action="append", nargs="+", default=None, metavar="PATH",
                        help="your own text: a UTF-8 text file, a folder of .txt files, or a .jsonl file (with "
                             "--text-field); each PATH is one text, split like the built-in ones; replaces the "
                             "preset's --texts unless --texts is given too")
    parser.add_argument("--text-field", default=None, help="the field holding the text in .jsonl files")
    parser.add_argument("--layers", dest="layer_sets", default=None,
                        help="layer sets, ';' between sets, ',' inside a set, e.g. '4;15;15,16' (0-based); a range "
                             "'0-29' or 'all' (every decoder layer) replaces the layers in order, each fitted on the "
                             "network whose earlier layers are already replaced, resumable at every layer, with a "
                             "line per layer and the time left")
    _lazy_help(parser.add_argument("--methods", default=None, help="%(listing)s"), listing=lambda r: r.methods_help())
    parser.add_argument("--baseline-fit", choices=BASELINE_FITS, default=None,
                        help="how lr1/lr4/bh1 are fitted: adam, closed-form (exact optimum over all training "
                             "rows, reported as LR1*, LR4*, BH1*) or both (default)")
    stopping = parser.add_mutually_exclusive_group()
    stopping.add_argument("--until-converged", dest="until_converged", action="store_true", default=None,
                          help="Adam fits run until the validation MSE stops improving (the standard, paper, demo and converged presets: on)")
    stopping.add_argument("--fixed-steps", dest="until_converged", action="store_false", default=None,
                          help="Adam fits run --epochs passes with a cosine schedule (full preset)")
    parser.add_argument("--objective", choices=("qkv", "attention", "logits"), default=StudyDefault("objective"),
                        help="what Adam fits match: each of q, k, v on its own (qkv), or q, k, v jointly "
                             "to the layer's attention output (attention) or to the model's next-token "
                             "distribution (logits, KL); closed-form fits stay qkv (default %(default)s)")
    parser.add_argument("--wikitext", choices=("auto", "file", "hub", "off"), default=None,
                        help="the standard measure: ln PPL over the whole WikiText-2 test split in non-overlapping "
                             "windows (galinear.lm.wikitext). auto (the standard preset): the file that "
                             "ships with galinear when it is installed; file: the same, required; hub: the hub "
                             "dataset (a network and `datasets`); off (the paper, full and converged presets): the texts "
                             "only (the demo preset scores --wikitext-windows of the file). It is never "
                             "used for fitting")
    parser.add_argument("--wikitext-window", type=int, default=StudyDefault("wikitext_window"),
                        help="tokens per WikiText-2 window (default %(default)s, less where the model's context is)")
    parser.add_argument("--wikitext-windows", type=int, default=StudyDefault("wikitext_windows"),
                        help="score only this many WikiText-2 windows, spread evenly over the split (first and last "
                             "included), for quick comparisons; the report says it is a subset (default: all)")
    parser.add_argument("--distill", action="store_true", default=None,
                        help="a final stage: fine-tune all replacement parameters jointly by distilling the original "
                             "model's next-token distribution (KL) on the training windows, stopped on the validation "
                             "windows, checkpointed and resumable; reported as its own row (tag -kd...)")
    parser.add_argument("--distill-lr", type=float, default=StudyDefault("distill_lr"),
                        help="Adam rate of the distillation stage (default %(default)s)")
    parser.add_argument("--distill-steps", dest="distill_max_steps", type=int,
                        default=StudyDefault("distill_max_steps"),
                        help="step budget of the distillation stage, one window per step (default %(default)s)")
    parser.add_argument("--distill-eval-every", type=int, default=StudyDefault("distill_eval_every"),
                        help="steps between the distillation's validation checks (default %(default)s)")
    parser.add_argument("--max-steps", type=int, default=None, help="step budget of a converged fit")
    parser.add_argument("--eval-every", type=int, default=None, help="steps between validation checks")
    parser.add_argument("--patience", type=int, default=None,
                        help="validation checks without improvement before a learning-rate decay / the stop")
    parser.add_argument("--valid-windows", type=int, default=StudyDefault("valid_windows"),
                        help="validation windows per text for the stopping rule (default %(default)s)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds for single-layer sets")
    parser.add_argument("--multi-seeds", default=None, help="seeds for sets of 2+ layers (default: --seeds)")
    parser.add_argument("--train-windows", type=int, default=None, help="training windows per text")
    parser.add_argument("--eval-windows", type=int, default=None, help="held-out windows per text")
    parser.add_argument("--mse-windows", type=int, default=None, help="held-out windows per text for test MSE")
    parser.add_argument("--epochs", type=float, default=None, help="passes over the regression rows")
    _lazy_help(parser.add_argument("--hidden", type=int, default=StudyDefault("hidden"),
                                   help="%(owners)s: hidden width (default %(default)s)"),
               owners=lambda r: " and ".join(r.owners("--hidden")))
    parser.add_argument("--bh-blocks", type=int, default=None,
                        help="BH1 block count (default: the largest common divisor of the q/k/v widths up to 48, "
                             "e.g. 48 for SmolLM2's 576 -> 576 / 192; the count used and the parameter ratio "
                             "to the rotor network are reported)")
    parser.add_argument("--rank", type=int, default=None, help="rank of lr and lr-cf (default 4)")
    parser.add_argument("--terms", type=int, default=None, help="Kronecker terms of kron and kron-cf (default 4)")
    _lazy_help(parser.add_argument("--chunk", type=int, default=None,
                                   help="chunk size of the gadgets of %(owners)s, a power of two >= 4 "
                                        "(default: the largest that fits each gadget); smaller chunks give more "
                                        "parameters at the same hidden width (at 512 on SmolLM2, the rotor network: "
                                        "3.0 %% at 128, 8.3 %% at 64)"),
               owners=lambda r: " and ".join(r.owners("--chunk")))
    _lazy_help(parser.add_argument("--budget", type=float, default=None,
                                   help="parameters per projection as a fraction of the dense matrix (0.02 for 2 %%): "
                                        "the size knob of %(owners)s (and their -cf forms; a network's chunk at "
                                        "--hidden) is set to the count nearest to it; the other methods keep their "
                                        "size"),
               owners=lambda r: ", ".join(n for n in r.owners("--budget") if not r.method(n).exact))
    parser.add_argument("--window", type=int, default=StudyDefault("window"),
                        help="tokens per window (default %(default)s)")
    parser.add_argument("--stride", type=int, default=StudyDefault("stride"),
                        help="tokens between window starts (default %(default)s)")
    parser.add_argument("--split-seed", type=int, default=StudyDefault("split_seed"),
                        help="seed of the training / held-out split (default %(default)s)")
    parser.add_argument("--refit-o-proj", action="store_true", help="refit o_proj after each replaced layer")
    parser.add_argument("--targets", type=_targets, default=None, metavar="LIST",
                        help="the projections replaced in each layer of --layers: any of q,k,v,o,gate,up,down "
                             "(or all; default q,k,v as in the paper); q/k/v/o are fitted to the attention block's "
                             "output and gate/up/down to the MLP block's with --objective attention, all jointly with "
                             "logits; --budget is a share of each replaced projection (docs/compress.md, \"Targets\")")
    parser.add_argument("--o-epochs", type=float, default=StudyDefault("o_epochs"),
                        help="epochs of the o_proj refit (default %(default)s, as in the paper)")
    parser.add_argument("--out", default=None,
                        help="output folder (default runs/compress-<preset>); it holds one study: a rerun of the same "
                             "command resumes it, another study is refused (docs/compress.md, \"One study per "
                             "folder\")")
    parser.add_argument("--overwrite", action="store_true",
                        help="let this study replace the results of another study in --out and its models in "
                             "--save (the cache of fits is kept and reused where the settings match)")
    parser.add_argument("--cache", dest="cache_dir", default=None, metavar="DIR",
                        help="folder of fits and captures (default OUT/cache); a study with --refit-o-proj "
                             "given the cache of the same study without it reuses its first-layer q/k/v fits")
    parser.add_argument("--save", dest="save_dir", default=None, metavar="DIR",
                        help="also write every compressed model as a folder under DIR (safetensors + JSON), "
                             "loadable with galinear.compress.load(DIR/<name>)")
    parser.add_argument("--shard-windows", type=int, default=None, metavar="N",
                        help="keep each training capture on disk in shards of N windows and read the fits' "
                             "batches from it, so memory holds one shard and one batch instead of the whole "
                             "split (same results, bit for bit; default: captures in memory)")
    parser.add_argument("--threads", type=thread_count, default=None, help="CPU threads of torch and numba, or 'auto': each training step's count chosen from the measured step times (default: all cores; under torchrun the cores divided among the ranks of each machine)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _targets(text: str) -> tuple:
    """--targets LIST: the module names (galinear.compress.methods.targets.parse_targets), or argparse's one-line error."""
    import argparse

    from galinear.compress.methods.targets import parse_targets

    try:
        return parse_targets(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--targets: ")) from None


def _given(args, name: str) -> bool:
    """Whether the option ``name`` was given (a value other than None, False or a StudyDefault)."""
    value = getattr(args, name, None)
    return value is not None and value is not False and not isinstance(value, StudyDefault)


def _base(args):
    """The StudyConfig of --preset (the default preset without it)."""
    from galinear.compress.study.config import DEFAULT_PRESET, preset

    return preset(args.preset or DEFAULT_PRESET)


def _methods(args, base) -> tuple:
    """--methods with --baseline-fit applied; without --methods the preset's methods, refitted as
    --baseline-fit says when it is given (the preset's closed-form pairs folded back first)."""
    from galinear.compress.methods.catalogue import CLOSED_FORM

    if _given(args, "methods"):
        return expand_methods(tuple(x.strip() for x in args.methods.split(",") if x.strip()),
                              args.baseline_fit or "both")
    if not _given(args, "baseline_fit"):
        return tuple(base.methods)
    adam_name = {cf: name for name, cf in CLOSED_FORM.items()}
    return expand_methods(tuple(dict.fromkeys(adam_name.get(m, m) for m in base.methods)), args.baseline_fit)


# options whose value is the StudyConfig field of the same name
_SAME_FIELDS = STUDY_FIELDS + ("gguf_file", "train_windows", "eval_windows", "mse_windows", "epochs", "bh_blocks",
                               "rank", "terms", "chunk", "budget", "max_steps", "eval_every", "patience",
                               "until_converged", "threads", "cache_dir", "save_dir", "shard_windows", "text_field",
                               "wikitext", "targets")


def config_from_args(args):
    """The StudyConfig of --preset (the default preset without it) with the fields of the options
    given replaced; nothing else is defaulted here."""
    import dataclasses

    base = _base(args)
    changes = {name: getattr(args, name) for name in _SAME_FIELDS
               if getattr(args, name, None) is not None and not isinstance(getattr(args, name), StudyDefault)}
    files = text_files([p for group in (args.text_paths or []) for p in group])
    if _given(args, "datasets"):
        changes["datasets"] = tuple(x.strip() for x in args.datasets.split(",") if x.strip())
    elif files:
        changes["datasets"] = ()
    if files:
        changes["datasets"] = changes.get("datasets", base.datasets) + tuple(name for name, _ in files)
        changes["text_files"] = files
    changes["methods"] = _methods(args, base)
    if _given(args, "layer_sets"):
        changes["layer_sets"] = parse_layer_sets(args.layer_sets)
    if _given(args, "seeds"):
        changes["seeds"] = _ints(args.seeds, "--seeds")
    if _given(args, "multi_seeds"):
        changes["multi_seeds"] = _ints(args.multi_seeds, "--multi-seeds")
    for name in ("refit_o_proj", "distill", "overwrite"):
        if getattr(args, name, None):
            changes[name] = True
    if args.out:
        changes["out_dir"] = args.out
    if args.no_progress:
        changes["progress"] = False
    return dataclasses.replace(base, **changes)


def given_options(args) -> frozenset:
    """The destinations of the options given on the command line: those whose value is not the
    parser's default (every default that a value could equal is None, False or a StudyDefault)."""
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    defaults = vars(parser.parse_args([]))
    out = set()
    for dest, default in defaults.items():
        value = getattr(args, dest, default)
        if isinstance(default, StudyDefault) and not isinstance(value, StudyDefault) or (
                not isinstance(default, StudyDefault) and value != default):
            out.add(dest)
    return frozenset(out)


def unused_option_problem(args):
    """The first option given that has no effect in the combination given, or None: the message
    names it and the option it depends on (an option that changes nothing is a mistake to report,
    not to ignore)."""
    from galinear.compress.study.config import DEFAULT_PRESET
    from galinear.compress.methods import records
    from galinear.compress.methods.catalogue import CLOSED_FORM, KNOBS

    chosen = given_options(args)
    base = _base(args)
    asked = ([x.strip() for x in args.methods.split(",") if x.strip()] if _given(args, "methods")
             else list(base.methods))
    try:
        methods = _methods(args, base)
        layer_sets = parse_layer_sets(args.layer_sets) if _given(args, "layer_sets") else base.layer_sets
        kinds = [records.method(m) for m in methods]
    except ValueError:
        return None  # the checks that follow name the problem
    adam = [m.name for m in kinds if m.adam_fitted]
    on_moments = any(m.fit == records.MOMENTS for m in kinds)

    def taking(option):  # (whether a method asked takes ``option``, the methods that do: "a nor b")
        owners = " nor ".join(r.name for r in records.RECORDS.values() if option in r.options)
        return any(option in m.options for m in kinds), owners

    def size_rule(option, dest, knob):
        applies, owners = taking(option)
        return (option, dest, applies and args.budget is None,
                f"with --budget, which sets the {knob}" if applies else f"here: --methods holds neither {owners}")

    converged = base.until_converged if args.until_converged is None else args.until_converged
    distill = bool(args.distill) or base.distill
    wikitext = args.wikitext or base.wikitext
    preset = f"--preset {args.preset or DEFAULT_PRESET}"
    budget = "--budget sets the size of every method with a size knob"
    stop_flag = "--until-converged" if converged else "--fixed-steps"
    stopping = stop_flag + ("" if "until_converged" in chosen else f" (the default of {preset})")
    no_adam = f"every method of --methods ({','.join(methods)}) is fitted in closed form or has no parameters"
    wikitext_off = ("--wikitext is off" + ("" if "wikitext" in chosen else f" (the default of {preset})")
                    + ": add --wikitext auto, file or hub to score WikiText-2")
    distill_off = "without --distill, which runs the stage it {}"
    multi = any(len(s) > 1 or s == ("all",) for s in layer_sets)
    single = any(len(s) == 1 and s != ("all",) for s in layer_sets)
    distill_steps, distill_every = (base.distill_max_steps if isinstance(args.distill_max_steps, StudyDefault)
                                    else args.distill_max_steps,
                                    base.distill_eval_every if isinstance(args.distill_eval_every, StudyDefault)
                                    else args.distill_eval_every)
    rules = (  # (option, its destination, whether it has an effect here, why not: the other option)
        ("--distill-eval-every", "distill_eval_every", not (distill and isinstance(distill_every, int)
                                                            and isinstance(distill_steps, int)
                                                            and distill_every > distill_steps),
         f"with --distill-steps {distill_steps}: a check every {distill_every} steps falls past the stage's "
         f"{distill_steps} steps, so only its first and last checks run, as with --distill-eval-every "
         f"{distill_steps} (give at most {distill_steps})"),
        ("--distill-steps", "distill_max_steps", distill, distill_off.format("sizes")),
        ("--distill-lr", "distill_lr", distill, distill_off.format("sets")),
        ("--distill-eval-every", "distill_eval_every", distill, distill_off.format("sets")),
        ("--wikitext-windows", "wikitext_windows", wikitext != "off", f"here: {wikitext_off}"),
        ("--wikitext-window", "wikitext_window", wikitext != "off", f"here: {wikitext_off}"),
        ("--max-steps", "max_steps", bool(converged and adam) or on_moments,
         f"with {stopping}, which fits Adam for --epochs passes" if not converged else f"here: {no_adam}"),
        ("--eval-every", "eval_every", bool(converged and adam) or on_moments,
         f"with {stopping}, which checks no validation MSE" if not converged else f"here: {no_adam}"),
        ("--patience", "patience", bool(converged and adam) or on_moments or distill,
         f"with {stopping} and without --distill, which have no stopping rule" if not converged
         else f"here: {no_adam}, and --distill is not given"),
        ("--epochs", "epochs", bool(adam) and not converged,
         f"with {stopping}, which stops on the validation MSE instead (add --fixed-steps to fit --epochs passes)"
         if converged else f"here: {no_adam}"),
        ("--valid-windows", "valid_windows", converged or distill,
         f"with {stopping} and without --distill, which draw no validation windows"),
        (stop_flag, "until_converged", bool(adam), f"here: {no_adam}"),
        ("--objective", "objective", bool(adam), f"here: {no_adam} (those fit each of q, k, v on its own)"),
        ("--o-epochs", "o_epochs", bool(args.refit_o_proj), "without --refit-o-proj, which runs the refit it sets"),
        ("--multi-seeds", "multi_seeds", multi, "here: every set of --layers is a single layer, which --seeds covers"),
        ("--seeds", "seeds", single or "multi_seeds" not in chosen,
         "here: every set of --layers has two or more layers, which --multi-seeds covers"),
        ("--baseline-fit", "baseline_fit", any(m in CLOSED_FORM for m in asked),
         f"here: --methods ({','.join(asked)}) holds none of {', '.join(CLOSED_FORM)}"),
        size_rule("--rank", "rank", "rank"),
        size_rule("--terms", "terms", "terms"),
        size_rule("--chunk", "chunk", "chunk"),
        size_rule("--bh-blocks", "bh_blocks", "blocks"),
        ("--hidden", "hidden", taking("--hidden")[0], f"here: --methods holds neither {taking('--hidden')[1]}"),
        ("--budget", "budget", taking("--budget")[0],
         f"here: no method of --methods has a size knob ({budget}: {', '.join(KNOBS)})"),
        ("--text-field", "text_field", bool(args.text_paths), "without --text, whose .jsonl files it reads"),
        ("--gguf-file", "gguf_file", "model" in chosen and not os.path.isfile(str(args.model)),
         "here: --model is a file already" if "model" in chosen
         else "without --model, whose folder holds the file it names (the default model has its own)"),
    )
    for option, dest, applies, why in rules:
        if dest in chosen and not applies:
            return f"{option} has no effect {why}; drop {option} or change the other option"
    return None


def run(args):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import time

    from galinear.compress import Study
    from galinear.compress.study import distributed
    from galinear.compress.report.summary import texts_note
    from galinear.compress.storage.store import models_root

    problem = unused_option_problem(args)
    if problem:
        return fail("compress", problem)
    ranks = distributed.init_from_env()  # under torchrun: join the ranks (gloo on CPU, nccl on GPU)
    try:
        config = config_from_args(args)
        t0 = time.perf_counter()
        study = Study(config)  # every check of the settings (galinear.compress.study.config.check) comes first
    except (ValueError, TypeError) as exc:
        return fail("compress", str(exc))
    if ranks.rank != 0:  # every rank does its share; rank 0 reports
        study.run()
        return 0
    if ranks.size > 1:
        print(f"{ranks.size} ranks share the study (torchrun); rank 0 writes the report")
    print(f"model {study.loaded.name}; texts {', '.join(config.datasets)}; layer sets "
          f"{'; '.join(','.join(map(str, s)) for s in config.layer_sets)}; methods {', '.join(config.methods)}")
    for name, w in study.windows.items():
        print(f"  {name}: {len(w.train)} training windows, {len(w.heldout)} held-out windows "
              f"({config.window} tokens, stride {config.stride})")
    try:
        study.run()
    except KeyboardInterrupt:
        print(f"\ngalinear compress: interrupted; every finished unit is saved under {config.out_dir} (no file is "
              "left half written); run the same command again to resume")
        return 130
    out = study.write_report()
    print()
    print(out["table"])
    for line in out["markdown"].splitlines():
        if line.startswith("- ") and "blocks" in line:
            print(line[2:])
    note = texts_note(config.datasets)
    if note:
        print(note)
    kept = models_root(config)
    if kept:
        print(f"compressed models kept under {kept}/ (index.json lists them); load one with "
              f"galinear.compress.load('{kept}/<name>') or `galinear generate {kept}/<name>`")
    print(f"results in {config.out_dir}/ (results.md, summary.json, results.json, logppl_vs_params.png); "
          f"{time.perf_counter() - t0:.0f} s")
    return 0
