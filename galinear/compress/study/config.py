"""The settings of a compression study (:class:`StudyConfig`), its named presets (:data:`PRESETS`,
:func:`preset`) and every check of them (:func:`check`, before anything loads;
:func:`check_loaded`, once the model is loaded and before any fit)."""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from galinear.compress.methods import catalogue as methods
from galinear.compress.methods import records
from galinear.lm import models, sources

_DEFAULT_HIDDEN = methods.DEFAULT_ROTOR_HIDDEN


@dataclass
class StudyConfig:
    """Settings of one study; every field that changes a result enters a cache key."""

    model: str = sources.DEFAULT_MODEL
    gguf_file: str | None = None
    datasets: tuple = ("wikipedia",)
    layer_sets: tuple = ((15,),)
    methods: tuple = ("rotor", "lr1", "lr4", "bh1")
    seeds: tuple = (0,)
    multi_seeds: tuple | None = None  # seeds for sets of 2+ layers (None: same as seeds)
    train_windows: int = 24            # per text
    eval_windows: int = 8              # per text (held-out, whole runs of `group`)
    mse_windows: int = 2               # held-out windows per text used for test MSE
    window: int = 512
    stride: int = 256
    heldout_fraction: float = 0.2
    group: int = 4
    split_seed: int = 0
    epochs: float = 1.0
    hidden: int = _DEFAULT_HIDDEN
    bh_blocks: int | None = None       # bh1 (monarch and bhh: methods.default_blocks, or set by budget)
    rank: int | None = None            # lr, lr-cf (None: methods.DEFAULT_LOW_RANK)
    terms: int | None = None           # kron, kron-cf (None: methods.DEFAULT_KRONECKER_TERMS)
    chunk: int | None = None           # rotor, givens: the gadgets' chunk size (None: the largest that fits)
    budget: float | None = None        # a fraction of each projection's dense parameters, for every method
                                       # with a size knob (methods.KNOBS); the knob is set to match it
    refit_o_proj: bool = False
    o_epochs: float = 15.0
    out_dir: str = os.path.join("runs", "compress")
    cache_dir: str | None = None       # --cache: fits and captures (default out_dir/cache); two studies that
                                       # differ only in the o_proj refit can share one (first-layer fits reused)
    threads: int | str | None = None
    progress: bool = True              # tqdm bars on a terminal; one line per unit otherwise
    verbose: bool = True               # one timed line per stage on stderr
    save_models: bool = True
    text_files: tuple = ()             # ((name, path), ...): user texts; their names are in datasets
    text_field: str | None = None      # the field of jsonl text files
    until_converged: bool = False      # Adam fits stop on a validation plateau (galinear.compress.fitting.converge)
    max_steps: int = 2000              # step budget of a converged fit
    eval_every: int = 25               # steps between validation evaluations
    patience: int = 4                  # evaluations without improvement before a decay / the stop
    valid_windows: int = 2             # validation windows per text (spare training-side windows)
    save_dir: str | None = None        # --save: one loadable folder per compressed model (storage.folder_format)
    objective: str = "qkv"             # --objective: attention / logits fit q, k, v jointly (compress.objective)
    shard_windows: int | None = None   # --shard-windows: captures on disk in shards of this many windows
                                       # (None: in memory); the results are the same, bit for bit
    wikitext: str = "off"              # --wikitext: the whole WikiText-2 test split as the standard measure
                                       # (galinear.lm.wikitext): "auto" (when the packaged file is there),
                                       # "file" (required), "hub" (download) or "off"; `galinear compress` says auto
    wikitext_window: int = 2048        # tokens per non-overlapping WikiText-2 window (less if the model's context is)
    wikitext_windows: int | None = None  # --wikitext-windows: score only this many windows, spread evenly over the
                                       # split (a stated subset for quick comparisons; None: the whole split)
    distill: bool = False              # --distill: a final stage fits all replacements jointly (KL to the original)
    distill_lr: float = 1e-3           # its Adam rate
    distill_max_steps: int = 200       # its step budget (one calibration window per step)
    distill_eval_every: int = 10       # steps between its validation checks (stopping rule: patience as above)
    targets: tuple = models.PROJECTIONS  # --targets: the projections replaced in each layer (q/k/v/o, gate/up/down;
                                       # galinear.compress.methods.targets), fitted in forward order
    overwrite: bool = False            # --overwrite: this study replaces another one's results in out_dir and its
                                       # models in save_dir (galinear.compress.study.folders); else it is refused

    @property
    def draws_valid(self) -> bool:
        """Whether validation windows are drawn (the stopping rule of the fits or of the distillation)."""
        return bool(self.until_converged or self.distill)

    def method_spec(self, name: str) -> methods.MethodSpec:
        """The MethodSpec of method ``name`` in this study: the size settings its record takes
        (:data:`galinear.compress.methods.records.OPTION_FIELDS`), the stopping rule for an Adam fit
        with until_converged and for a fit on moments, the objective for an Adam fit."""
        record = records.method(name)
        converged = (self.until_converged and record.adam_fitted) or record.fit == records.MOMENTS
        sizes = {spec_field: getattr(self, field) for option, field, spec_field in records.OPTION_FIELDS
                 if option in record.options}
        return methods.MethodSpec(name=name, epochs=self.epochs, **{"hidden": None, **sizes},
                                  max_steps=self.max_steps if converged else None,
                                  eval_every=self.eval_every if converged else None,
                                  patience=self.patience if converged else None,
                                  objective=self.objective if record.adam_fitted else "qkv")

    def seeds_for(self, layer_set) -> tuple:
        if len(layer_set) > 1 and self.multi_seeds is not None:
            return tuple(self.multi_seeds)
        return tuple(self.seeds)



