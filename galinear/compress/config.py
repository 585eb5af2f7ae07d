"""The settings of a compression study (:class:`StudyConfig`) and the checks run before any loading."""
from __future__ import annotations

import os
from dataclasses import dataclass

from galinear.compress import methods
from galinear.lm import models

_DEFAULT_HIDDEN = methods.DEFAULT_ROTOR_HIDDEN


@dataclass
class StudyConfig:
    """Settings of one study; every field that changes a result enters a cache key."""

    model: str = models.DEFAULT_MODEL
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
    threads: int | None = None
    progress: bool = True              # tqdm bars on a terminal; one line per unit otherwise
    verbose: bool = True               # one timed line per stage on stderr
    save_models: bool = True
    text_files: tuple = ()             # ((name, path), ...): user texts; their names are in datasets
    text_field: str | None = None      # the field of jsonl text files
    until_converged: bool = False      # Adam fits stop on a validation plateau (galinear.compress.converge)
    max_steps: int = 2000              # step budget of a converged fit
    eval_every: int = 25               # steps between validation evaluations
    patience: int = 4                  # evaluations without improvement before a decay / the stop
    valid_windows: int = 2             # validation windows per text (spare training-side windows)
    save_dir: str | None = None        # --save: one loadable folder per compressed model (galinear.compress.saving)
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
                                       # galinear.compress.targets), fitted in forward order
    overwrite: bool = False            # --overwrite: this study replaces another one's results in out_dir and its
                                       # models in save_dir (galinear.compress.study_folders); else it is refused

    @property
    def draws_valid(self) -> bool:
        """Whether validation windows are drawn (the stopping rule of the fits or of the distillation)."""
        return bool(self.until_converged or self.distill)

    def method_spec(self, name: str) -> methods.MethodSpec:
        converged = (self.until_converged and name not in ("zero",) and not name.endswith("-cf")) or name == "rotorlin-m"
        base = methods.base_name(name)
        return methods.MethodSpec(name=name, epochs=self.epochs,
                                  hidden=self.hidden if base in ("rotor", "givens") else None,
                                  blocks=self.bh_blocks if base == "bh1" else None,
                                  rank=self.rank if base == "lr" else None,
                                  terms=self.terms if base == "kron" else None,
                                  chunk=self.chunk if base in ("rotor", "givens") else None,
                                  budget=self.budget if base in methods.KNOBS else None,
                                  max_steps=self.max_steps if converged else None,
                                  eval_every=self.eval_every if converged else None,
                                  patience=self.patience if converged else None,
                                  objective="qkv" if name == "zero" or name.endswith("-cf") or name == "rotorlin-m"
                                  else self.objective)

    def seeds_for(self, layer_set) -> tuple:
        if len(layer_set) > 1 and self.multi_seeds is not None:
            return tuple(self.multi_seeds)
        return tuple(self.seeds)


