"""The study behind ``galinear quantize``: the original model's row, then one row per rotation family
and seed (:func:`galinear.quantize.pipeline.quantize_model`), each scored, saved after every row so
that an interrupted study resumes, and written as a table.

The study runs on ``config.device``: the model moves there once loaded, and everything made from it
follows its weights (:mod:`galinear.quantize.pipeline`); saved folders and checkpoints hold CPU tensors.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import os
import platform

import torch

from galinear import _io
from galinear.lm import models
from galinear.optim import threads
from galinear.quantize import attention, fusion
from galinear.quantize.config import QuantizeConfig
from galinear.quantize.cost import online_cost
from galinear.quantize.pipeline import quantize_model

__all__ = ["run", "score", "accuracy", "calibration_windows", "save_model", "format_table", "machine", "KV_CACHE"]

#: Where the KV cache is quantized (recorded in a study's settings when ``kvbits < 16``).
KV_CACHE = "per token and head, K after RoPE and R3"


def _wikitext(loaded, config):
    from galinear.lm import wikitext
    from galinear.lm.windows import bos_token

    bos = bos_token(loaded.tokenizer)
    ids = wikitext.token_ids(loaded.tokenizer, wikitext.read_file())
    length = wikitext.window_length(loaded.model, config.wikitext_window, bos)
    return ids, length, bos


def calibration_windows(loaded, config):
    """(calibration windows, held-out Windows) from the Wikipedia lead paragraphs."""
    from galinear.data.text import load_wikipedia
    from galinear.lm.windows import bos_token, split_windows, tokenize

    bos = bos_token(loaded.tokenizer)
    tokens = tokenize(loaded.tokenizer, load_wikipedia(), max_tokens=max(60_000, 40 * config.window * 8))
    windows = split_windows(tokens, config.window, config.window, 0.2, seed=0, group=1,
                            max_train=config.calib_windows, max_heldout=config.heldout_windows, bos=bos)
    calib = [torch.as_tensor(row) for row in windows.batch(windows.train)]
    return calib, windows


def accuracy(model, tokenizer, items: int, batch_size: int = 8) -> dict:
    """lm-eval's acc and acc_norm on ``items`` next-sentence questions from the WikiText-2 test split, on
    the model's device."""
    import tempfile

    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from galinear.data.choice import next_sentence_items, write_lm_eval_task
    from galinear.lm import wikitext

    task = "galinear_quantize_next_sentence"
    with tempfile.TemporaryDirectory() as folder:
        write_lm_eval_task(folder, next_sentence_items(wikitext.read_file(), items, seed=0), name=task)
        lm = HFLM(pretrained=model, tokenizer=tokenizer, device=str(models.input_device(model)), batch_size=batch_size)
        manager = TaskManager(include_path=folder, include_defaults=False)
        result = simple_evaluate(model=lm, tasks=[task], task_manager=manager, bootstrap_iters=0, random_seed=0)
    scores = result["results"][task]
    return {"acc": scores["acc,none"], "acc_norm": scores["acc_norm,none"], "items": items}


def score(model, loaded, config, wiki, heldout) -> dict:
    from galinear.lm.perplexity import heldout_log_perplexity, stream_log_perplexity

    ids, length, bos = wiki
    out = {"wikitext": stream_log_perplexity(model, ids, length, bos, windows=config.wikitext_windows)}
    out["heldout"] = heldout_log_perplexity(model, heldout)
    if config.accuracy_items:
        out["accuracy"] = accuracy(model, loaded.tokenizer, config.accuracy_items)
    return out


# ------------------------------------------------------------------------------------ saving
def save_model(model, tokenizer, folder: str, record: dict) -> str:
    """A plain Hugging Face folder (safetensors) of the quantized model with every rotation fused:
    the online Hadamard multiplied back into down_proj (the same function, float grid points no
    longer on the grid there), activation and KV quantization not included (simulated at run time
    only), and ``galinear_quantize.json`` beside it with the settings. An online R1 (Gemma-3) is
    multiplied back into the readers' weights the same way, so the folder is a plain model of the
    family computing the same function. The folder holds CPU tensors whatever the model's device."""
    plain = copy.deepcopy(model).cpu()
    attention.remove_kv_quantizer(plain)
    fusion.remove_online_hadamard(plain)
    fusion.remove_online_r1(plain)
    for module in plain.modules():
        module._forward_pre_hooks.clear()
        module._forward_hooks.clear()
    with _io.atomic_folder(folder) as tmp:
        plain.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        _io.save_json(os.path.join(tmp, "galinear_quantize.json"), record)
    return folder


# ------------------------------------------------------------------------------------ the study
@functools.cache  # read once a process, not once a row
def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:  # not Linux
        names = []
    return names[0] if names else platform.processor() or platform.machine()