# ---------------------------------------------------------------------------------------------- presets
#: the paper's protocol: one middle layer (15 of SmolLM2's 30), projection MSE, the rotor network against
#: LR1 / LR4 / BH1 both Adam-fitted (until the validation MSE stops improving, at most 256 steps = 8 passes)
#: and at their closed-form optimum (LR1*, LR4*, BH1*), scored on held-out Wikipedia windows
_PAPER = StudyConfig(datasets=("wikipedia",), layer_sets=((15,),),
                     methods=("rotor", "lr1", "lr1-cf", "lr4", "lr4-cf", "bh1", "bh1-cf"), seeds=(0,),
                     multi_seeds=None, train_windows=16, eval_windows=8, mse_windows=2, epochs=1.0,
                     until_converged=True, max_steps=256, eval_every=16, patience=4, wikitext="off",
                     out_dir=os.path.join("runs", "compress-paper"))

#: ``galinear compress`` without ``--preset``
DEFAULT_PRESET = "standard"

PRESETS = {
    "paper": _PAPER,
    # the paper's protocol, also scored on the whole WikiText-2 test split (the file that ships with
    # galinear when it is installed): the default of `galinear compress`
    "standard": dataclasses.replace(_PAPER, wikitext="auto", out_dir=os.path.join("runs", "compress-standard")),
    # `galinear demo`: the best known recipe (docs/results.md, "Four consecutive layers ...") cut to about
    # ten minutes on 2 cores: two consecutive layers replaced in order, q/k/v fitted jointly to each layer's
    # attention output, then all replacements distilled jointly to the original's next-token distribution;
    # the rotor network against the one-term Kronecker sum and LR* at about 0.5 % of the dense q/k/v;
    # scored on 3 of the 148 WikiText-2 test windows (spread over the split) and 4 held-out Wikipedia windows
    # (sizes and times: docs/compress.md, "Presets")
    "demo": StudyConfig(datasets=("wikipedia",), layer_sets=((12, 13),), methods=("rotor", "kron", "lr-cf"),
                        seeds=(0,), hidden=512, rank=1, terms=1, objective="attention", train_windows=8,
                        eval_windows=4, mse_windows=2, valid_windows=2, until_converged=True, max_steps=64,
                        eval_every=16, patience=4, distill=True, distill_max_steps=12, distill_eval_every=4,
                        wikitext="file", wikitext_windows=3, out_dir=os.path.join("runs", "compress-demo")),
    # the study of docs/results.md: three single layers (3 seeds), one pair and one triple (1 seed)
    # (sized for 2 shared CPU cores: see docs/results.md)
    "full": StudyConfig(datasets=("wikipedia", "shakespeare", "kjv"),
                        layer_sets=((8,), (16,), (24,), (16, 17), (16, 17, 18)),
                        methods=_PAPER.methods, seeds=(0, 1, 2), multi_seeds=(0,), train_windows=2,
                        eval_windows=2, mse_windows=1, epochs=1.0, until_converged=False, max_steps=2000,
                        eval_every=25, patience=4, out_dir=os.path.join("runs", "compress-full")),
    # the converged study (make study-converged; wall time in docs/compress.md): seven single layers over
    # the depth (8, 16 and 24 of the small study among them) with 3 seeds, the pair and the triple at 16
    # with seed 0, all three texts, 16 training windows per text (24,576 rows), Adam fits until the
    # validation MSE stops improving (at most 600 steps, about 6 passes), baselines also in closed form
    "converged": StudyConfig(datasets=("wikipedia", "shakespeare", "kjv"),
                             layer_sets=((2,), (8,), (12,), (16,), (20,), (24,), (28,), (16, 17), (16, 17, 18)),
                             methods=_PAPER.methods, seeds=(0, 1, 2), multi_seeds=(0,), train_windows=16,
                             eval_windows=4, mse_windows=2, epochs=1.0, until_converged=True, max_steps=600,
                             eval_every=25, patience=4, out_dir=os.path.join("runs", "compress-converged")),
}