def validate_request(c: StudyConfig, loaded) -> None:
    """Refuse, before any loading, what needs neither the model nor the texts to be told wrong."""
    import math

    if not c.methods:
        raise ValueError(f"no method given: pass one or more of {', '.join(methods.METHODS)}")
    for what, values in (("method", tuple(c.methods)), ("seed", tuple(c.seeds)),
                         ("seed of --multi-seeds", tuple(c.multi_seeds or ())),
                         ("layer set", tuple(tuple(s) for s in c.layer_sets))):
        repeated = [v for i, v in enumerate(values) if v in values[:i]]
        if repeated:
            shown = ",".join(map(str, repeated[0])) if isinstance(repeated[0], tuple) else repeated[0]
            raise ValueError(f"{what} {shown} is given twice; each runs once, so drop the repeat")
    if isinstance(c.window, bool) or not isinstance(c.window, int) or c.window < 2:
        raise ValueError(f"window must be an integer >= 2 (tokens per window), got {c.window!r}")
    if isinstance(c.stride, bool) or not isinstance(c.stride, int) or not 1 <= c.stride <= c.window:
        raise ValueError(f"stride must be an integer in 1..window ({c.window}), got {c.stride!r}")
    for name in ("train_windows", "eval_windows", "mse_windows", "group", "hidden"):
        value = getattr(c, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    for name in ("bh_blocks", "threads"):
        value = getattr(c, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    if c.shard_windows is not None and (isinstance(c.shard_windows, bool) or not isinstance(c.shard_windows, int)
                                        or c.shard_windows < 1):
        raise ValueError(f"shard_windows must be a positive integer (windows per capture shard on disk) or None "
                         f"(captures held in memory), got {c.shard_windows!r}")
    for name in ("epochs", "o_epochs"):
        value = getattr(c, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if not 0 < c.heldout_fraction < 1:
        raise ValueError(f"heldout_fraction must lie in (0, 1), got {c.heldout_fraction!r}")
    from galinear.compress import sequential
    from galinear.lm import wikitext

    wikitext.check_ready(c.wikitext)
    if isinstance(c.wikitext_window, bool) or not isinstance(c.wikitext_window, int) or c.wikitext_window < 2:
        raise ValueError(f"wikitext_window must be an integer >= 2 (tokens per window), got {c.wikitext_window!r}")
    if c.wikitext_windows is not None and (isinstance(c.wikitext_windows, bool) or not isinstance(c.wikitext_windows, int)
                                           or c.wikitext_windows < 1):
        raise ValueError(f"wikitext_windows must be a positive integer (WikiText-2 windows scored, spread over the "
                         f"split) or None (the whole split), got {c.wikitext_windows!r}")
    if c.distill:
        for name in ("distill_max_steps", "distill_eval_every"):
            value = getattr(c, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (isinstance(c.distill_lr, (int, float)) and math.isfinite(c.distill_lr) and c.distill_lr > 0):
            raise ValueError(f"distill_lr must be a finite number > 0, got {c.distill_lr!r}")
    negative = [i for s in c.layer_sets for i in s if isinstance(i, int) and i < 0]
    if negative:
        raise ValueError(f"layer index {negative[0]} is negative; layers are numbered from 0")
    if loaded is None:  # the layer count, from the model's configuration (no weights loaded)
        count = models.layer_count(c.model, c.gguf_file)
        if count is not None:
            models.check_layer_range(sequential.expand_layer_sets(c.layer_sets, count), count)
    from galinear.compress import study_folders

    study_folders.check(c)  # --out and --save hold no other study's results (unless overwrite)


def validate_cheap(c: StudyConfig, texts) -> None:
    """Refuse empty or unordered layer sets, unknown methods and missing texts (nothing loaded yet)."""
    if not c.datasets:
        raise ValueError("no text given: pass at least one of wikipedia, shakespeare, kjv")
    if not c.layer_sets:
        raise ValueError("no layer set given")
    for s in c.layer_sets:
        if len(s) == 0:
            raise ValueError("an empty layer set was given")
        if tuple(s) == ("all",):  # every layer, in order (galinear.compress.sequential)
            continue
        if list(s) != sorted(set(s)):
            raise ValueError(f"layer set {list(s)} must be strictly increasing (layers are replaced in order)")
    for name in c.methods:
        c.method_spec(name)  # raises for an unknown method
    from galinear.compress import targets

    if c.refit_o_proj and "o_proj" in targets.check(c.targets):
        raise ValueError("--refit-o-proj refits a dense o_proj behind each replaced layer, but --targets replaces "
                         "o_proj itself; drop one of them")
    if not c.seeds:
        raise ValueError("no seed given")
    from galinear.data.text import check_available, check_text_file

    from galinear.lm.wikitext import check_not_wikitext

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
    if c.train_windows < 1 or c.eval_windows < 1:
        raise ValueError("train_windows and eval_windows must be >= 1")
    if c.until_converged:
        for name in ("max_steps", "eval_every", "patience", "valid_windows"):
            if getattr(c, name) < 1:
                raise ValueError(f"{name} must be >= 1 with until_converged, got {getattr(c, name)}")
    if c.distill:
        for name in ("patience", "valid_windows"):
            if getattr(c, name) < 1:
                raise ValueError(f"{name} must be >= 1 with the distillation stage, got {getattr(c, name)}")
        if "zero" in c.methods and len(c.methods) == 1:
            raise ValueError("the zero baseline has no parameters to distill; drop --distill or add a method")
