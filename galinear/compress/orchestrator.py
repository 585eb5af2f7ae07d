"""The layer-wise compression study: capture, fit, evaluate, report; resumable.

Protocol (paper-notes section 6, with its leaks fixed):

1. Every text is tokenised once and cut into windows (512 tokens, stride 256); held-out windows
   are seeded random runs, and every training window sharing a token position with one of them
   is dropped (:func:`galinear.lm.windows.split_windows`). The regression rows are all
   tokens of the training windows of every text in the study (the same rows for every method).
2. For one method, seed and layer set, the layers are replaced in increasing order. For layer L
   the inputs are the inputs of the replaced projections at L captured in the network whose earlier
   layers of the set are already replaced BY THIS METHOD AND SEED; the targets are the ORIGINAL
   model's outputs of those projections (q/k/v by default, ``--targets``): the original weights
   applied to the original inputs. A capture is cached
   under the exact network it came from (method tag, seed, replaced layers), so no method ever
   trains on another method's activations; with nothing replaced yet that network is the
   original model, whose capture is the same for every method.
3. Each (layer, projection) is fitted with MSE, Adam, batches of 256 and the method's rate: for a
   fixed number of passes under a cosine schedule (:mod:`galinear.compress.fitting.projection`), or
   with ``--until-converged`` (the presets but full) until the validation MSE stops improving, the rate
   decayed on each plateau (:mod:`galinear.compress.fitting.converge`); the ``-cf`` methods and
   rotorlin-m from second moments (:mod:`galinear.compress.fitting.closed_form`); with
   ``--objective attention`` / ``logits`` a layer's targets jointly to the block's output
   (:mod:`galinear.compress.fitting.objective`). Optionally o_proj is refitted
   (a dense o_proj started from the original one, AdamW 1e-4, weight decay 1e-2) to the original
   o_proj outputs. Each unit draws its initialisation and batch order from its own seed
   (:func:`galinear.compress.fitting.seeds.fit_seed`) and is checkpointed atomically; a rerun skips finished units.
4. ln PPL is measured on the held-out windows of every text, for the original model and every
   compressed one, on the same windows; per-projection test MSE on held-out rows.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from galinear.compress.fitting import activations, distill, heldout_error, surgery
from galinear.compress.methods import catalogue as methods
from galinear.compress.methods import records
from galinear.compress.methods import targets as targeting
from galinear.compress.report import summary as reporting
from galinear.compress.storage import folder_format
from galinear.compress.storage.store import Store, fingerprint, set_name
from galinear.compress.study import distributed, layers, scoring, sequential
from galinear.compress.study import folders as study_folders, units as study_units
from galinear.compress.study.captures import Captures
from galinear.compress.study.config import StudyConfig, check, check_loaded
from galinear.compress.study.values import Fitting, LayerSetFit, Log, show_bars
from galinear.lm import models
from galinear.optim import threads as thread_policy
from galinear.lm import windows as win


def _load_text(name: str, files: dict, config: StudyConfig) -> str:
    """The text ``name``: a --text file, or a built-in corpus."""
    if name in files:
        from galinear.data.text import load_text_file

        return load_text_file(files[name], config.text_field)
    from galinear.data.text import load_text

    return load_text(name)


def split_text(name: str, tokens, config: StudyConfig, bos=None, upper_bound: bool = False) -> win.Windows:
    """The windows of one text, split as ``config`` says; a text too short for a window, for a
    train / held-out split, for --train-windows or for the validation windows of the stopping rules
    raises ValueError naming the text and the option to change. ``upper_bound``: ``tokens`` holds as
    many tokens as the text can give at most (checked before the tokenizer is loaded)."""
    counted = f"at most {len(tokens):,} tokens (one per UTF-8 byte)" if upper_bound else f"{len(tokens):,} tokens"
    if len(tokens) < config.window:
        raise ValueError(f"the {name} text has {counted}, fewer than one window of {config.window}; give a longer text "
                         "or a smaller --window")
    try:
        windows = win.split_windows(tokens, config.window, config.stride, config.heldout_fraction, config.split_seed,
                                    config.group, max_train=config.train_windows, max_heldout=config.eval_windows,
                                    max_valid=config.valid_windows if config.draws_valid else None, bos=bos)
    except ValueError as error:
        raise ValueError(f"the {name} text, {counted}: {error} (--window {config.window}, --stride "
                         f"{config.stride})") from None
    train, spare = len(windows.train), config.draws_valid and not len(windows.valid)
    if train < config.train_windows or spare:
        rules = " and ".join(rule for rule, on in (("the stopping rule of --until-converged", config.until_converged),
                                                   ("--distill", config.distill)) if on)
        most = train - 1 if config.draws_valid else train
        fix = f"give --train-windows {most} or fewer, or a longer text" if most >= 1 else "give a longer text"
        why = (f"the {name} text gives {'at most ' if upper_bound else ''}{train} training windows beside its held-out "
               f"ones ({counted}, --window {config.window}, --stride {config.stride})")
        if train < config.train_windows:
            raise ValueError(f"--train-windows {config.train_windows}: {why}" + (
                f", one of which {rules} needs for validation" if config.draws_valid else "")
                + f"; {fix}")
        raise ValueError(f"--train-windows {config.train_windows} takes every training window of the {name} text "
                         f"({train}), leaving none for the validation windows {rules} draws; {fix}")
    return windows


class Study:
    """A resumable compression study. ``Study(config).run()`` does everything.

    The study sets the process's thread counts (``config.threads``) when it is made;
    :meth:`close`, or the end of a ``with Study(config) as study:`` block, gives the process its
    own back.

    The orchestrator: it loads the model and the texts, builds the plain values the steps read
    (the :class:`~galinear.compress.storage.store.Store`, the captures cache
    :attr:`captures`, the :attr:`fitting` values of the fits) and passes them in; the planner of
    the study's units (:mod:`galinear.compress.study.units`), the fits
    (:mod:`galinear.compress.study.layers`) and the scoring (:mod:`galinear.compress.study.scoring`)
    never see the Study. It does the units of the one graph the planner gives, in order in a single
    process and shared out stage by stage under torchrun.

    Parameters
    ----------
    config : StudyConfig
    loaded : LoadedModel, optional
        An already loaded model (tests pass a tiny random Llama); default: ``config.model``.
    texts : dict, optional
        ``{name: text}`` to use instead of the offline corpora (tests).
    """

    def __init__(self, config: StudyConfig, loaded: models.LoadedModel | None = None, texts: dict | None = None):
        self.config = config
        self.ranks = distributed.current()
        self.log = Log(config.verbose, self.ranks.rank if self.ranks.size > 1 else None)
        check(config, loaded, texts)
        self._outside = thread_policy.snapshot()  # what close() gives back
        try:
            self._start(config, loaded, texts)
        except BaseException:  # a study that could not be made gives the threads back at once
            self.close()
            raise

    def _start(self, config: StudyConfig, loaded, texts) -> None:
        """The work of making the study (its thread counts first), after the checks."""
        asked = config
        self.governor = None
        if config.threads == "auto":  # every fit's and distillation's steps at the count measured fastest
            # calibrated now: the model load, captures and evaluations run at its count
            self.governor = thread_policy.install(distributed.default_threads(self.ranks))
        threads = None if config.threads == "auto" else config.threads or distributed.default_threads(self.ranks)
        if threads:  # torch's and numba's pools alike: oversubscribed OpenMP pools spin against each other
            thread_policy.set_counts(threads)
        files = dict(config.text_files)
        raw = {name: texts[name] if texts is not None and name in texts else _load_text(name, files, config)
               for name in config.datasets}
        budget = config.stride * (3 * config.train_windows + 4 * config.eval_windows + 4 * config.group + 8)
        for name, text in raw.items():  # before the model loads: no text gives more tokens than UTF-8 bytes
            if not isinstance(text, str) or not text:
                raise ValueError(f"the {name} text is empty; give a text with at least one window of "
                                 f"{config.window} tokens")
            most = budget + config.window if len(text) >= budget + config.window else len(text.encode("utf-8", "replace"))
            split_text(name, np.zeros(most, dtype=np.int64), config, upper_bound=True)
        self.loaded = loaded if loaded is not None else models.load_model(config.model, config.gguf_file)
        self._model_source = (config.model, config.gguf_file) if loaded is None else (None, None)
        self.log(f"model {self.loaded.name} loaded")
        self.model = self.loaded.model
        if sequential.has_all(config.layer_sets):  # --layers all: every decoder layer, in order
            config = self.config = dataclasses.replace(config, layer_sets=sequential.expand_layer_sets(
                config.layer_sets, len(models.decoder_layers(self.model))))
        all_layers = sorted({layer for s in config.layer_sets for layer in s})
        models.check_model(self.model, all_layers, config.targets)
        for s in config.layer_sets:
            models.check_model(self.model, list(s), config.targets)
        check_loaded(config, self.model, given=loaded is not None)  # before any fit
        self.windows = {}
        bos = win.bos_token(self.loaded.tokenizer)
        if bos is not None:
            self.log(f"the tokenizer adds a BOS token (id {bos}): every window starts with it")
        for name, text in raw.items():
            tokens = win.tokenize(self.loaded.tokenizer, text, max_tokens=budget + config.window)
            self.windows[name] = split_text(name, tokens, config, bos)
        del raw
        self.log("texts tokenised and split")
        self.store = Store(config, fingerprint(self.model, self.loaded.tokenizer, self.windows, config), self.log)
        if self.ranks.rank == 0:  # --out and --save hold this study only (galinear.compress.study.folders)
            study_folders.claim(asked, self.store.key, self.log)
        self.ranks.barrier()
        self.wikitext = scoring.setup_wikitext(config, self.loaded.tokenizer, self.model, self.store, bos, self.log)
        self.eval_datasets = scoring.eval_datasets(self.wikitext, self.windows)
        self.work, self.results_path = self.store.work, self.store.results_path
        self._load_results()
        first = next(iter(self.windows.values()))
        skip = activations.skip_is_exact(self.model, first.batch(first.heldout[:1])[0], max(1, min(all_layers)))
        self.bars = show_bars(config.progress)
        self.captures = Captures(self.model, self.windows, self.store, mse_windows=config.mse_windows,
                                 shard_windows=config.shard_windows, skip_lower_layers=skip, log=self.log,
                                 bars=self.bars)
        self.fitting = Fitting(self.model, config, self.store, self.captures, self.log, self.bars)
        self._model_params = methods.count_parameters(self.model)

    def close(self) -> None:
        """Give the process back the thread settings it had before this study set its own (torch's and
        numba's counts, the installed governor: :func:`galinear.optim.threads.restore`). The study's
        files stay; ``with Study(config) as study:`` closes it at the end of the block."""
        thread_policy.restore(self._outside)

    def __enter__(self) -> "Study":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _load_results(self) -> None:
        """results.json (and, under torchrun, every rank's file) as they are on disk."""
        rank = self.ranks.rank if self.ranks.size > 1 else None
        self.results, self._own_results = self.store.load_results(self.log, rank)

    def fit_layer_set(self, spec, seed: int, layer_set) -> LayerSetFit:
        """Fit (or load) every unit of ``layer_set`` for one method and seed
        (:func:`galinear.compress.study.layers.fit_layer_set`)."""
        return layers.fit_layer_set(self.fitting, spec, seed, layer_set)

    # ------------------------------------------------------------------ evaluation
    def _evaluated(self, key: str) -> bool:
        return scoring.evaluated(self.results["entries"], key, self.wikitext)

    def _log_perplexity(self, dataset: str, label: str, layer_set=None) -> dict:
        """ln PPL of the model as it stands on ``dataset`` (:func:`galinear.compress.study.scoring.log_perplexity`)."""
        start = None
        if layer_set is not None and dataset in self.windows:
            start = self.captures.start(dataset, layer_set[0])
        return scoring.log_perplexity(self.model, dataset, wiki=self.wikitext, windows=self.windows,
                                      wikitext_windows=self.config.wikitext_windows,
                                      progress=label if self.bars else None, start=start)

    def _record(self, key: str, entry: dict) -> None:
        """Keep one evaluation and write it: to results.json, or under torchrun to this rank's own file."""
        self.results["entries"][key] = entry
        if self.ranks.size > 1:
            self._own_results["entries"][key] = entry
            self.store.save_results(self._own_results, self.ranks.rank)
        else:
            self.store.save_results(self.results)

    def evaluate_original(self, names=None) -> None:
        """ln PPL of the original model on ``names`` (default: WikiText-2 when on, and every text)."""
        for name in self.eval_datasets if names is None else names:
            key = f"original|{name}"
            if self._evaluated(key):
                continue
            res = self._log_perplexity(name, f"eval original {name}")
            self.log(f"evaluated original on {name}: ln PPL {res['log_ppl']:.4f}")
            self._record(key, {"method": "original", "dataset": name, **res})

    def _rows(self, name: str, seed: int, layer_set):
        """(spec, {tag: {dataset: key}}) of the rows one (method, seed, layer set) run reports: the
        fitted row, and the distilled one with --distill."""
        spec = self.config.method_spec(name)
        tags = [spec.tag()]
        if self.config.distill and spec.method.fit != records.NO_FIT:
            tags.append(f"{spec.tag()}-{distill.settings_tag(self.config)}")
        return spec, {t: {d: f"{t}|s{seed}|{set_name(layer_set)}|{d}" for d in self.eval_datasets} for t in tags}

    def pending(self, name: str, seed: int, layer_set) -> bool:
        """Whether a row of this run is not evaluated yet, or one of its models not kept."""
        _, rows = self._rows(name, seed, layer_set)
        if not all(self._evaluated(k) for keys in rows.values() for k in keys.values()):
            return True
        return not all(self.store.model_kept(t, seed, layer_set) for t in rows)

    def run_one(self, name: str, seed: int, layer_set, fitted: LayerSetFit | None = None) -> None:
        """Keep and evaluate one (method, seed, layer set) run when it is pending: its rows (the
        fitted one, and the distilled one with --distill) and models. ``fitted``: its fits, when
        they are at hand; else they are read back from their checkpoints (fitted if missing)."""
        if not self.pending(name, seed, layer_set):
            return
        spec, rows = self._rows(name, seed, layer_set)
        (_, keys), *rest = rows.items()
        distilled = bool(rest)
        dtag, dkeys = rest[0] if distilled else (None, {})
        if fitted is None:
            fitted = layers.fit_layer_set(self.fitting, spec, seed, tuple(layer_set))
        stats, replacements = fitted.stats, fitted.replacements
        targets = self.config.targets
        per_layer_params = sum(stats[(layer_set[0], p)].params for p in targets)
        dense_params = sum(stats[(layer_set[0], p)].dense_params for p in targets)
        mse = {p: float(np.mean([stats[(layer, p)].test_mse for layer in layer_set])) for p in targets}
        rel = {p: float(np.mean([stats[(layer, p)].test_mse / max(stats[(layer, p)].target_mean_square, 1e-30)
                                 for layer in layer_set])) for p in targets}
        fit_seconds = float(sum(s.seconds for s in stats.values()))
        first = layer_set[0]
        curves = {p: stats[(first, p)].curve for p in targets if stats[(first, p)].curve}
        valid_ms = {p: stats[(first, p)].valid_target_mean_square for p in curves}
        if spec.moment_fit:
            how = "closed form"
            if not spec.closed_form:
                steps = [stats[(layer, p)].best_step for layer in layer_set for p in targets]
                span = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}-{max(steps)}"
                how = f"Adam on all-row moments, best step {span} of max {spec.max_steps}"
            if self.config.until_converged:  # the same validation rows as the Adam curves (first layer, q/k/v)
                xv, xv_orig = self.captures.valid(first, {}, None)
                for p in [p for p in targets if p in models.PROJECTIONS]:
                    orig = models.projection(self.model, first, p)
                    target = heldout_error.projection_target(xv_orig, orig)
                    curves[p] = [[0, heldout_error.mse(replacements[(first, p)], xv, target)]]
                    valid_ms[p] = float(target.double().pow(2).mean())
        elif spec.max_steps:
            steps = [stats[(layer, p)].best_step for layer in layer_set for p in targets]
            span = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}-{max(steps)}"
            how = f"Adam, best step {span} of max {spec.max_steps}"
        elif spec.method.fit == records.NO_FIT:
            how = "-"
        else:
            how = f"Adam, {stats[(first, targets[0])].steps} steps"
        if spec.objective != "qkv":
            how += f", {targeting.joint_note(targets, spec.objective)}"
        entry = {"method": name, "tag": spec.tag(), "seed": seed, "layers": list(layer_set),
                 "params_per_layer": per_layer_params, "dense_params_per_layer": dense_params,
                 "test_mse": mse, "test_rel_mse": rel, "fit_seconds": fit_seconds, "fit": how,
                 "blocks": getattr(replacements[(first, targets[0])], "blocks", None),
                 "curves": curves, "valid_target_mean_square": valid_ms,
                 **self._model_share(replacements, stats)}
        self._keep_and_evaluate(spec, seed, layer_set, replacements, spec.tag(), keys, entry)
        if distilled:  # the final joint stage (galinear.compress.fitting.distill), reported as its own row
            captures = self.captures
            modules, dstats = distill.distill_stage(self.model, replacements, captures.train_ids(),
                                                    captures.valid_ids(), self.config, self.store, spec, seed,
                                                    tuple(layer_set), log=self.log, bars=self.bars)
            entry = dict(entry, tag=dtag, fit_seconds=fit_seconds + dstats["seconds"],
                         fit=f"{how}; then all layers distilled jointly (KL, best step {dstats['best_step']} of "
                             f"{dstats['steps']}, validation KL {dstats['valid_kl_start']:.4g} -> {dstats['valid_kl']:.4g})",
                         distill={k: v for k, v in dstats.items()})
            self._keep_and_evaluate(spec, seed, layer_set, modules, dtag, dkeys, entry)

    def _model_share(self, replacements: dict, stats: dict) -> dict:
        """The budget over the whole model: the replaced modules' parameters (all layers) against
        their dense ones, and the share of the whole model's parameters kept."""
        keys = [k for k in replacements if k[1] in self.config.targets]
        replaced = sum(int(stats[k].params) for k in keys)
        dense = sum(int(stats[k].dense_params) for k in keys)
        kept = self._model_params - dense + replaced
        return {"targets": list(self.config.targets), "replaced_params": replaced, "replaced_dense_params": dense,
                "model_params": self._model_params, "model_params_kept": kept,
                "model_share": kept / self._model_params}

    def _keep_and_evaluate(self, spec, seed, layer_set, replacements: dict, tag: str, keys: dict, entry: dict) -> None:
        """Keep one compressed model (its folder, :meth:`galinear.compress.storage.store.Store.model_folder`)
        and record its ln PPL on every measure."""
        folder = self.store.model_folder(tag, seed, layer_set)
        if folder is not None:
            folder_format.save(folder, self.model, replacements, spec, source=self._model_source[0],
                              gguf_file=self._model_source[1], name=self.loaded.name)
            if self.ranks.size == 1:  # under torchrun rank 0 writes the index at the end
                self.store.write_index()
        with surgery.swapped(self.model, replacements):
            for d in self.eval_datasets:
                if self._evaluated(keys[d]):
                    continue
                res = self._log_perplexity(d, f"eval {tag} s{seed} L{set_name(layer_set)} {d}", layer_set)
                self.log(f"evaluated {tag} s{seed} L{set_name(layer_set)} on {d}: ln PPL {res['log_ppl']:.4f}")
                self._record(keys[d], dict(entry, dataset=d, **res))

    def plan(self) -> list:
        """The (method, seed, layer set) runs in execution order.

        First every seed of the first layer set (its seed spread is known early), then the first
        seed of every other set, then their remaining seeds: a partial run covers all sets.
        """
        sets = [tuple(s) for s in self.config.layer_sets]
        seeded = [m for m in self.config.methods if not self.config.method_spec(m).closed_form]
        exact = [m for m in self.config.methods if self.config.method_spec(m).closed_form]
        # closed-form fits do not depend on the seed: they run once per set, with its first seed
        # (after the first seed's Adam fits, whose captures they reuse)
        seeds0 = self.config.seeds_for(sets[0])
        head = [(name, seeds0[0], sets[0]) for name in seeded] + [(name, seeds0[0], sets[0]) for name in exact]
        head += [(name, seed, sets[0]) for seed in seeds0[1:] for name in seeded]
        first = [(name, self.config.seeds_for(s)[0], s) for s in sets[1:] for name in exact + seeded]
        rest = [(name, seed, s) for s in sets[1:] for seed in self.config.seeds_for(s)[1:] for name in seeded]
        return head + first + rest

    def graph(self) -> study_units.Graph:
        """The units of what is left of the study and what each reads
        (:func:`galinear.compress.study.units.plan`), from results.json as it is on disk."""
        self._load_results()
        runs = self.plan()
        pending = {run for run in runs if self.pending(*run)}
        evaluated = {key for key in (f"original|{d}" for d in self.eval_datasets) if self._evaluated(key)}
        return study_units.plan(runs, self.fitting, self.eval_datasets, pending, evaluated)

    def run(self, report: bool = True) -> dict:
        """Do the units of :meth:`graph` in order: the original model's evaluations, then run after
        run of the plan (its fits layer after layer, its evaluation); write the report after each run.

        Under ``torchrun`` (torch.distributed initialised, several ranks) the same units are spread
        over the ranks instead (:meth:`_run_ranks`).
        """
        from tqdm.auto import tqdm

        if self.ranks.size > 1:
            return self._run_ranks(report)
        graph = self.graph()
        (_, original), *runs = graph.runs
        fits, left = {}, graph.consumers()
        for unit in original:
            self._do(unit, fits)
        last_plot = time.perf_counter()
        for number, ((name, seed, layer_set), units) in enumerate(tqdm(runs, desc="study", disable=not self.bars), 1):
            if self.config.progress and not self.bars:
                print(f"[{number}/{len(runs)}] {name} seed {seed} layers {set_name(layer_set)}", flush=True)
            progress = sequential.LayerProgress.of_run(self.config.method_spec(name).tag(), seed, layer_set, self.log)
            for unit in units:
                self._do(unit, fits, progress)
                _forget(graph, [unit], fits, left)
            if self.governor is not None:
                self.log(self.governor.summary())
            if report:  # tables after every run, the plot at most every 5 minutes and at the end
                self.write_report(plot=time.perf_counter() - last_plot > 300)
                last_plot = time.perf_counter() if time.perf_counter() - last_plot > 300 else last_plot
        if report:
            self.write_report()
        return self.results

    def _run_ranks(self, report: bool) -> dict:
        """Do this rank's share of each stage of :meth:`graph`
        (:meth:`galinear.compress.study.units.Graph.stages`, shared out by
        :func:`galinear.compress.study.distributed.share`), a barrier after each; rank 0 then
        writes results.json and the report."""
        self.ranks.barrier()  # every rank ready: all of them plan from the same files
        graph = self.graph()
        self.ranks.barrier()  # before any rank starts working
        fits, left = {}, graph.consumers()
        for stage, units in graph.stages():
            mine = distributed.share(self.ranks, units)
            for number, unit in enumerate(mine, 1):
                if self.config.progress:
                    print(f"[rank {self.ranks.rank}] {stage} [{number}/{len(mine)}] {unit.label}", flush=True)
                self._do(unit, fits)
            self.ranks.barrier()
            _forget(graph, units, fits, left)
        self._load_results()
        if self.ranks.rank == 0:
            self.store.save_results(self.results)
            if report:
                self.write_report()
            self.store.write_index()
        return self.results

    def _do(self, unit, fits: dict, progress: sequential.LayerProgress | None = None) -> None:
        """Do one unit of :meth:`graph`. ``fits``: ``{Fit: LayerSetFit}`` of the fits done here that
        a later unit reads (a fit's result is added); ``progress``: the run's per-layer lines (a
        fit done alone logs its own)."""
        if isinstance(unit, study_units.Fit):
            before = fits.get(unit.before) if unit.depth else LayerSetFit({})
            if before is None:  # on disk before the study started, or fitted by another rank: read back
                before = layers.fit_layer_set(self.fitting, unit.spec, unit.seed, unit.layers[:-1])
            if progress is None:
                progress = sequential.LayerProgress.of_run(unit.tag, unit.seed, unit.layer_set, self.log)
            fits[unit] = layers.fit_layer(self.fitting, unit.unit, before.results, progress,
                                          release=len(unit.layer_set) > 1)
        elif isinstance(unit, study_units.Capture):
            unit.make(self.captures)
        elif isinstance(unit, study_units.EvaluateOriginal):
            self.evaluate_original([unit.dataset])
        else:
            last = study_units.Fit(self.config.method_spec(unit.name).tag(), unit.seed, unit.layer_set)
            self.run_one(unit.name, unit.seed, unit.layer_set, fits.get(last))

    def write_report(self, plot: bool = True) -> dict:
        """summary.json, results.md and the plots of the results so far (:func:`galinear.compress.report.summary.write`)."""
        windows = {d: {"train": len(w.train), "heldout": len(w.heldout), "tokens": int(len(w.tokens))}
                   for d, w in self.windows.items()}
        return reporting.write(self.results["entries"], self.config, model=self.loaded.name, windows=windows,
                               datasets=self.eval_datasets, wikitext=None if self.wikitext is None else self.wikitext.info, plot=plot)


def _forget(graph: study_units.Graph, done: list, fits: dict, left) -> None:
    """Drop from ``fits`` the results no unit still to do reads, once ``done`` are done (here or on
    another rank); ``left``: how many units still read each (counted down)."""
    for unit in done:
        for dep in graph.needs[unit]:
            left[dep] -= 1
            if left[dep] <= 0:
                fits.pop(dep, None)


__all__ = ["StudyConfig", "Study"]
