"""The run-time cost of the rotations of ``galinear quantize``, side by side in one run.

The online rotation before down_proj (the one that cannot be fused) is timed beside a fast
Walsh-Hadamard transform of the next power of two, beside the same rotation as a dense product,
beside down_proj itself and beside one whole decoder layer; then, for reference, what R1 would cost
if it were applied at run time instead of fused (it is fused, so it costs nothing): a dense
width x width product (Cayley), the rotor chunks (block-diagonal products of the 64 x 64 rotor
maps after the fixed Hadamard) and the butterflies. SmolLM2-135M-Instruct's shapes (hidden 576,
MLP 1536), float32, ``--tokens`` rows, interleaved rounds (median of ``--repeats``).

    python benchmarks/bench_quantize_rotation.py [--tokens 256] [--threads 1] [--repeats 7]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from _common import command_line, header, markdown_table, metadata, round_robin, set_threads, statistic  # noqa: E402


def contenders(model, tokens: int) -> dict:
    from galinear.lm import models
    from galinear.nn.functional import fwht
    from galinear.quantize.hadamard import apply_hadamard, hadamard
    from galinear.quantize.rotations import Rotation

    width = models.projection(model, 0, "down_proj").in_features
    hidden = model.config.hidden_size
    power = 1 << (width - 1).bit_length()
    x, xp, h = torch.randn(tokens, width), torch.randn(tokens, power), torch.randn(tokens, hidden)
    dense_h = torch.as_tensor(hadamard(width), dtype=torch.float32) / width ** 0.5
    down = models.projection(model, 0, "down_proj")
    block = models.decoder_layers(model)[0]
    rotary = model.model.rotary_emb
    position = torch.arange(tokens)[None]
    states = h[None]
    emb = rotary(states, position)
    rotor = Rotation("rotor", hidden, seed=0)
    butterfly = Rotation("butterfly", hidden, seed=0)
    with torch.no_grad():
        for p in list(rotor.parameters()) + list(butterfly.parameters()):
            p.normal_(0.0, 0.1)
        q_full = rotor.matrix()
        chunks = torch.stack([b.dense_weight().t() for b in rotor.blocks])  # (9, 64, 64)
    base = rotor.base

    def rotor_online():
        y = (h @ base).reshape(tokens, rotor.chunks, rotor.chunk)
        return torch.einsum("tcj,cjk->tck", y, chunks).reshape(tokens, hidden)

    def butterfly_online():
        y = (h @ base).reshape(tokens, butterfly.chunks, butterfly.chunk)
        return torch.cat([b(y[:, i]) for i, b in enumerate(butterfly.blocks)], dim=-1)

    return {
        f"online Hadamard {width} (fast)": lambda: apply_hadamard(x),
        f"FWHT {power}": lambda: fwht(xp),
        f"Hadamard {width} as a dense product": lambda: x @ dense_h.t(),
        f"down_proj ({width} -> {hidden})": lambda: torch.nn.functional.linear(x, down.weight),
        "one decoder layer": lambda: block(states, position_embeddings=emb, position_ids=position),
        f"R1 online: dense {hidden} x {hidden} (Cayley)": lambda: h @ q_full,
        f"R1 online: Hadamard {hidden} + rotor chunks": rotor_online,
        f"R1 online: Hadamard {hidden} + butterflies": butterfly_online,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    from galinear.lm import load_model

    model = load_model(args.model).model
    with torch.no_grad():
        timings = statistic(round_robin(contenders(model, args.tokens), args.repeats, min_sample_seconds=0.05))
    layer = timings["one decoder layer"]
    rows = [[name, f"{1000 * seconds:.3f}", f"{100 * seconds / layer:.1f}"] for name, seconds in timings.items()]
    text = (header(metadata(command_line("benchmarks/bench_quantize_rotation.py", argv), packages=("torch",)))
            + f"\n\n{args.tokens} rows, float32, {args.threads} thread(s), median of {args.repeats} interleaved "
            "rounds.\n\n" + markdown_table(["operation", "ms", "% of one decoder layer"], rows) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
