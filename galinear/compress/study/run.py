"""The layer-wise compression study: capture, fit, evaluate, report; resumable.

Protocol (paper-notes section 6, with its leaks fixed):

1. Every text is tokenised once and cut into windows (512 tokens, stride 256); held-out windows
   are seeded random runs, and every training window sharing a token position with one of them
   is dropped (:func:`galinear.lm.windows.split_windows`). The regression rows are all
   tokens of the training windows of every text in the study (the same rows for every method).
2. For one method, seed and layer set, the layers are replaced in increasing order. For layer L
   the inputs are the attention inputs at L captured in the network whose earlier layers of the
   set are already replaced BY THIS METHOD AND SEED; the targets are the ORIGINAL model's q/k/v
   outputs (original weights applied to the original attention input). A capture is cached
   under the exact network it came from (method tag, seed, replaced layers), so no method ever
   trains on another method's activations; with nothing replaced yet that network is the
   original model, whose capture is the same for every method.
3. Each (layer, projection) is fitted with MSE, Adam, batches of 256, the method's rate and a
   cosine schedule over all steps (:mod:`galinear.compress.fitting.fit`); optionally o_proj is refitted
   (a dense o_proj started from the original one, AdamW 1e-4, weight decay 1e-2) to the original
   o_proj outputs. Each unit draws its initialisation and batch order from its own seed
   (:func:`galinear.compress.fitting.fit.fit_seed`) and is checkpointed atomically; a rerun skips finished units.
4. ln PPL is measured on the held-out windows of every text, for the original model and every
   compressed one, on the same windows; per-projection test MSE on held-out rows.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from galinear.compress.fitting import activations, closed_form, converge, distill, evaluate, fit
from galinear.compress.methods import catalogue as methods
from galinear.compress.methods import targets as targeting
from galinear.compress.report import summary as reporting
from galinear.compress.report.summary import PAPER_SETS_NOTE
from galinear.compress.storage import saving
from galinear.compress.storage.store import Store, fingerprint, install, set_name
from galinear.compress.study import distributed, sequential
from galinear.compress.study import folders as study_folders, units as study_units
from galinear.compress.study.captures import CaptureMethods
from galinear.compress.study.config import StudyConfig, check, check_loaded
from galinear.compress.study.scoring import ScoringMethods
from galinear.lm import models
from galinear.lm import windows as win


class Study(CaptureMethods, ScoringMethods):
    """A resumable compression study. ``Study(config).run()`` does everything.

    Parameters
    ----------
    config : StudyConfig
    loaded : LoadedModel, optional
        An already loaded model (tests pass a tiny random Llama); default: ``config.model``.
    texts : dict, optional
        ``{name: text}`` to use instead of the offline corpora (tests).
    """

    def __init__(self, config: StudyConfig, loaded: models.LoadedModel | None = None, texts: dict | None = None):
        self.config = asked = config
        self._t0 = time.perf_counter()
        self.ranks = distributed.current()
        check(config, loaded, texts)
        threads = config.threads or distributed.default_threads(self.ranks)
        if threads:  # torch's and numba's pools alike: oversubscribed OpenMP pools spin against each other
            import torch

            from galinear import _numba

            torch.set_num_threads(threads)
            _numba.set_threads(threads)
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
        files = dict(config.text_files)
        bos = win.bos_token(self.loaded.tokenizer)
        if bos is not None:
            self.log(f"the tokenizer adds a BOS token (id {bos}): every window starts with it")
        for name in config.datasets:
            if texts is not None and name in texts:
                text = texts[name]
            elif name in files:
                from galinear.data.text import load_text_file

                text = load_text_file(files[name], config.text_field)
            else:
                from galinear.data.text import load_text

                text = load_text(name)
            budget = config.stride * (3 * config.train_windows + 4 * config.eval_windows + 4 * config.group + 8)
            tokens = win.tokenize(self.loaded.tokenizer, text, max_tokens=budget + config.window)
            if len(tokens) < config.window:
                raise ValueError(f"the {name} text has {len(tokens)} tokens, fewer than one window of "
                                 f"{config.window}; give a longer text")
            self.windows[name] = win.split_windows(
                tokens, config.window, config.stride, config.heldout_fraction, config.split_seed,
                config.group, max_train=config.train_windows, max_heldout=config.eval_windows,
                max_valid=config.valid_windows if config.draws_valid else None, bos=bos)
        self.log("texts tokenised and split")
        self.store = Store(config, fingerprint(self.model, self.loaded.tokenizer, self.windows, config), self.log)
        if self.ranks.rank == 0:  # --out and --save hold this study only (galinear.compress.study.folders)
            study_folders.claim(asked, self.store.key, self.log)
        self.ranks.barrier()
        self._bos = bos
        self.wikitext_ids, self.wikitext_window, self.wikitext_source, self.wikitext_info = None, None, None, None
        self._setup_wikitext()
        self.work, self.results_path = self.store.work, self.store.results_path
        rank = self.ranks.rank if self.ranks.size > 1 else None
        self.results, self._own_results = self.store.load_results(self.log, rank)
        self._original_captures = {}
        self._valid_captures = {}
        self._residuals = {}
        first = next(iter(self.windows.values()))
        self.skip_lower_layers = activations.skip_is_exact(self.model, first.batch(first.heldout[:1])[0],
                                                           max(1, min(all_layers)))

    def log(self, message: str) -> None:
        """One line on stderr with the elapsed time (when ``verbose``)."""
        if self.config.verbose:
            import sys

            who = f"rank {self.ranks.rank}: " if self.ranks.size > 1 else ""
            print(f"[{time.perf_counter() - self._t0:7.1f} s] {who}{message}", file=sys.stderr, flush=True)

    @property
    def _bars(self) -> bool:
        """tqdm bars only on a terminal; in a log, one line per unit instead."""
        import sys

        return bool(self.config.progress and sys.stderr.isatty())

    # ------------------------------------------------------------------ fitting
    def _build(self, spec, layer, proj):
        import torch

        orig = models.projection(self.model, layer, proj)
        if self._refit_unit(proj):
            module = torch.nn.Linear(orig.in_features, orig.out_features, bias=orig.bias is not None)
            module.load_state_dict(orig.state_dict())
            return module
        return methods.build_module(spec, orig.in_features, orig.out_features, bias=orig.bias is not None)

    def _refit_unit(self, proj: str) -> bool:
        """Whether ``proj`` is the o_proj refit (``--refit-o-proj``) rather than a replaced target."""
        return proj == "o_proj" and "o_proj" not in self.config.targets

    def fit_layer_set(self, spec, seed: int, layer_set) -> dict:
        """Fit (or load) every unit of ``layer_set`` for one method and seed, layer after layer, each on
        the network whose earlier layers of the set are replaced; returns the replacements.

        Every layer is checkpointed before the next starts (a rerun resumes at the first layer
        without its files); sets of several layers log one line per layer with the time left, and
        the in-memory captures of a layer are dropped once it is fitted
        (:mod:`galinear.compress.study.sequential`).
        """
        replacements = {}
        info = {}
        label = f"{spec.tag()} s{seed} layers {sequential.compact(layer_set)}"
        progress = sequential.LayerProgress(label, layer_set, self.log, enabled=len(layer_set) > 1)
        for i, layer in enumerate(layer_set):
            loaded = self.store.unit_done(spec, seed, tuple(layer_set[:i]), layer)
            progress.start()
            self._fit_layer(spec, seed, layer_set, i, replacements, info)
            progress.done(i, loaded)
            if len(layer_set) > 1:
                sequential.release(self, layer)
        return {"replacements": replacements, "stats": info}

    def _fit_layer(self, spec, seed: int, layer_set, i: int, replacements: dict, info: dict) -> None:
        """Fit (or load) the units of ``layer_set[i]`` and install them in ``replacements``: the
        targets stage by stage in forward order (:func:`galinear.compress.methods.targets.stages`), each on
        the network with the earlier stages installed."""
        for projections, block in targeting.stages(self.config.targets, spec.objective):
            if spec.moment_fit:
                self._fit_closed_form(spec, seed, layer_set, i, replacements, info, projections)
            elif block is not None:  # fitted jointly (galinear.compress.fitting.objective)
                from galinear.compress.fitting import objective

                with self.whole_captures():  # the joint objectives take every training window at once
                    objective.fit_in_study(self, spec, seed, layer_set, i, replacements, info, projections, block)
            else:
                self._fit_projections(spec, seed, layer_set, i, replacements, info, projections)
        if self.config.refit_o_proj:
            self._refit_o_proj(spec, seed, layer_set, i, replacements, info)

    def fit_units(self, spec, seed: int, layer_set, i: int, projections, fit_all, replacements: dict,
                  info: dict) -> None:
        """Fit (or read back) the replacements of ``projections`` at ``layer_set[i]`` as one unit
        (one checkpoint a projection, :meth:`galinear.compress.storage.store.Store.unit_records`) and install them.

        When every checkpoint is readable the modules take their saved states; otherwise
        ``fit_all`` fits them all and each record is saved atomically before anything uses it,
        so a run killed anywhere leaves whole records and a rerun resumes at the first unit
        without them.

        Targets are initialised under the seed :func:`galinear.compress.fitting.fit.fit_seed` gives
        them (:func:`galinear.compress.methods.targets.slot`), the o_proj refit as the original o_proj. ``fit_all(modules)`` fits
        ``{projection: module}`` and returns ``{projection: stats}``.
        """
        import torch

        layer, prefix = layer_set[i], tuple(layer_set[:i])
        modules = {}
        for proj in projections:
            if not self._refit_unit(proj):
                torch.manual_seed(fit.fit_seed(seed, layer, targeting.slot(proj)))
            modules[proj] = self._build(spec, layer, proj)

        def records(fitting: dict) -> dict:  # o_proj's record names neither method nor seed
            stats = fit_all(fitting)
            return {p: fit.unit_record(m, stats[p], layer, p, *((None, None) if self._refit_unit(p) else (spec, seed)))
                    for p, m in fitting.items()}

        saved = self.store.unit_records(spec, seed, prefix, layer, projections)
        if saved is None:
            saved = records(modules)
            self.store.save_unit(spec, seed, prefix, layer, saved)
        else:
            for proj, module in modules.items():
                module.load_state_dict(saved[proj]["state"])
        for proj, module in modules.items():
            install(module, (layer, proj), saved[proj]["stats"], replacements, info)

    def _fit_projections(self, spec, seed, layer_set, i, replacements, info, projections=models.PROJECTIONS) -> None:
        """Fit each replacement of ``projections`` (which read one input) at ``layer_set[i]`` on its own by
        Adam (:mod:`galinear.compress.fitting.fit`, or until converged, :mod:`galinear.compress.fitting.converge`)."""
        layer, prefix = layer_set[i], tuple(layer_set[:i])
        where = targeting.INPUTS[projections[0]]
        key = self.store.stage_input_key(spec, seed, prefix, layer, where, self.done_here(layer, replacements))
        x_orig, x_orig_test = self.original_capture(layer, where)
        x_in, x_in_test = x_orig, x_orig_test
        if not key.startswith("original-") and self.store.unit_records(spec, seed, prefix, layer, projections) is None:
            x_in, x_in_test = self._capture_pair(layer, where, replacements, key)

        def fit_one(proj, j, module):
            orig = models.projection(self.model, layer, proj)
            label = f"fit {spec.name} s{seed} L{layer} {proj}" if self._bars else None
            t0 = time.perf_counter()
            if spec.max_steps:
                xv_in, xv_orig = self.valid_capture(layer, replacements, key, where)
                stats = converge.fit_until_converged(
                    module, x_in, x_orig, orig.weight, valid_inputs=xv_in, valid_target_inputs=xv_orig,
                    lr=spec.learning_rate, bias=orig.bias, batch_size=spec.batch_size, seed=fit.fit_seed(seed, layer, j),
                    max_steps=spec.max_steps, eval_every=spec.eval_every, patience=spec.patience, progress=label)
            else:
                stats = fit.fit_projection(module, x_in, x_orig, orig.weight, lr=spec.learning_rate, epochs=spec.epochs,
                                           batch_size=spec.batch_size, seed=fit.fit_seed(seed, layer, j),
                                           bias=orig.bias, progress=label)
            stats["seconds"] = time.perf_counter() - t0
            self.log(fit.summary(f"{spec.tag()} s{seed} L{layer} {proj}", stats))
            return dict(stats, **evaluate.test_stats(module, orig, x_in_test, x_orig_test))

        for proj in projections:
            self.fit_units(spec, seed, layer_set, i, (proj,),
                           lambda mods, proj=proj: {proj: fit_one(proj, targeting.slot(proj), mods[proj])},
                           replacements, info)

    def _fit_closed_form(self, spec, seed, layer_set, i, replacements, info, projections=models.PROJECTIONS) -> None:
        """Set each replacement of ``projections`` (which read one input) at ``layer_set[i]`` from the second
        moments of all training rows: the exact optimum (LR*, BH*), or Adam on the exact all-row MSE (rotorlin-m)."""
        layer, prefix = layer_set[i], tuple(layer_set[:i])
        where = targeting.INPUTS[projections[0]]
        if self.store.unit_records(spec, seed, prefix, layer, projections) is None:
            key = self.store.stage_input_key(spec, seed, prefix, layer, where, self.done_here(layer, replacements))
            train_m, test_m = self.moments(layer, replacements, key, where)

        def fit_one(proj, module):
            orig = models.projection(self.model, layer, proj)
            t0 = time.perf_counter()
            reg = train_m.regression(orig.weight, orig.bias)
            if spec.closed_form:
                stats = closed_form.fit_module(module, reg)
            else:  # rotorlin-m: Adam on the exact all-row loss, the study's stopping settings
                stats = closed_form.fit_on_moments(module, reg, lr=spec.learning_rate, max_steps=spec.max_steps,
                                                   eval_every=spec.eval_every, patience=spec.patience)
            stats["seconds"] = time.perf_counter() - t0
            test_reg = test_m.regression(orig.weight, orig.bias)
            stats["test_mse"] = closed_form.module_mse(module, test_reg)
            stats["target_mean_square"] = test_reg.target_mean_square()
            stats["params"] = methods.count_parameters(module)
            stats["dense_params"] = methods.count_parameters(orig)
            stats["final_loss"] = stats["train_mse"]
            self.log(f"{'closed-form' if spec.closed_form else 'moment-fitted'} {spec.tag()} L{layer} {proj}: "
                     f"train MSE {stats['train_mse']:.4g}, test MSE {stats['test_mse']:.4g}"
                     + (f" ({stats['steps']} steps, best at {stats['best_step']})" if stats["steps"] else "")
                     + (f", ridge {stats['ridge']:.3g}" if stats["ridge"] else ""))
            return stats

        for proj in projections:
            self.fit_units(spec, seed, layer_set, i, (proj,), lambda mods, proj=proj: {proj: fit_one(proj, mods[proj])},
                           replacements, info)

    def _refit_o_proj(self, spec, seed, layer_set, i, replacements, info):
        """Refit a dense o_proj, started from the original one, to the original o_proj outputs (AdamW)."""
        import torch

        layer = layer_set[i]

        def fit_o(mods):
            module, orig = mods["o_proj"], models.projection(self.model, layer, "o_proj")
            x_orig, x_orig_test = self.original_capture(layer, "o_in")
            x_in, x_in_test = self._capture_pair(layer, "o_in", replacements,
                                                 self.store.o_input_key(spec, seed, layer_set[:i + 1]))
            label = f"refit o_proj {spec.name} s{seed} L{layer}" if self._bars else None
            torch.manual_seed(seed)
            stats = fit.fit_projection(module, x_in, x_orig, orig.weight, lr=1e-4, epochs=self.config.o_epochs,
                                       batch_size=256, seed=fit.fit_seed(seed, layer, fit.O_PROJ_SLOT), bias=orig.bias,
                                       weight_decay=1e-2, optimizer="adamw", progress=label)
            stats["test_mse"] = evaluate.mse(module, x_in_test, evaluate.projection_target(x_orig_test, orig))
            stats["params"] = methods.count_parameters(module)
            stats["dense_params"] = stats["params"]
            return {"o_proj": stats}

        self.fit_units(spec, seed, layer_set, i, ("o_proj",), fit_o, replacements, info)

    # ------------------------------------------------------------------ evaluation
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
        if self.config.distill and name != "zero":
            tags.append(f"{spec.tag()}-{distill.settings_tag(self.config)}")
        return spec, {t: {d: f"{t}|s{seed}|{set_name(layer_set)}|{d}" for d in self.eval_datasets} for t in tags}

    def pending(self, name: str, seed: int, layer_set) -> bool:
        """Whether a row of this run is not evaluated yet, or one of its models not kept."""
        _, rows = self._rows(name, seed, layer_set)
        if not all(self._evaluated(k) for keys in rows.values() for k in keys.values()):
            return True
        return not all(self.store.model_kept(t, seed, layer_set) for t in rows)

    def run_one(self, name: str, seed: int, layer_set) -> None:
        if not self.pending(name, seed, layer_set):
            return
        spec, rows = self._rows(name, seed, layer_set)
        (_, keys), *rest = rows.items()
        distilled = bool(rest)
        dtag, dkeys = rest[0] if distilled else (None, {})
        fitted = self.fit_layer_set(spec, seed, tuple(layer_set))
        stats = fitted["stats"]
        targets = self.config.targets
        per_layer_params = sum(stats[(layer_set[0], p)]["params"] for p in targets)
        dense_params = sum(stats[(layer_set[0], p)]["dense_params"] for p in targets)
        mse = {p: float(np.mean([stats[(layer, p)]["test_mse"] for layer in layer_set])) for p in targets}
        rel = {p: float(np.mean([stats[(layer, p)]["test_mse"] / max(stats[(layer, p)]["target_mean_square"], 1e-30)
                                 for layer in layer_set])) for p in targets}
        fit_seconds = float(sum(s.get("seconds", 0.0) for s in stats.values()))
        first = layer_set[0]
        curves = {p: stats[(first, p)].get("curve") for p in targets if stats[(first, p)].get("curve")}
        valid_ms = {p: stats[(first, p)]["valid_target_mean_square"] for p in curves}
        if spec.moment_fit:
            how = "closed form"
            if not spec.closed_form:
                steps = [stats[(layer, p)]["best_step"] for layer in layer_set for p in targets]
                span = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}-{max(steps)}"
                how = f"Adam on all-row moments, best step {span} of max {spec.max_steps}"
            if self.config.until_converged:  # the same validation rows as the Adam curves (first layer, q/k/v)
                xv, xv_orig = self.valid_capture(first, {}, None)
                for p in [p for p in targets if p in models.PROJECTIONS]:
                    orig = models.projection(self.model, first, p)
                    target = evaluate.projection_target(xv_orig, orig)
                    curves[p] = [[0, evaluate.mse(fitted["replacements"][(first, p)], xv, target)]]
                    valid_ms[p] = float(target.double().pow(2).mean())
        elif spec.max_steps:
            steps = [stats[(layer, p)]["best_step"] for layer in layer_set for p in targets]
            span = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}-{max(steps)}"
            how = f"Adam, best step {span} of max {spec.max_steps}"
        elif name == "zero":
            how = "-"
        else:
            how = f"Adam, {stats[(first, targets[0])]['steps']} steps"
        if spec.objective != "qkv":
            how += f", {targeting.joint_note(targets, spec.objective)}"
        entry = {"method": name, "tag": spec.tag(), "seed": seed, "layers": list(layer_set),
                 "params_per_layer": per_layer_params, "dense_params_per_layer": dense_params,
                 "test_mse": mse, "test_rel_mse": rel, "fit_seconds": fit_seconds, "fit": how,
                 "blocks": getattr(fitted["replacements"][(first, targets[0])], "blocks", None),
                 "curves": curves, "valid_target_mean_square": valid_ms,
                 **self._model_share(fitted["replacements"], stats)}
        self._keep_and_evaluate(spec, seed, layer_set, fitted["replacements"], spec.tag(), keys, entry)
        if distilled:  # the final joint stage (galinear.compress.fitting.distill), reported as its own row
            modules, dstats = distill.run_in_study(self, spec, seed, tuple(layer_set), fitted["replacements"])
            entry = dict(entry, tag=dtag, fit_seconds=fit_seconds + dstats["seconds"],
                         fit=f"{how}; then all layers distilled jointly (KL, best step {dstats['best_step']} of "
                             f"{dstats['steps']}, validation KL {dstats['valid_kl_start']:.4g} -> {dstats['valid_kl']:.4g})",
                         distill={k: v for k, v in dstats.items()})
            self._keep_and_evaluate(spec, seed, layer_set, modules, dtag, dkeys, entry)

    def _model_share(self, replacements: dict, stats: dict) -> dict:
        """The budget over the whole model: the replaced modules' parameters (all layers) against
        their dense ones, and the share of the whole model's parameters kept."""
        if getattr(self, "_model_params", None) is None:
            self._model_params = methods.count_parameters(self.model)
        keys = [k for k in replacements if k[1] in self.config.targets]
        replaced = sum(int(stats[k]["params"]) for k in keys)
        dense = sum(int(stats[k]["dense_params"]) for k in keys)
        kept = self._model_params - dense + replaced
        return {"targets": list(self.config.targets), "replaced_params": replaced, "replaced_dense_params": dense,
                "model_params": self._model_params, "model_params_kept": kept,
                "model_share": kept / self._model_params}

    def _keep_and_evaluate(self, spec, seed, layer_set, replacements: dict, tag: str, keys: dict, entry: dict) -> None:
        """Keep one compressed model (its folder, :meth:`galinear.compress.storage.store.Store.model_folder`)
        and record its ln PPL on every measure."""
        folder = self.store.model_folder(tag, seed, layer_set)
        if folder is not None:
            saving.save(folder, self.model, replacements, spec, source=self._model_source[0],
                        gguf_file=self._model_source[1], name=self.loaded.name)
            if self.ranks.size == 1:  # under torchrun rank 0 writes the index at the end
                self.store.write_index()
        with activations.swapped(self.model, replacements):
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

    def run(self, report: bool = True) -> dict:
        """Evaluate the original model, then every planned run; write the report after each run.

        Under ``torchrun`` (torch.distributed initialised, several ranks) the units are spread over
        the ranks instead (:func:`galinear.compress.study.units.run`).
        """
        from tqdm.auto import tqdm

        if self.ranks.size > 1:
            return study_units.run(self, report=report)
        self.evaluate_original()
        plan = self.plan()
        last_plot = time.perf_counter()
        for number, (name, seed, layer_set) in enumerate(tqdm(plan, desc="study", disable=not self._bars), 1):
            if self.config.progress and not self._bars:
                print(f"[{number}/{len(plan)}] {name} seed {seed} layers {set_name(layer_set)}", flush=True)
            self.run_one(name, seed, layer_set)
            if report:  # tables after every run, the plot at most every 5 minutes and at the end
                self.write_report(plot=time.perf_counter() - last_plot > 300)
                last_plot = time.perf_counter() if time.perf_counter() - last_plot > 300 else last_plot
        if report:
            self.write_report()
        return self.results

    def write_report(self, plot: bool = True) -> dict:
        """summary.json, results.md and the plots of the results so far (:func:`galinear.compress.report.summary.write`)."""
        windows = {d: {"train": len(w.train), "heldout": len(w.heldout), "tokens": int(len(w.tokens))}
                   for d, w in self.windows.items()}
        return reporting.write(self.results["entries"], self.config, model=self.loaded.name, windows=windows,
                               datasets=self.eval_datasets, wikitext=self.wikitext_info, plot=plot)


__all__ = ["StudyConfig", "Study", "PAPER_SETS_NOTE"]