def preset(name: str) -> StudyConfig:
    """A copy of the preset ``name`` of :data:`PRESETS` (the command line starts from it and replaces
    the fields whose options are given)."""
    if name not in PRESETS:
        raise ValueError(f"no preset {name!r}; the presets are {', '.join(sorted(PRESETS))}")
    return dataclasses.replace(PRESETS[name])


# ----------------------------------------------------------------------------------------------- checks
#: Seeds accepted by --seeds / --multi-seeds: every random generator the study seeds takes them.
SEED_LIMIT = 2**32 - 1


def _positive_int(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= 1


def check(c: StudyConfig, loaded=None, texts: dict | None = None) -> None:
    """Refuse, with a one-line ValueError naming the setting (and its option), every setting that
    can be told wrong before the model and the texts load; ``loaded`` (a model given instead of
    ``c.model``) skips the checks of the model's path, ``texts`` those of the built-in corpora.
    The checks that need the loaded model are :func:`check_loaded`."""
    from galinear.compress.study import sequential, folders as study_folders
    from galinear.compress.methods import targets
    from galinear.lm import wikitext

    if not c.datasets:
        raise ValueError("no text given: pass at least one of wikipedia, shakespeare, kjv")
    if not c.methods:
        raise ValueError(f"no method given: pass one or more of {', '.join(methods.METHODS)}")
    if not c.layer_sets:
        raise ValueError("no layer set given")
    if not c.seeds:
        raise ValueError("no seed given")
    for what, values in (("method", tuple(c.methods)), ("seed", tuple(c.seeds)),
                         ("seed of --multi-seeds", tuple(c.multi_seeds or ())),
                         ("layer set", tuple(tuple(s) for s in c.layer_sets))):
        repeated = [v for i, v in enumerate(values) if v in values[:i]]
        if repeated:
            shown = ",".join(map(str, repeated[0])) if isinstance(repeated[0], tuple) else repeated[0]
            raise ValueError(f"{what} {shown} is given twice; each runs once, so drop the repeat")
    for flag, seeds in (("--seeds", c.seeds), ("--multi-seeds", c.multi_seeds or ())):
        for seed in seeds:
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_LIMIT:
                raise ValueError(f"{flag}: seed {seed} is out of range; seeds are integers in 0..{SEED_LIMIT} "
                                 "(2**32 - 1)")
    negative = [i for s in c.layer_sets for i in s if isinstance(i, int) and i < 0]
    if negative:
        raise ValueError(f"layer index {negative[0]} is negative; layers are numbered from 0")
    for s in c.layer_sets:
        if len(s) == 0:
            raise ValueError("an empty layer set was given")
        if tuple(s) != (sequential.ALL,) and list(s) != sorted(set(s)):
            raise ValueError(f"layer set {list(s)} must be strictly increasing (layers are replaced in order)")
    if isinstance(c.window, bool) or not isinstance(c.window, int) or c.window < 2:
        raise ValueError(f"window must be an integer >= 2 (tokens per window), got {c.window!r}")
    if isinstance(c.stride, bool) or not isinstance(c.stride, int) or not 1 <= c.stride <= c.window:
        raise ValueError(f"stride must be an integer in 1..window ({c.window}), got {c.stride!r}")
    for name in ("train_windows", "eval_windows", "mse_windows", "group", "hidden"):
        if not _positive_int(getattr(c, name)):
            raise ValueError(f"{name} must be a positive integer, got {getattr(c, name)!r}")
    for name, flag in (("bh_blocks", "--bh-blocks"), ("rank", "--rank"), ("terms", "--terms"),
                       ("threads", "--threads")):
        value = getattr(c, name)
        if value is not None and not _positive_int(value) and not (name == "threads" and value == "auto"):
            what = "a positive integer or 'auto'" if name == "threads" else "a positive integer"
            raise ValueError(f"{flag} must be {what}, got {value!r}")
    if c.chunk is not None and (not _positive_int(c.chunk) or c.chunk < 4 or c.chunk & (c.chunk - 1)):
        raise ValueError(f"--chunk must be a power of two >= 4 (e.g. 64 or 128), got {c.chunk!r}")
    if c.budget is not None and not (isinstance(c.budget, (int, float)) and 0 < c.budget <= 1):
        raise ValueError(f"--budget must be a fraction in (0, 1] of the dense parameters (0.02 for 2 %), "
                         f"got {c.budget!r}")
    if c.shard_windows is not None and not _positive_int(c.shard_windows):
        raise ValueError(f"shard_windows must be a positive integer (windows per capture shard on disk) or None "
                         f"(captures held in memory), got {c.shard_windows!r}")
    for name in ("epochs", "o_epochs"):
        value = getattr(c, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if not 0 < c.heldout_fraction < 1:
        raise ValueError(f"heldout_fraction must lie in (0, 1), got {c.heldout_fraction!r}")
    if c.until_converged:
        for name in ("max_steps", "eval_every", "patience", "valid_windows"):
            if not _positive_int(getattr(c, name)):
                raise ValueError(f"{name} must be >= 1 with until_converged, got {getattr(c, name)}")
    if c.distill:
        for name in ("patience", "valid_windows"):
            if not _positive_int(getattr(c, name)):
                raise ValueError(f"{name} must be >= 1 with the distillation stage, got {getattr(c, name)}")
        for name in ("distill_max_steps", "distill_eval_every"):
            if not _positive_int(getattr(c, name)):
                raise ValueError(f"{name} must be a positive integer, got {getattr(c, name)!r}")
        if not (isinstance(c.distill_lr, (int, float)) and math.isfinite(c.distill_lr) and c.distill_lr > 0):
            raise ValueError(f"distill_lr must be a finite number > 0, got {c.distill_lr!r}")
        if all(m in records.RECORDS and records.RECORDS[m].fit == records.NO_FIT for m in c.methods):
            raise ValueError("the zero baseline has no parameters to distill; drop --distill or add a method")
    wikitext.check_ready(c.wikitext)
    if c.wikitext == "auto" and not wikitext.available() and (c.wikitext_windows is not None
                                                               or c.wikitext_window != StudyConfig.wikitext_window):
        raise ValueError("--wikitext-windows and --wikitext-window size the WikiText-2 evaluation, but with "
                         f"--wikitext auto it is skipped here: {wikitext.data_path()} is missing. Restore the file "
                         "(reinstall galinear), use --wikitext hub with a network, or drop those options")
    if isinstance(c.wikitext_window, bool) or not isinstance(c.wikitext_window, int) or c.wikitext_window < 2:
        raise ValueError(f"wikitext_window must be an integer >= 2 (tokens per window), got {c.wikitext_window!r}")
    if c.wikitext_windows is not None and not _positive_int(c.wikitext_windows):
        raise ValueError(f"wikitext_windows must be a positive integer (WikiText-2 windows scored, spread over the "
                         f"split) or None (the whole split), got {c.wikitext_windows!r}")
    for name in c.methods:
        c.method_spec(name)  # raises for an unknown method
    if c.refit_o_proj and "o_proj" in targets.check(c.targets):
        raise ValueError("--refit-o-proj refits a dense o_proj behind each replaced layer, but --targets replaces "
                         "o_proj itself; drop one of them")
    _check_texts(c, texts)
    for flag, path in (("--out", c.out_dir), ("--cache", c.cache_dir), ("--save", c.save_dir)):
        problem = path is not None and _folder_problem(flag, path)
        if problem:
            raise ValueError(problem)
    if loaded is None:
        problem = _model_problem(c.model, c.gguf_file)
        if problem:
            raise ValueError(problem)
        shapes = _config_qkv_shapes(c)
        problem = shapes is not None and _bh_blocks_problem(c, shapes)
        if problem:
            raise ValueError(problem)
        count = models.layer_count(c.model, c.gguf_file)  # from the model's configuration (no weights)
        if count is not None:
            models.check_layer_range(sequential.expand_layer_sets(c.layer_sets, count), count)
    study_folders.check(c)  # --out and --save hold no other study's results (unless overwrite)


def check_loaded(c: StudyConfig, model, given: bool) -> None:
    """The checks that need the loaded ``model`` (before any fit): --bh-blocks against the q/k/v
    widths of the layers replaced, where :func:`check` could not read them from the model's
    config.json (``given``: the model was passed in, not loaded from ``c.model``)."""
    if given or _config_qkv_shapes(c) is None:
        problem = _bh_blocks_problem(c, qkv_shapes(model, c.layer_sets))
        if problem:
            raise ValueError(problem)


def _check_texts(c: StudyConfig, texts) -> None:
    from galinear.lm.wikitext import check_not_wikitext
    from galinear.data.text import check_available, check_text_file

    files = dict(c.text_files)
    for path in files.values():
        check_text_file(path, c.text_field)
    check_not_wikitext(files.values())  # calibration never uses the evaluation text
    if texts is None:
        for name in c.datasets:
            if name not in files:
                check_available(name)
    else:
        missing = [d for d in c.datasets if d not in texts and d not in files]
        if missing:
            raise ValueError(f"no text given for {missing}")


def qkv_shapes(model, layer_sets) -> list:
    """``[(name, d_in, d_out, layer), ...]`` of the q/k/v projections of the layers of ``layer_sets``
    in a loaded causal LM."""
    out = []
    for layer in sorted({layer for s in layer_sets for layer in s}):
        for name in ("q_proj", "k_proj", "v_proj"):
            d_out, d_in = models.projection(model, layer, name).weight.shape
            out.append((name, d_in, d_out, layer))
    return out


def _config_qkv_shapes(c: StudyConfig):
    """The q/k/v shapes of a standard attention from a save_pretrained config.json, or None where
    they are not told cheaply (a GGUF file, a hub name, the embedded model, an unreadable file)."""
    from galinear import _io

    if c.gguf_file is not None or not os.path.isdir(str(c.model)):
        return None
    try:
        config = _io.load_json(os.path.join(c.model, "config.json"), max_bytes=models.CONFIG_BYTES)
        d_model, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        head_dim = int(config.get("head_dim") or d_model // heads)
        kv_heads = int(config.get("num_key_value_heads") or heads)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, ZeroDivisionError):
        return None
    return [("q_proj", d_model, heads * head_dim, None), ("k_proj/v_proj", d_model, kv_heads * head_dim, None)]


def _bh_blocks_problem(c: StudyConfig, shapes):
    """Why --bh-blocks does not divide one of ``shapes`` (:func:`qkv_shapes`), or None (also when no
    bh1 method is asked or the blocks are left to the default)."""
    blocks = c.bh_blocks
    if blocks is None or not any("--bh-blocks" in records.method(m).options for m in c.methods
                                 if m in records.RECORDS):
        return None
    for name, d_in, d_out, layer in shapes:
        if d_in % blocks or d_out % blocks:
            where = "" if layer is None else f" of layer {layer}"
            return (f"--bh-blocks {blocks} does not divide the {name} shape {d_in} -> {d_out}{where}; "
                    f"pick a common divisor of {d_in} and {d_out}")
    return None


def _folder_problem(flag: str, path: str):
    """Why ``path`` cannot be the folder of ``flag`` (written into), or None; nothing is created."""
    import tempfile

    if os.path.exists(path) and not os.path.isdir(path):
        return f"{flag} {path} is a file, not a folder; choose a folder"
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        return f"{flag} {path} lies under {probe}, which is a file; choose a folder"
    try:
        tempfile.TemporaryFile(dir=probe).close()
    except OSError as error:
        return f"cannot write into {flag} {path} ({error.strerror} in {probe}); choose a folder you can write to"
    return None


def _model_problem(model: str, gguf_file):
    """Why --model (and --gguf-file) cannot name a local model, or None (a hub name is left to the loader)."""
    model = str(model)
    if os.path.isfile(model):
        with open(model, "rb") as handle:
            head = handle.read(4)
        if head != b"GGUF":
            return (f"--model {model} is a file but not a GGUF model (it does not start with 'GGUF'); pass a "
                    "save_pretrained folder, a folder with --gguf-file NAME, or a .gguf file")
        return None
    if os.path.isdir(model):
        if gguf_file is not None and not os.path.isfile(os.path.join(model, gguf_file)):
            return f"--gguf-file {gguf_file} not found in the --model folder {model}"
        if gguf_file is None and not os.path.isfile(os.path.join(model, "config.json")):
            return (f"--model {model} is a folder without config.json, so not a save_pretrained folder; for a GGUF "
                    "file inside it add --gguf-file NAME")
        return None
    if os.path.lexists(model) or model.lower().endswith(".gguf") or model.startswith((".", os.sep, "~")):
        return f"--model {model}: no such file or folder; check the path"
    return None
