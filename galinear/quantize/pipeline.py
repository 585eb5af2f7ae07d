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
4. scored (:mod:`galinear.quantize.study`): ln PPL on a stated subset of WikiText-2 test windows (or
   all of them), ln PPL on held-out Wikipedia windows, and, when asked, next-sentence accuracy
   through lm-eval's HFLM.

Calibration text: Wikipedia lead paragraphs (the training side of a leak-free split; the held-out
side is scored), never WikiText-2.
"""
from __future__ import annotations

import os
import time

import torch

from galinear.lm import models
from galinear.quantize import attention, calibrate, fusion
from galinear.quantize.config import QuantizeConfig
from galinear.quantize.quantizers import quantize_activation, search_clip_ratio
from galinear.quantize.rotations import LEARNED, Rotation, dense_parameters

__all__ = ["prepare", "r3_matrix", "install_activation_quantizers", "quantize_model"]


def prepare(model, family: str, seed: int, chunk: int | None = None, dtype=torch.float32, layers: int = 1):
    """Step 1 of the module doc on ``model`` in place; returns the R1 :class:`Rotation` (not applied
    yet: :func:`galinear.quantize.fusion.apply_r1` fuses it, or applies it online where
    :func:`~galinear.quantize.fusion.r1_mode` says so), on the device of the model's weights. Family
    ``none`` is the baseline: the model's own weights, no norm folded (folding scales the columns the
    grids are set on) and nothing rotated."""
    device = models.input_device(model)
    if family == "none":
        return Rotation("none", model.config.hidden_size, seed, chunk, dtype).to(device)
    fusion.check_architecture(model)
    fusion.fold_norms(model)
    width = model.config.hidden_size
    rotation = Rotation(family, width, seed, chunk, dtype, layers if family == "rotor" else 1).to(device)
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
        how = "" if config.optimizer == "adam" else f"-{config.optimizer}"
        groups = "" if config.group_size is None else f"g{config.group_size}"
        checkpoint = os.path.join(folder, f"{family}{depth}-{config.objective}{how}-w{config.wbits}{groups}"
                                          f"a{config.abits}{kv}-s{seed}.safetensors")
        lr = config.lr / 10 if family == "cayley" else config.lr
        if config.objective == "distill":
            training = calibrate.distill_rotation(model, rotation, calib, config.wbits, config.abits, config.steps, lr,
                                                  seed, config.symmetric, config.tokens_per_step,
                                                  checkpoint=checkpoint, log=log, kvbits=config.kvbits, r3=r3,
                                                  optimizer=config.optimizer, group_size=config.group_size)
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
                                         config.act_order, log=log, group_size=config.group_size)
    activations = install_activation_quantizers(model, config.abits, config.kvbits, calib, r3)
    return {"rotation": rotation.describe(), "rotation_parameters": rotation.num_parameters(),
            "cayley_parameters": dense_parameters(rotation.width), "training": training,
            "calibration_seconds": calibration_seconds + weights["seconds"], "clips": activations["clips"],
            "online": family != "none", "r3": r3 is not None}

