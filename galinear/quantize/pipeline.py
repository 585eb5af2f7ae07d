r"""Post-training quantization of a causal LM with a rotation of each family, scored side by side.

All quantization here is simulated (fake) quantization: weights, activations and the KV cache are
rounded to their grids and kept as floats (:mod:`galinear.quantize.quantizers`).

For each rotation family and seed (:class:`QuantizeConfig`), starting from the original model:

1. unless the family is ``none`` (the baseline: the model's own weights): fold every RMSNorm scale
   into the next linear layers (:func:`~galinear.quantize.fusion.fold_norms`; not for Gemma-3, whose
   online R1 rotates the norms' scaled outputs), then R2, a random
   Hadamard of the head width, fused between V and O, and the online Hadamard before down_proj
   (:mod:`galinear.quantize.fusion`); with a quantized KV cache also R3, a random Hadamard of the head
   width applied online to Q and K of every head after RoPE (:mod:`galinear.quantize.attention`);
2. R1 of the family (:mod:`galinear.quantize.rotations`); a learned one is trained first on the
   calibration windows (:func:`~galinear.quantize.calibrate.distill_rotation` or
   :func:`~galinear.quantize.calibrate.train_rotation`), then fused (applied online for Gemma-3);
3. the weights of every decoder layer quantized (RTN or GPTQ), activations per token with clipping
   ratios searched on the calibration windows, the KV cache per token and head, K after RoPE (and
   after R3);
4. scored: ln PPL on a stated subset of WikiText-2 test windows (or all of them), ln PPL on held-out
   Wikipedia windows, and, when asked, next-sentence accuracy through lm-eval's HFLM.

Calibration text: Wikipedia lead paragraphs (the training side of a leak-free split; the held-out
side is scored), never WikiText-2.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import time
from dataclasses import dataclass, field

import torch

from galinear import _io
from galinear.lm import models
from galinear.quantize import attention, calibrate, fusion
from galinear.quantize.hadamard import apply_hadamard, hadamard_factors
from galinear.quantize.quantizers import (
    ACTIVATION_BITS, check_bits, quantize_activation, search_clip_ratio,
)
from galinear.quantize.rotations import FAMILIES, LEARNED, Rotation, dense_parameters

__all__ = ["QuantizeConfig", "PRESETS", "preset", "prepare", "r3_matrix", "quantize_model", "run", "format_table",
           "install_activation_quantizers", "save_model", "online_cost", "KV_CACHE"]

#: Where the KV cache is quantized (recorded in a study's settings when ``kvbits < 16``).
KV_CACHE = "per token and head, K after RoPE and R3"


#: Training objectives of the learned rotations (:mod:`galinear.quantize.calibrate`).
OBJECTIVES = ("distill", "error")


@dataclass
class QuantizeConfig:
    """Settings of one quantization study (``galinear quantize``; the fields are its options)."""

    model: str = models.DEFAULT_MODEL
    gguf_file: str | None = None
    wbits: int = 4
    abits: int = 16
    kvbits: int = 16
    method: str = "rtn"
    symmetric: bool = True
    damp: float = 0.01
    act_order: bool = True
    rotations: tuple = FAMILIES
    seeds: tuple = (0,)
    chunk: int | None = None
    rotor_layers: int = 1
    objective: str = "distill"
    steps: int = 20
    lr: float = 0.02
    tokens_per_step: int | None = None
    layers_per_step: int = 8
    rows_per_step: int | None = 64
    calib_windows: int = 8
    window: int = 256
    wikitext_windows: int | None = 8
    wikitext_window: int = 256
    heldout_windows: int = 4
    accuracy_items: int = 0
    threads: int | None = None
    out_dir: str = "runs/quantize"
    save: bool = False
    progress: bool = True
    extra: dict = field(default_factory=dict)

    def check(self) -> None:
        check_bits(self.wbits)
        if isinstance(self.rotor_layers, bool) or not isinstance(self.rotor_layers, int) or self.rotor_layers < 1:
            raise ValueError(f"--rotor-layers must be an integer >= 1, got {self.rotor_layers!r}")
        check_bits(self.abits, "activation", ACTIVATION_BITS, "--abits")
        check_bits(self.kvbits, "KV cache", ACTIVATION_BITS, "--kvbits")
        if self.method not in ("rtn", "gptq"):
            raise ValueError(f"--method: unknown weight quantizer {self.method!r}; choose rtn or gptq")
        unknown = [r for r in self.rotations if r not in FAMILIES]
        if unknown or not self.rotations:
            raise ValueError(f"--rotations: unknown rotation family {', '.join(unknown) or '(none given)'}; choose "
                             f"from {', '.join(FAMILIES)}")
        for name in ("calib_windows", "window", "wikitext_window", "heldout_windows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"--objective: unknown training objective {self.objective!r}; choose "
                             f"{' or '.join(OBJECTIVES)}")
        if self.tokens_per_step is not None and (isinstance(self.tokens_per_step, bool)
                                                 or not isinstance(self.tokens_per_step, int)
                                                 or self.tokens_per_step < 2):
            raise ValueError(f"--tokens-per-step must be an integer >= 2, got {self.tokens_per_step!r}")
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"--steps must be an integer >= 0, got {self.steps!r}")


#: Named settings (``--preset``): demo runs on the embedded default in a few minutes on 2 cores (the
#: seed-0 rows of the W4A16 RTN study in docs/results.md).
PRESETS = {
    "demo": dict(wbits=4, abits=16, method="rtn", rotations=FAMILIES, seeds=(0,), objective="distill", steps=12,
                 lr=0.005, tokens_per_step=128, calib_windows=4, window=256, wikitext_windows=6, wikitext_window=256,
                 heldout_windows=3, accuracy_items=0),
    "standard": dict(),
}


def preset(name: str, **changes) -> QuantizeConfig:
    if name not in PRESETS:
        raise ValueError(f"--preset: unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return QuantizeConfig(**{**PRESETS[name], **changes})


# ------------------------------------------------------------------------------------ model steps
def prepare(model, family: str, seed: int, chunk: int | None = None, dtype=torch.float32, layers: int = 1):
    """Step 1 of the module doc on ``model`` in place; returns the R1 :class:`Rotation` (not applied
    yet: :func:`galinear.quantize.fusion.apply_r1` fuses it, or applies it online where
    :func:`~galinear.quantize.fusion.r1_mode` says so). Family ``none`` is the baseline: the model's own
    weights, no norm folded (folding scales the columns the grids are set on) and nothing rotated."""
    if family == "none":
        return Rotation("none", model.config.hidden_size, seed, chunk, dtype)
    fusion.check_architecture(model)
    fusion.fold_norms(model)
    width = model.config.hidden_size
    rotation = Rotation(family, width, seed, chunk, dtype, layers if family == "rotor" else 1)
    hd = fusion.head_dim(model)
    fusion.rotate_heads(model, Rotation("hadamard", hd, seed + 7919).matrix())
    fusion.online_hadamard(model)
    return rotation


def r3_matrix(model, family: str, seed: int, kvbits: int):
    """R3 of a row: a random Hadamard of the head width (seed ``seed + 104729``) for every family but
    ``none`` when the KV cache is quantized, else None (with the cache in floating point it changes nothing)."""
    if family == "none" or kvbits >= 16:
        return None
    return Rotation("hadamard", fusion.head_dim(model), seed + 104729).matrix()


def _layer_weights(model) -> list:
    return [{name: models.projection(model, i, name).weight.detach().clone().to(torch.float32)
             for name in calibrate.LINEARS} for i in range(len(models.decoder_layers(model)))]


def install_activation_quantizers(model, abits: int, kvbits: int, windows=None, r3=None) -> dict:
    """Forward pre-hooks quantizing every decoder linear layer's input per token (clipping ratio
    searched on ``windows`` per layer) and, when ``kvbits < 16``, the KV cache quantized per token and
    head after RoPE, K after ``r3`` when given (:func:`galinear.quantize.attention.install_kv_quantizer`).
    Returns {"clips": {(layer, projection): ratio}}."""
    clips = {}
    if kvbits < 16:
        attention.install_kv_quantizer(model, kvbits, r3)
    for index in range(len(models.decoder_layers(model))):
        stats = calibrate.capture_layer(model, windows, index) if abits < 16 and windows else None
        for name in calibrate.LINEARS:
            linear = models.projection(model, index, name)
            if abits < 16:
                ratio = search_clip_ratio(stats[name]["rows"], abits, linear.weight) if stats else 1.0
                clips[(index, name)] = ratio
                linear.register_forward_pre_hook(
                    lambda module, args, r=ratio: (quantize_activation(args[0], abits, r),) + tuple(args[1:]))
    return {"clips": clips}


def quantize_model(model, config: QuantizeConfig, family: str, seed: int, calib, log=None) -> dict:
    """Steps 1-3 of the module doc on ``model`` in place; returns what the report needs."""
    t0 = time.perf_counter()
    rotation = prepare(model, family, seed, config.chunk, layers=config.rotor_layers)
    r3 = r3_matrix(model, family, seed, config.kvbits)
    training = None
    if family in LEARNED and config.steps > 0:
        torch.manual_seed(seed)
        folder = os.path.join(config.out_dir, "calibration")
        os.makedirs(folder, exist_ok=True)
        depth = f"-l{config.rotor_layers}" if family == "rotor" and config.rotor_layers > 1 else ""
        kv = f"kv{config.kvbits}" if config.objective == "distill" and config.kvbits < 16 else ""
        checkpoint = os.path.join(folder, f"{family}{depth}-{config.objective}-w{config.wbits}a{config.abits}{kv}"
                                          f"-s{seed}.safetensors")
        lr = config.lr / 10 if family == "cayley" else config.lr
        if config.objective == "distill":
            training = calibrate.distill_rotation(model, rotation, calib, config.wbits, config.abits, config.steps, lr,
                                                  seed, config.symmetric, config.tokens_per_step,
                                                  checkpoint=checkpoint, log=log, kvbits=config.kvbits, r3=r3)
        else:
            stats = calibrate.capture_layers(model, calib, range(len(models.decoder_layers(model))), seed=seed)
            training = calibrate.train_rotation(rotation, _layer_weights(model), stats, config.wbits, config.abits,
                                                config.steps, lr, config.layers_per_step, seed, config.symmetric,
                                                rows_per_step=config.rows_per_step,
                                                rotated=fusion.r1_projections(model), checkpoint=checkpoint, log=log)
    with torch.no_grad():
        fusion.apply_r1(model, rotation)
    calibration_seconds = time.perf_counter() - t0
    weights = calibrate.quantize_weights(model, config.wbits, config.method, config.symmetric, calib, config.damp,
                                         config.act_order, log=log)
    activations = install_activation_quantizers(model, config.abits, config.kvbits, calib, r3)
    return {"rotation": rotation.describe(), "rotation_parameters": rotation.num_parameters(),
            "cayley_parameters": dense_parameters(rotation.width), "training": training,
            "calibration_seconds": calibration_seconds + weights["seconds"], "clips": activations["clips"],
            "online": family != "none", "r3": r3 is not None}


# ------------------------------------------------------------------------------------ scoring
def online_cost(model, tokens: int = 256, repeats: int = 20) -> dict:
    """Milliseconds of the online Hadamard before down_proj, of a fast Walsh-Hadamard transform of the
    next power of two, of down_proj itself and of one decoder layer, on ``tokens`` rows, side by side.

    For a model whose R1 is applied online (:func:`galinear.quantize.fusion.r1_mode`), also
    ``"online_r1"``: the milliseconds of one application of each family's online R1 at the hidden
    width (:class:`~galinear.quantize.fusion.OnlineRotation`: the fast Hadamard transform, the same
    followed by the chunk blocks for butterfly and rotor, a dense product for Cayley, and the dense
    product for every family side by side), next to the layers it precedes (q, k and v after
    input_layernorm, gate and up after pre_feedforward_layernorm); it runs twice a decoder layer.

    ``"r3"``: R3, applied online when the KV cache is quantized (:mod:`galinear.quantize.attention`):
    the milliseconds of the per-head products of the queries and of the keys (``tokens`` x heads
    and ``tokens`` x key-value heads rows of head_dim) with the head_dim x head_dim matrix, and of
    the same by the fast Hadamard transform (:func:`~galinear.quantize.hadamard.apply_hadamard`), next
    to q_proj and k_proj; it runs once a decoder layer."""
    from galinear.nn.functional import fwht

    width = models.projection(model, 0, "down_proj").in_features
    x = torch.randn(tokens, width)
    power = 1 << (width - 1).bit_length()
    xp = torch.randn(tokens, power)
    down = models.projection(model, 0, "down_proj")

    def timed(fn):
        with torch.no_grad():
            fn()
            t0 = time.perf_counter()
            for _ in range(repeats):
                fn()
        return 1000 * (time.perf_counter() - t0) / repeats

    out = {"tokens": tokens, "width": width, "online_hadamard_ms": timed(lambda: apply_hadamard(x)),
           "fwht_ms": timed(lambda: fwht(xp)), "fwht_width": power,
           "down_proj_ms": timed(lambda: torch.nn.functional.linear(x, down.weight)),
           "layer_ms": timed(_first_layer_call(model, tokens))}
    if fusion.r1_mode(model) == "online":
        out["online_r1"] = _online_r1_cost(model, tokens, timed)
    out["r3"] = _r3_cost(model, tokens, timed)
    return out


def _first_layer_call(model, tokens: int):
    """A call of ``model``'s first decoder layer on ``tokens`` random rows, its rotary table included
    (Gemma-3 keeps one per attention kind: the first layer's)."""
    import inspect

    block = models.decoder_layers(model)[0]
    h = torch.randn(1, tokens, model.config.hidden_size)
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    layer_types = getattr(model.config, "layer_types", None)
    kind = () if rotary is None or not layer_types or "layer_type" not in inspect.signature(rotary.forward).parameters else (
        layer_types[0],)

    def layer():
        position = torch.arange(tokens)[None]
        emb = rotary(h, position, *kind) if rotary is not None else None
        return block(h, position_embeddings=emb, position_ids=position)

    return layer


def _r3_cost(model, tokens: int, timed) -> dict:
    """R3's side of :func:`online_cost` (its doc). ``timed``: fn -> what is recorded for it (here its
    milliseconds; ``benchmarks/bench_quantize_rotation.py`` keeps the fn, to time it side by side)."""
    hd = fusion.head_dim(model)
    heads = model.config.num_attention_heads
    kv_heads = getattr(model.config, "num_key_value_heads", None) or heads
    q, k = torch.randn(1, heads, tokens, hd), torch.randn(1, kv_heads, tokens, hd)
    R = Rotation("hadamard", hd, 0).matrix()
    x = torch.randn(tokens, model.config.hidden_size)
    weights = [models.projection(model, 0, name).weight for name in ("q_proj", "k_proj")]
    try:
        hadamard_factors(hd)
        fast = timed(lambda: (apply_hadamard(q), apply_hadamard(k)))
    except ValueError:  # no Hadamard order covers head_dim: only the dense product is timed
        fast = None
    return {"tokens": tokens, "head_dim": hd, "heads": heads, "kv_heads": kv_heads, "per_layer": 1,
            "dense_ms": timed(lambda: (q @ R, k @ R)), "fast_ms": fast,
            "qk_proj_ms": timed(lambda: [torch.nn.functional.linear(x, w) for w in weights])}


def _online_r1_cost(model, tokens: int, timed) -> dict:
    """The online R1's side of :func:`online_cost` (its doc); ``timed`` as in :func:`_r3_cost`."""
    hidden = model.config.hidden_size
    x = torch.randn(tokens, hidden)

    def linears(*names):
        weights = [models.projection(model, 0, name).weight for name in names]
        return timed(lambda: [torch.nn.functional.linear(x, w) for w in weights])

    families, how, dense = {}, {}, {}
    for family in FAMILIES[1:]:
        rotation = Rotation(family, hidden, 0)
        with torch.no_grad():
            for p in rotation.parameters():
                p.normal_(0.0, 0.1)  # away from the start, where the learned factor is the identity
        online = fusion.online_rotation(rotation)
        product = fusion.OnlineRotation(online.matrix)
        families[family] = timed(lambda online=online: online(x))  # bound now: ``timed`` may keep the fn
        how[family] = online.kind
        dense[family] = timed(lambda product=product: product(x))
    return {"tokens": tokens, "width": hidden, "per_layer": 2, "ms": families, "route": how, "dense_ms": dense,
            "qkv_proj_ms": linears("q_proj", "k_proj", "v_proj"), "gate_up_proj_ms": linears("gate_proj", "up_proj")}


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
    """lm-eval's acc and acc_norm on ``items`` next-sentence questions from the WikiText-2 test split."""
    import tempfile

    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from galinear.data.choice import next_sentence_items, write_lm_eval_task
    from galinear.lm import wikitext

    task = "galinear_quantize_next_sentence"
    with tempfile.TemporaryDirectory() as folder:
        write_lm_eval_task(folder, next_sentence_items(wikitext.read_file(), items, seed=0), name=task)
        lm = HFLM(pretrained=model, tokenizer=tokenizer, device="cpu", batch_size=batch_size)
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
    family computing the same function."""
    plain = copy.deepcopy(model)
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
def _row(name, seed, result, scores, config):
    acc = scores.get("accuracy", {})
    return {"family": name, "seed": seed, "wbits": config.wbits, "abits": config.abits, "kvbits": config.kvbits,
            "method": config.method, "wikitext_ln_ppl": scores["wikitext"]["log_ppl"],
            "heldout_ln_ppl": scores["heldout"]["log_ppl"], "acc": acc.get("acc"), "acc_norm": acc.get("acc_norm"),
            **(result or {})}


def run(config: QuantizeConfig, log=print) -> dict:
    """The study: the original model's row, then one row per rotation family and seed. Returns
    {"rows", "table", "online", "wikitext"}; writes ``results.json`` and ``results.md`` in ``out_dir``."""
    config.check()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if config.threads:
        torch.set_num_threads(config.threads)
    loaded = models.load_model(config.model, config.gguf_file)
    fusion.check_architecture(loaded.model) if any(r != "none" for r in config.rotations) else None
    original = loaded.model
    calib, heldout = calibration_windows(loaded, config)
    wiki = _wikitext(loaded, config)
    os.makedirs(config.out_dir, exist_ok=True)
    path = os.path.join(config.out_dir, "results.json")
    done, online = _finished_rows(path, config)
    if "float" in done:
        rows = [done["float"]]
    else:
        rows = [_row("float (not quantized)", None, {"rotation_parameters": 0},
                     score(original, loaded, config, wiki, heldout), config)]
    log(f"float: WikiText-2 ln PPL {rows[0]['wikitext_ln_ppl']:.4f}")

    def save():  # after every row: an interrupted study keeps its rows and a rerun skips them
        _io.save_json(path, {"settings": _settings(config), "rows": rows, "online": online})

    save()
    for family in config.rotations:
        for seed in (config.seeds if family != "none" else config.seeds[:1]):
            if (family, seed) in done and not (config.save and not os.path.isdir(_model_folder(config, family, seed))):
                rows.append(done[(family, seed)])
                log(f"{family} seed {seed}: WikiText-2 ln PPL {rows[-1]['wikitext_ln_ppl']:.4f} (from {path})")
                continue
            model = copy.deepcopy(original)
            result = quantize_model(model, config, family, seed, calib, log=log if config.progress else None)
            result.pop("clips", None)
            rows.append(_row(family, seed, result, score(model, loaded, config, wiki, heldout), config))
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


#: Settings that change which rows a study has, or how it runs, but not any row's numbers.
_ROW_NEUTRAL = ("rotations", "seeds", "threads", "out_dir", "save", "progress", "extra")


def _model_folder(config, family: str, seed: int) -> str:
    return os.path.join(config.out_dir, "models", f"{family}-s{seed}")


def _finished_rows(path: str, config) -> tuple:
    """({"float" or (family, seed): row}, online cost) of an earlier run of this study in ``path``; ValueError
    when it holds a study of other settings."""
    if not os.path.exists(path):
        return {}, None
    record = _io.load_json(path, fix="delete it, or give another --out, to start the study again")
    mine = {k: v for k, v in _settings(config).items() if k not in _ROW_NEUTRAL}
    defaults = _settings(QuantizeConfig())  # a setting newer than the file: its default is what that run used
    theirs = {k: v for k, v in {**defaults, **(record.get("settings") or {})}.items() if k not in _ROW_NEUTRAL}
    if mine != theirs:
        changed = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        raise ValueError(f"{path} holds a quantization study of other settings ({', '.join(changed)} differ); give "
                         "another --out, or delete it to start again")
    done = {}
    for row in record.get("rows", []):
        done["float" if row.get("seed") is None and row.get("family", "").startswith("float") else
             (row["family"], row["seed"])] = row
    return done, record.get("online")


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
    lines = [f"Simulated (fake) quantization, W{config.wbits}A{config.abits}KV{config.kvbits}, "
             f"{config.method.upper()} weights ({'symmetric' if config.symmetric else 'asymmetric'}, per output "
             f"channel); WikiText-2 ln PPL on {windows} test windows of {config.wikitext_window} tokens; held-out "
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