def machine(device: str = "cpu") -> dict:
    """Where a row's numbers come from: torch's version, the CPU, the instruction set torch's kernels
    use on it, the thread count and, on CUDA, the GPU. Two CPUs whose kernels round differently make
    different learned rotations from the same seed: a last-bit difference flips a rounding in the
    straight-through training and the steps part ways from there (docs/results.md measures it); the
    rows without training agree to many digits."""
    out = {"torch": torch.__version__, "cpu": _cpu_name(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "threads": torch.get_num_threads()}
    if str(device).startswith("cuda") and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return out


def _row(name, seed, result, scores, config):
    acc = scores.get("accuracy", {})
    return {"family": name, "seed": seed, "wbits": config.wbits, "abits": config.abits, "kvbits": config.kvbits,
            "method": config.method, "wikitext_ln_ppl": scores["wikitext"]["log_ppl"],
            "heldout_ln_ppl": scores["heldout"]["log_ppl"], "acc": acc.get("acc"), "acc_norm": acc.get("acc_norm"),
            "scored": _scoring(config), "device": config.device, "machine": machine(config.device), **(result or {})}


#: Settings that say how a row is scored, not how its model is made. A study rerun in its folder with
#: other values of these scores its finished rows again: each model is made again (a learned rotation
#: resumes from its finished calibration checkpoint under ``OUT/calibration``, so nothing retrains)
#: and scored the new way. This is how the accuracy column or the whole WikiText-2 split is added to
#: a study that has its ln PPL on a subset.
SCORING = ("wikitext_windows", "accuracy_items")


def _scoring(config) -> dict:
    return {name: getattr(config, name) for name in SCORING}


def _rescored(old, new, log) -> dict:
    """``new``, the row of a model made again to be scored another way, with what ``old`` (the row
    of the same model as first made, or None) recorded of its calibration when the calibration was not
    run again (resumed from its finished checkpoint): its seconds and training record. Where the
    WikiText-2 windows are the same, the model made again must score what it scored before; a
    difference is logged (a calibration that does not resume bit-exact)."""
    if old is None:
        return new
    training = new.get("training")
    if training is None or training.get("resumed_from", 0) >= training.get("steps", 0):  # nothing trained now
        for name in ("calibration_seconds", "training"):
            if name in old:
                new[name] = old[name]
        if "machine" in old:  # the calibration (and its seconds) is that machine's; the scores are this one's
            new["calibrated_on"] = old["machine"]
    new["rescored_from"] = old.get("scored")
    if (old.get("scored") or {}).get("wikitext_windows", "?") == new["scored"]["wikitext_windows"]:
        if old["wikitext_ln_ppl"] != new["wikitext_ln_ppl"]:
            where, now = old.get("machine"), new.get("machine")
            other = f" (made before on {where}, now on {now})" if where and where != now else ""
            log(f"warning: {new['family']} seed {new['seed']} made again scores WikiText-2 ln PPL "
                f"{new['wikitext_ln_ppl']!r}, not the {old['wikitext_ln_ppl']!r} it scored before{other}")
    return new


def run(config: QuantizeConfig, log=print) -> dict:
    """The study: the original model's row, then one row per rotation family and seed. Returns
    {"rows", "table", "online", "wikitext"}; writes ``results.json`` and ``results.md`` in ``out_dir``, the
    JSON after every row. Rerun in the same ``out_dir`` it skips the finished rows, adds the rows of new
    families and seeds, refuses other settings, and scores its rows again where :data:`SCORING` changed.
    ``config.threads`` holds for the study; the process has its thread settings back when it returns
    (:func:`galinear.optim.threads.kept`)."""
    config.check()
    with threads.kept():
        if config.threads:
            torch.set_num_threads(config.threads)
        return _study(config, log)


def _study(config: QuantizeConfig, log) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    loaded = models.load_model(config.model, config.gguf_file)
    loaded.model.to(config.device)
    fusion.check_architecture(loaded.model) if any(r != "none" for r in config.rotations) else None
    original = loaded.model
    calib, heldout = calibration_windows(loaded, config)
    wiki = _wikitext(loaded, config)
    os.makedirs(config.out_dir, exist_ok=True)
    path = os.path.join(config.out_dir, "results.json")
    done, online = _finished_rows(path, config)
    scoring = _scoring(config)
    if done.get("float", {}).get("scored") == scoring:
        rows = [done["float"]]
    else:
        rows = [_rescored(done.get("float"), _row("float (not quantized)", None, {"rotation_parameters": 0},
                                                  score(original, loaded, config, wiki, heldout), config), log)]
    log(f"float: WikiText-2 ln PPL {rows[0]['wikitext_ln_ppl']:.4f}")

    def save():  # after every row: an interrupted study keeps its rows and a rerun skips them
        made = {_row_key(row) for row in rows}
        others = [row for key, row in done.items() if key not in made]  # families and seeds not asked for now
        _io.save_json(path, {"settings": _settings(config), "rows": rows + others, "online": online})

    save()
    for family in config.rotations:
        for seed in (config.seeds if family != "none" else config.seeds[:1]):
            old = done.get((family, seed))
            if (old is not None and old.get("scored") == scoring
                    and not (config.save and not os.path.isdir(_model_folder(config, family, seed)))):
                rows.append(old)
                log(f"{family} seed {seed}: WikiText-2 ln PPL {rows[-1]['wikitext_ln_ppl']:.4f} (from {path})")
                continue
            model = copy.deepcopy(original)
            result = quantize_model(model, config, family, seed, calib, log=log if config.progress else None)
            result.pop("clips", None)
            rows.append(_rescored(old, _row(family, seed, result, score(model, loaded, config, wiki, heldout), config),
                                  log))
            log(f"{family} seed {seed}: WikiText-2 ln PPL {rows[-1]['wikitext_ln_ppl']:.4f}")
            if online is None and family != "none":
                online = online_cost(model)
            if config.save:
                save_model(model, loaded.tokenizer, _model_folder(config, family, seed),
                           {"format": "galinear-quantize-v1", "settings": _settings(config), "family": family,
                            "seed": seed, "source": config.model, "simulated": True})
            save()
            del model
    table = format_table(rows, config, wiki)
    save()
    _io.atomic_write_text(os.path.join(config.out_dir, "results.md"), table + "\n")
    return {"rows": rows, "table": table, "online": online}


#: Settings that change which rows a study has, or how it runs, but not any row's numbers (``device``
#: changes them by float rounding only: a study resumes on another device, and each row records its own).
_ROW_NEUTRAL = ("rotations", "seeds", "threads", "device", "out_dir", "save", "progress", "extra")


def _model_folder(config, family: str, seed: int) -> str:
    return os.path.join(config.out_dir, "models", f"{family}-s{seed}")


def _finished_rows(path: str, config) -> tuple:
    """({"float" or (family, seed): row}, online cost) of an earlier run of this study in ``path``; ValueError
    when it holds a study of other settings (other than :data:`SCORING`: each row says how it was scored)."""
    if not os.path.exists(path):
        return {}, None
    record = _io.load_json(path, fix="delete it, or give another --out, to start the study again")
    neutral = _ROW_NEUTRAL + SCORING
    mine = {k: v for k, v in _settings(config).items() if k not in neutral}
    defaults = _settings(QuantizeConfig())  # a setting newer than the file: its default is what that run used
    recorded = {**defaults, **(record.get("settings") or {})}
    theirs = {k: v for k, v in recorded.items() if k not in neutral}
    if mine != theirs:
        changed = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        raise ValueError(f"{path} holds a quantization study of other settings ({', '.join(changed)} differ); give "
                         "another --out, or delete it to start again")
    done = {}
    for row in record.get("rows", []):
        row.setdefault("scored", {name: recorded[name] for name in SCORING})  # a file from before rows said so
        done[_row_key(row)] = row
    return done, record.get("online")


def _row_key(row) -> str | tuple:
    return "float" if row.get("seed") is None and row.get("family", "").startswith("float") else (row["family"],
                                                                                                  row["seed"])


def _settings(config) -> dict:
    """The config's fields, and ``kv_cache`` (:data:`KV_CACHE`) when the cache is quantized: a study
    whose file lacks it quantized K before RoPE, so its rows do not mix with these."""
    out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(config).items()}
    if config.kvbits < 16:
        out["kv_cache"] = KV_CACHE
    return out


