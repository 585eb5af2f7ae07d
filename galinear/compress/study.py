"""The layer-wise compression study: capture, fit, evaluate, report; resumable.

Protocol (paper-notes section 6, with its leaks fixed):

1. Every text is tokenised once and cut into windows (512 tokens, stride 256); held-out windows
   are seeded random runs, and every training window sharing a token position with one of them
   is dropped (:func:`galinear.compress.windows.split_windows`). The regression rows are all
   tokens of the training windows of every text in the study (the same rows for every method).
2. For one method, seed and layer set, the layers are replaced in increasing order. For layer L
   the inputs are the attention inputs at L captured in the network whose earlier layers of the
   set are already replaced BY THIS METHOD AND SEED; the targets are the ORIGINAL model's q/k/v
   outputs (original weights applied to the original attention input). A capture is cached
   under the exact network it came from (method tag, seed, replaced layers), so no method ever
   trains on another method's activations; with nothing replaced yet that network is the
   original model, whose capture is the same for every method.
3. Each (layer, projection) is fitted with MSE, Adam, batches of 256, the method's rate and a
   cosine schedule over all steps (:mod:`galinear.compress.fit`); optionally o_proj is refitted
   (a dense o_proj started from the original one, AdamW 1e-4, weight decay 1e-2) to the original
   o_proj outputs. Each unit is checkpointed atomically; a rerun skips finished units.
4. ln PPL is measured on the held-out windows of every text, for the original model and every
   compressed one, on the same windows; per-projection test MSE on held-out rows.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass

import numpy as np

from galinear import _io
from galinear.compress import activations, closed_form, converge, evaluate, fit, methods, models, windows as win
from galinear.compress.fit import atomic_save

_DEFAULT_HIDDEN = methods.DEFAULT_ROTOR_HIDDEN

PAPER_SETS_NOTE = ("The texts Wikipedia (lead paragraphs), Shakespeare (modern spelling) and the King "
                   "James Bible replace the paper's Wikitext-2, C4 and PTB, which are not available offline.")


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
    bh_blocks: int | None = None
    refit_o_proj: bool = False
    o_epochs: float = 15.0
    out_dir: str = os.path.join("runs", "compress")
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

    def method_spec(self, name: str) -> methods.MethodSpec:
        converged = (self.until_converged and name not in ("zero",) and not name.endswith("-cf")) or name == "rotorlin-m"
        return methods.MethodSpec(name=name, epochs=self.epochs,
                                  hidden=self.hidden if name == "rotor" else None,
                                  blocks=self.bh_blocks if methods.base_name(name) == "bh1" else None,
                                  max_steps=self.max_steps if converged else None,
                                  eval_every=self.eval_every if converged else None,
                                  patience=self.patience if converged else None)

    def seeds_for(self, layer_set) -> tuple:
        if len(layer_set) > 1 and self.multi_seeds is not None:
            return tuple(self.multi_seeds)
        return tuple(self.seeds)


def _install(module, key, stats, replacements, info) -> None:
    """Freeze a fitted replacement (eval mode, no gradients) and record it and its stats under key."""
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    replacements[key] = module
    info[key] = stats


def _set_name(layer_set) -> str:
    return "+".join(str(x) for x in layer_set)


class Study:
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
        self.config = config
        self._t0 = time.perf_counter()
        self._validate_cheap(texts)
        self._validate_request(loaded)
        if config.threads:
            import torch

            torch.set_num_threads(config.threads)
        self.loaded = loaded if loaded is not None else models.load_model(config.model, config.gguf_file)
        self._model_source = (config.model, config.gguf_file) if loaded is None else (None, None)
        self.log(f"model {self.loaded.name} loaded")
        self.model = self.loaded.model
        all_layers = sorted({layer for s in config.layer_sets for layer in s})
        models.check_model(self.model, all_layers)
        for s in config.layer_sets:
            models.check_model(self.model, list(s))
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
                max_valid=config.valid_windows if config.until_converged else None, bos=bos)
        self.log("texts tokenised and split")
        self.work = os.path.join(config.out_dir, "cache", self._fingerprint())
        self.results_path = os.path.join(config.out_dir, "results.json")
        self.results = self._load_results()
        self._original_captures = {}
        self._valid_captures = {}
        self._residuals = {}
        first = next(iter(self.windows.values()))
        self.skip_lower_layers = activations.skip_is_exact(self.model, first.batch(first.heldout[:1])[0],
                                                           max(1, min(all_layers)))

    # ------------------------------------------------------------------ setup
    def log(self, message: str) -> None:
        """One line on stderr with the elapsed time (when ``verbose``)."""
        if self.config.verbose:
            import sys

            print(f"[{time.perf_counter() - self._t0:7.1f} s] {message}", file=sys.stderr, flush=True)

    def _validate_request(self, loaded) -> None:
        """Refuse, before any loading, what needs neither the model nor the texts to be told wrong."""
        import math

        c = self.config
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
        for name in ("epochs", "o_epochs"):
            value = getattr(c, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not 0 < c.heldout_fraction < 1:
            raise ValueError(f"heldout_fraction must lie in (0, 1), got {c.heldout_fraction!r}")
        negative = [i for s in c.layer_sets for i in s if isinstance(i, int) and i < 0]
        if negative:
            raise ValueError(f"layer index {negative[0]} is negative; layers are numbered from 0")
        if loaded is None:  # the layer count, from the model's configuration (no weights loaded)
            count = models.layer_count(c.model, c.gguf_file)
            if count is not None:
                models.check_layer_range(c.layer_sets, count)

    def _validate_cheap(self, texts):
        c = self.config
        if not c.datasets:
            raise ValueError("no text given: pass at least one of wikipedia, shakespeare, kjv")
        if not c.layer_sets:
            raise ValueError("no layer set given")
        for s in c.layer_sets:
            if len(s) == 0:
                raise ValueError("an empty layer set was given")
            if list(s) != sorted(set(s)):
                raise ValueError(f"layer set {list(s)} must be strictly increasing (layers are replaced in order)")
        for name in c.methods:
            c.method_spec(name)  # raises for an unknown method
        if not c.seeds:
            raise ValueError("no seed given")
        from galinear.data.text import check_available, check_text_file

        files = dict(c.text_files)
        for name, path in files.items():
            check_text_file(path, c.text_field)
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

    def _fingerprint(self) -> str:
        h = hashlib.sha256()
        h.update(self.loaded.name.encode())
        for p in self.model.parameters():  # cheap identity of the weights: a few sums
            h.update(np.float64(p.detach().double().sum()).tobytes())
            break
        for name, w in self.windows.items():
            h.update(name.encode())
            h.update(np.ascontiguousarray(w.tokens).tobytes())
            h.update(w.train.tobytes())
            h.update(w.heldout.tobytes())
            h.update(f"{w.window},{w.stride}".encode())
        h.update(str(self.config.mse_windows).encode())
        return h.hexdigest()[:16]

    def _load_results(self) -> dict:
        if os.path.exists(self.results_path):
            try:
                data = _io.load_json(self.results_path)
            except _io.CorruptFileError as error:
                self.log(f"{error}; starting it afresh (the evaluations it held are redone)")
                data = {}
            if isinstance(data, dict) and data.get("fingerprint") == self._fingerprint():
                return data
        return {"fingerprint": self._fingerprint(), "entries": {}}

    def _save_results(self) -> None:
        _io.save_json(self.results_path, self.results, sort_keys=True)

    # ------------------------------------------------------------------ data
    def _train_ids(self) -> np.ndarray:
        return np.concatenate([w.batch(w.train) for w in self.windows.values()])

    def _test_ids(self) -> np.ndarray:
        return np.concatenate([w.batch(w.heldout[:self.config.mse_windows]) for w in self.windows.values()])

    def _valid_ids(self) -> np.ndarray:
        return np.concatenate([w.batch(w.valid) for w in self.windows.values()])

    @property
    def _bars(self) -> bool:
        """tqdm bars only on a terminal; in a log, one line per unit instead."""
        import sys

        return bool(self.config.progress and sys.stderr.isatty())

    def valid_capture(self, layer: int, replacements: dict, key: str | None):
        """(inputs, original inputs) at ``layer`` on the validation windows (stopping rule); cached."""
        key = f"original-attn_in-L{layer}" if key is None else key
        if key in self._valid_captures:
            return self._valid_captures[key]
        ids = self._valid_ids()
        if len(ids) == 0:
            raise ValueError("no validation window is left beside the training windows; give a longer text "
                             "or fewer --train-windows, or run without --until-converged")
        path = os.path.join(self.work, "captures", f"{key}-valid{self.config.valid_windows}.pt")
        cached = fit.load(path)
        if cached is None:
            x_orig = activations.capture(self.model, layer, ids)
            if replacements:
                with activations.swapped(self.model, replacements):
                    x_in = activations.capture(self.model, layer, ids)
            else:
                x_in = x_orig
            cached = {"input": x_in, "original": x_orig}
            atomic_save(cached, path)
        self._valid_captures[key] = (cached["input"], cached["original"])
        return self._valid_captures[key]

    def _capture_pair(self, layer: int, where: str, replacements: dict, key: str):
        """(train, test) captures at ``layer`` in the network with ``replacements``; cached on disk."""
        path = os.path.join(self.work, "captures", f"{key}.pt")
        cached = fit.load(path)
        if cached is not None:
            return cached["train"], cached["test"]
        ids = np.concatenate([self._train_ids(), self._test_ids()])
        label = f"capture {key}" if self._bars else None
        with activations.swapped(self.model, replacements):
            rows = activations.capture(self.model, layer, ids, where=where, progress=label)
        n_train = self._train_ids().size  # windows x ids per window (the BOS included)
        train, test = rows[:n_train].contiguous(), rows[n_train:].contiguous()
        atomic_save({"train": train, "test": test}, path)
        self.log(f"captured {key}: {tuple(train.shape)} training rows")
        return train, test

    def original_capture(self, layer: int, where: str = "attn_in"):
        key = (layer, where)
        if key not in self._original_captures:
            self._original_captures[key] = self._capture_pair(layer, where, {}, f"original-{where}-L{layer}")
        return self._original_captures[key]

    # ------------------------------------------------------------------ fitting
    def _unit_path(self, spec, seed, prefix, layer, proj) -> str:
        pre = "P" + (_set_name(prefix) if prefix else "none")
        if self.config.refit_o_proj:
            pre += f"-orefit{self.config.o_epochs:g}"
        return os.path.join(self.work, "fits", spec.tag(), f"s{seed}", pre, f"L{layer}_{proj}.pt")

    def _build(self, spec, layer, proj):
        import torch

        orig = models.projection(self.model, layer, proj)
        if proj == "o_proj":
            module = torch.nn.Linear(orig.in_features, orig.out_features, bias=orig.bias is not None)
            module.load_state_dict(orig.state_dict())
            return module
        return methods.build_module(spec, orig.in_features, orig.out_features, bias=orig.bias is not None)

    def fit_layer_set(self, spec, seed: int, layer_set) -> dict:
        """Fit (or load) every unit of ``layer_set`` for one method and seed; returns the replacements."""
        import torch

        replacements = {}
        info = {}
        for i, layer in enumerate(layer_set):
            prefix = tuple(layer_set[:i])
            if spec.moment_fit:
                self._fit_closed_form(spec, seed, layer_set, i, replacements, info)
                if self.config.refit_o_proj:
                    self._refit_o_proj(spec, seed, layer_set, i, replacements, info)
                continue
            if spec.objective != "qkv":  # q, k, v fitted jointly (galinear.compress.objective)
                from galinear.compress import objective

                objective.fit_in_study(self, spec, seed, layer_set, i, replacements, info)
                if self.config.refit_o_proj:
                    self._refit_o_proj(spec, seed, layer_set, i, replacements, info)
                continue
            x_orig, x_orig_test = self.original_capture(layer)
            need = [p for p in models.PROJECTIONS  # an unreadable unit file is removed here and refitted
                    if fit.load(self._unit_path(spec, seed, prefix, layer, p)) is None]
            if need:
                if prefix:
                    key = f"{spec.tag()}-s{seed}-P{_set_name(prefix)}" + \
                          (f"-orefit{self.config.o_epochs:g}" if self.config.refit_o_proj else "") + f"-attn_in-L{layer}"
                    x_in, x_in_test = self._capture_pair(layer, "attn_in", replacements, key)
                else:
                    x_in, x_in_test = x_orig, x_orig_test
            for j, proj in enumerate(models.PROJECTIONS):
                path = self._unit_path(spec, seed, prefix, layer, proj)
                ckpt = fit.load(path)
                module = self._build(spec, layer, proj)
                if ckpt is None:
                    orig = models.projection(self.model, layer, proj)
                    torch.manual_seed(1_000_003 * seed + 131 * layer + j)
                    module = self._build(spec, layer, proj)
                    label = f"fit {spec.name} s{seed} L{layer} {proj}" if self._bars else None
                    t0 = time.perf_counter()
                    if spec.max_steps:
                        xv_in, xv_orig = self.valid_capture(
                            layer, replacements, None if not prefix else self._prefix_key(spec, seed, prefix)
                            + f"-attn_in-L{layer}")
                        stats = converge.fit_until_converged(
                            module, x_in, x_orig, orig.weight, valid_inputs=xv_in, valid_target_inputs=xv_orig,
                            lr=spec.learning_rate, bias=orig.bias, batch_size=spec.batch_size,
                            seed=1_000_003 * seed + 131 * layer + j, max_steps=spec.max_steps,
                            eval_every=spec.eval_every, patience=spec.patience, progress=label)
                    else:
                        stats = fit.fit_projection(module, x_in, x_orig, orig.weight, lr=spec.learning_rate,
                                                   epochs=spec.epochs, batch_size=spec.batch_size,
                                                   seed=1_000_003 * seed + 131 * layer + j, bias=orig.bias,
                                                   progress=label)
                    stats["seconds"] = time.perf_counter() - t0
                    self.log(f"fitted {spec.tag()} s{seed} L{layer} {proj}: {stats['steps']} steps"
                             + (f" (best at {stats['best_step']}, {stats['stopped']})" if "best_step" in stats else "")
                             + f", {stats['seconds']:.1f} s, final loss {stats['final_loss']:.4g}")
                    target_test = x_orig_test @ orig.weight.T + (0 if orig.bias is None else orig.bias)
                    stats["test_mse"] = evaluate.mse(module, x_in_test, target_test)
                    stats["target_mean_square"] = float(target_test.double().pow(2).mean())
                    stats["params"] = methods.count_parameters(module)
                    stats["dense_params"] = methods.count_parameters(orig)
                    ckpt = {"state": module.state_dict(), "stats": stats, "spec": spec.to_dict(),
                            "layer": layer, "projection": proj, "seed": seed}
                    atomic_save(ckpt, path)
                else:
                    module.load_state_dict(ckpt["state"])
                _install(module, (layer, proj), ckpt["stats"], replacements, info)
            if self.config.refit_o_proj:
                self._refit_o_proj(spec, seed, layer_set, i, replacements, info)
        return {"replacements": replacements, "stats": info}

    def _prefix_key(self, spec, seed, prefix) -> str:
        return f"{spec.tag()}-s{seed}-P{_set_name(prefix)}" + \
            (f"-orefit{self.config.o_epochs:g}" if self.config.refit_o_proj else "")

    def moments(self, layer: int, replacements: dict, key: str):
        """Second moments (train, test) of the q/k/v input at ``layer``, streamed; cached as .npz.

        With no replacement the input is the original network's (one accumulator of x x^T);
        otherwise each chunk of windows runs through the original and the partly compressed
        network and the cross moments E[x x_o^T] are accumulated too. At most ``chunk`` windows
        of activations are in memory at a time (a capture already held in memory is reused).
        """
        paths = [os.path.join(self.work, "moments", f"{key}-{part}.npz") for part in ("train", "test")]
        cached = [closed_form.SecondMoments.load(p) for p in paths]
        if all(m is not None for m in cached):
            return tuple(cached)
        width = models.projection(self.model, layer, "q_proj").in_features
        out = []
        t0 = time.perf_counter()
        for ids, path in zip((self._train_ids(), self._test_ids()), paths):
            acc = closed_form.SecondMoments(width)
            held = self._original_captures.get((layer, "attn_in"))
            held = None if held is None else held[0 if path is paths[0] else 1]
            if not replacements and held is not None:
                acc.update_chunked(held)
            else:
                chunk, length = 4, ids.shape[1]
                for start in range(0, len(ids), chunk):
                    part = ids[start:start + chunk]
                    if held is not None:
                        x_orig = held[start * length:(start + len(part)) * length]
                    else:
                        x_orig = activations.capture(self.model, layer, part)
                    if replacements:
                        with activations.swapped(self.model, replacements):
                            x_in = activations.capture(self.model, layer, part)
                        acc.update(x_in, x_orig)
                    else:
                        acc.update(x_orig)
            acc.save(path)
            out.append(acc)
        self.log(f"second moments {key}: {out[0].n} training rows, {time.perf_counter() - t0:.1f} s")
        return tuple(out)

    def _fit_closed_form(self, spec, seed, layer_set, i, replacements, info) -> None:
        """Set each q/k/v replacement of ``layer_set[i]`` from the second moments of all training rows:
        the exact optimum (LR*, BH*), or Adam on the exact all-row MSE (rotorlin-m)."""
        import torch

        layer, prefix = layer_set[i], tuple(layer_set[:i])
        paths = {p: self._unit_path(spec, seed, prefix, layer, p) for p in models.PROJECTIONS}
        loaded = {p: fit.load(path) for p, path in paths.items()}
        if any(c is None for c in loaded.values()):
            key = f"original-attn_in-L{layer}" if not prefix else self._prefix_key(spec, seed, prefix) + f"-attn_in-L{layer}"
            train_m, test_m = self.moments(layer, replacements, key)
        for j, proj in enumerate(models.PROJECTIONS):
            ckpt = loaded[proj]
            torch.manual_seed(1_000_003 * seed + 131 * layer + j)  # initialisation of rotorlin-m
            module = self._build(spec, layer, proj)
            if ckpt is None:
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
                ckpt = {"state": module.state_dict(), "stats": stats, "spec": spec.to_dict(),
                        "layer": layer, "projection": proj, "seed": seed}
                atomic_save(ckpt, paths[proj])
            else:
                module.load_state_dict(ckpt["state"])
            _install(module, (layer, proj), ckpt["stats"], replacements, info)

    def _refit_o_proj(self, spec, seed, layer_set, i, replacements, info):
        import torch

        layer, prefix = layer_set[i], tuple(layer_set[:i])
        path = self._unit_path(spec, seed, prefix, layer, "o_proj")
        ckpt = fit.load(path)
        module = self._build(spec, layer, "o_proj")
        if ckpt is None:
            orig = models.projection(self.model, layer, "o_proj")
            x_orig, x_orig_test = self.original_capture(layer, "o_in")
            key = f"{spec.tag()}-s{seed}-P{_set_name(layer_set[:i + 1])}-orefit{self.config.o_epochs:g}-o_in-L{layer}"
            x_in, x_in_test = self._capture_pair(layer, "o_in", replacements, key)
            label = f"refit o_proj {spec.name} s{seed} L{layer}" if self._bars else None
            torch.manual_seed(seed)
            stats = fit.fit_projection(module, x_in, x_orig, orig.weight, lr=1e-4, epochs=self.config.o_epochs,
                                       batch_size=256, seed=1_000_003 * seed + 131 * layer + 7, bias=orig.bias,
                                       weight_decay=1e-2, optimizer="adamw", progress=label)
            target_test = x_orig_test @ orig.weight.T + (0 if orig.bias is None else orig.bias)
            stats["test_mse"] = evaluate.mse(module, x_in_test, target_test)
            stats["params"] = methods.count_parameters(module)
            stats["dense_params"] = stats["params"]
            ckpt = {"state": module.state_dict(), "stats": stats, "layer": layer, "projection": "o_proj"}
            atomic_save(ckpt, path)
        else:
            module.load_state_dict(ckpt["state"])
        _install(module, (layer, "o_proj"), ckpt["stats"], replacements, info)

    # ------------------------------------------------------------------ evaluation
    def _start(self, dataset: str, layer: int):
        """(layer, residual inputs of the held-out windows) to skip the untouched lower layers."""
        if not self.skip_lower_layers or layer == 0:
            return None
        key = (dataset, layer)
        if key not in self._residuals:
            path = os.path.join(self.work, "captures", f"residual-{dataset}-L{layer}.pt")
            cached = fit.load(path)
            if cached is None:
                w = self.windows[dataset]
                cached = activations.residual_inputs(self.model, layer, w.batch(w.heldout))
                atomic_save(cached, path)
            self._residuals[key] = cached
        return layer, self._residuals[key]

    def evaluate_original(self) -> None:
        for name, w in self.windows.items():
            key = f"original|{name}"
            if key in self.results["entries"]:
                continue
            label = f"eval original {name}" if self._bars else None
            res = evaluate.log_perplexity(self.model, w, progress=label)
            self.log(f"evaluated original on {name}: ln PPL {res['log_ppl']:.4f}")
            self.results["entries"][key] = {"method": "original", "dataset": name, **res}
            self._save_results()

    def run_one(self, name: str, seed: int, layer_set) -> None:
        spec = self.config.method_spec(name)
        keys = {d: f"{spec.tag()}|s{seed}|{_set_name(layer_set)}|{d}" for d in self.windows}
        if all(k in self.results["entries"] for k in keys.values()):
            return
        fitted = self.fit_layer_set(spec, seed, tuple(layer_set))
        stats = fitted["stats"]
        per_layer_params = sum(stats[(layer_set[0], p)]["params"] for p in models.PROJECTIONS)
        dense_params = sum(stats[(layer_set[0], p)]["dense_params"] for p in models.PROJECTIONS)
        mse = {p: float(np.mean([stats[(layer, p)]["test_mse"] for layer in layer_set])) for p in models.PROJECTIONS}
        rel = {p: float(np.mean([stats[(layer, p)]["test_mse"] / max(stats[(layer, p)]["target_mean_square"], 1e-30)
                                 for layer in layer_set])) for p in models.PROJECTIONS}
        fit_seconds = float(sum(s.get("seconds", 0.0) for s in stats.values()))
        first = layer_set[0]
        curves = {p: stats[(first, p)].get("curve") for p in models.PROJECTIONS if stats[(first, p)].get("curve")}
        valid_ms = {p: stats[(first, p)]["valid_target_mean_square"] for p in curves}
        if spec.moment_fit:
            how = "closed form"
            if not spec.closed_form:
                steps = [stats[(layer, p)]["best_step"] for layer in layer_set for p in models.PROJECTIONS]
                span = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}-{max(steps)}"
                how = f"Adam on all-row moments, best step {span} of max {spec.max_steps}"
            if self.config.until_converged:  # the same validation rows as the Adam curves (first layer)
                xv, xv_orig = self.valid_capture(first, {}, None)
                for p in models.PROJECTIONS:
                    orig = models.projection(self.model, first, p)
                    target = xv_orig @ orig.weight.T + (0 if orig.bias is None else orig.bias)
                    curves[p] = [[0, evaluate.mse(fitted["replacements"][(first, p)], xv, target)]]
                    valid_ms[p] = float(target.double().pow(2).mean())
        elif spec.max_steps:
            steps = [stats[(layer, p)]["best_step"] for layer in layer_set for p in models.PROJECTIONS]
            span = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}-{max(steps)}"
            how = f"Adam, best step {span} of max {spec.max_steps}"
        elif name == "zero":
            how = "-"
        else:
            how = f"Adam, {stats[(first, 'q_proj')]['steps']} steps"
        if spec.objective != "qkv":
            how += f", q/k/v jointly ({spec.objective} objective)"
        if self.config.save_models:
            save_compressed(os.path.join(self.config.out_dir, "models",
                                         f"{spec.tag()}-s{seed}-L{_set_name(layer_set)}.pt"),
                            fitted["replacements"], spec, self.loaded.name)
        if self.config.save_dir:
            from galinear.compress import saving

            folder = f"{spec.tag()}-s{seed}-L{_set_name(layer_set)}"
            saving.save(os.path.join(self.config.save_dir, folder), self.model, fitted["replacements"], spec,
                        source=self._model_source[0], gguf_file=self._model_source[1], name=self.loaded.name)
            saved = [f for f in os.listdir(self.config.save_dir)
                     if os.path.exists(os.path.join(self.config.save_dir, f, saving.CONFIG))]
            saving.write_index(self.config.save_dir, saved)
        with activations.swapped(self.model, fitted["replacements"]):
            for d, w in self.windows.items():
                if keys[d] in self.results["entries"]:
                    continue
                label = f"eval {spec.name} s{seed} L{_set_name(layer_set)} {d}" if self._bars else None
                res = evaluate.log_perplexity(self.model, w, progress=label, start=self._start(d, layer_set[0]))
                self.log(f"evaluated {spec.tag()} s{seed} L{_set_name(layer_set)} on {d}: ln PPL {res['log_ppl']:.4f}")
                self.results["entries"][keys[d]] = {
                    "method": name, "tag": spec.tag(), "seed": seed, "layers": list(layer_set), "dataset": d,
                    "params_per_layer": per_layer_params, "dense_params_per_layer": dense_params,
                    "test_mse": mse, "test_rel_mse": rel, "fit_seconds": fit_seconds, "fit": how,
                    "blocks": getattr(fitted["replacements"][(first, "q_proj")], "blocks", None),
                    "curves": curves, "valid_target_mean_square": valid_ms, **res}
                self._save_results()

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
        """Evaluate the original model, then every planned run; write the report after each run."""
        from tqdm.auto import tqdm

        self.evaluate_original()
        plan = self.plan()
        last_plot = time.perf_counter()
        for number, (name, seed, layer_set) in enumerate(tqdm(plan, desc="study", disable=not self._bars), 1):
            if self.config.progress and not self._bars:
                print(f"[{number}/{len(plan)}] {name} seed {seed} layers {_set_name(layer_set)}", flush=True)
            self.run_one(name, seed, layer_set)
            if report:  # tables after every run, the plot at most every 5 minutes and at the end
                self.write_report(plot=time.perf_counter() - last_plot > 300)
                last_plot = time.perf_counter() if time.perf_counter() - last_plot > 300 else last_plot
        if report:
            self.write_report()
        return self.results

    def write_report(self, plot: bool = True) -> dict:
        from galinear.compress import report

        return report.write(self, plot=plot)


def save_compressed(path: str, replacements: dict, spec, model_name: str) -> None:
    """Save the replacement modules of a compressed model (state dicts + how to rebuild them)."""
    payload = {"format": "galinear-compressed-v1", "model": model_name, "spec": spec.to_dict(),
               "modules": {f"{layer}.{proj}": {"state": m.state_dict(), "in": _in_out(m)[0], "out": _in_out(m)[1]}
                           for (layer, proj), m in replacements.items()}}
    atomic_save(payload, path)


def _in_out(module):
    for a, b in (("in_features", "out_features"),):
        if hasattr(module, a) and hasattr(module, b):
            return int(getattr(module, a)), int(getattr(module, b))
    raise ValueError(f"{type(module).__name__} does not expose in_features/out_features")


def load_compressed(model, path: str) -> dict:
    """Put the modules saved by :func:`save_compressed` into ``model`` (in place); returns them."""
    import torch

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such compressed model file")
    payload = fit.load(path, recompute=False)
    if not isinstance(payload, dict) or payload.get("format") != "galinear-compressed-v1":
        raise ValueError(f"{path} is not a compressed model written by galinear")
    spec = methods.MethodSpec(**payload["spec"])
    out = {}
    for key, entry in payload["modules"].items():
        layer, proj = key.split(".")
        layer = int(layer)
        has_bias = any(k == "bias" or k.endswith(".bias") for k in entry["state"])
        if proj == "o_proj":
            module = torch.nn.Linear(entry["in"], entry["out"], bias=has_bias)
        else:
            module = methods.build_module(spec, entry["in"], entry["out"], bias=has_bias)
        module.load_state_dict(entry["state"])
        module.eval()
        for p in module.parameters():
            p.requires_grad_(False)
        models.set_projection(model, layer, proj, module)
        out[(layer, proj)] = module
    return out


__all__ = ["StudyConfig", "Study", "save_compressed", "load_compressed", "PAPER_SETS_NOTE"]
