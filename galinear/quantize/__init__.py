"""Post-training quantization of causal LMs with rotations fused into the weights, all simulated
(fake) quantization in torch: weights per output channel or group (RTN or GPTQ), activations per
token, the KV cache per token and head, K after RoPE.

- :mod:`galinear.quantize.quantizers`, :mod:`galinear.quantize.gptq`: the quantizers;
- :mod:`galinear.quantize.hadamard`: Hadamard matrices of the models' widths (Paley and Sylvester);
- :mod:`galinear.quantize.rotations`: the rotation families (none, hadamard, cayley, butterfly, rotor);
- :mod:`galinear.quantize.fusion`: the rotations fused into a Llama-family model (R1, R2, online R4);
- :mod:`galinear.quantize.attention`: the KV cache quantized after RoPE, with the online R3 on Q and K;
- :mod:`galinear.quantize.calibrate`: calibration statistics, weight quantization, learned rotations;
- :mod:`galinear.quantize.optimise`: how a learned rotation follows its loss (Adam, or descent with a
  line search), checkpointed and resumed;
- :mod:`galinear.quantize.config`: a study's settings (:class:`~galinear.quantize.config.QuantizeConfig`) and presets;
- :mod:`galinear.quantize.pipeline`: the steps that quantize one model with one rotation;
- :mod:`galinear.quantize.cost`: the online rotations' run-time cost beside the layers they precede;
- :mod:`galinear.quantize.study`: the study behind ``galinear quantize``: rows, scores, tables, saved folders.

torch and transformers load with the submodules, not on ``import galinear.quantize``.
"""