def format_table(rows, config, wiki=None) -> str:
    """A markdown table of the rows (simulated quantization, said in its caption)."""
    windows = "all" if config.wikitext_windows is None else str(config.wikitext_windows)
    grids = "per output channel" if config.group_size is None else \
        f"one grid per {config.group_size} input columns of each output channel"
    lines = [f"Simulated (fake) quantization, W{config.wbits}A{config.abits}KV{config.kvbits}, "
             f"{config.method.upper()} weights ({'symmetric' if config.symmetric else 'asymmetric'}, {grids}); "
             f"WikiText-2 ln PPL on {windows} test windows of {config.wikitext_window} tokens; held-out "
             f"Wikipedia ln PPL on {config.heldout_windows} windows; calibration on {config.calib_windows} Wikipedia "
             f"windows of {config.window} tokens." + (
                 f" KV cache {config.kvbits}-bit per token and head, K quantized after RoPE, Q and K of every "
                 "rotated row rotated per head by R3 (a random Hadamard) after RoPE." if config.kvbits < 16 else ""),
             "",
             "| rotation | seed | WikiText-2 ln PPL | held-out Wikipedia ln PPL | acc | rotation parameters | "
             "% of Cayley's | calibration s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cayley = r.get("cayley_parameters")
        share = f"{100 * r['rotation_parameters'] / cayley:.2f}" if cayley and r.get("rotation_parameters") else "-"
        acc = "-" if r.get("acc") is None else f"{r['acc']:.3f}"
        seconds = r.get("calibration_seconds")
        lines.append(f"| {r['family']} | {'-' if r['seed'] is None else r['seed']} | {r['wikitext_ln_ppl']:.4f} | "
                     f"{r['heldout_ln_ppl']:.4f} | {acc} | {r.get('rotation_parameters', 0):,} | {share} | "
                     f"{'-' if seconds is None else f'{seconds:.0f}'} |")
    return "\n".join(lines)
