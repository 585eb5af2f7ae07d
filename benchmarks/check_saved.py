"""A compressed model kept with ``galinear compress --save``: reloaded, scored, and its size on disk.

``python benchmarks/check_saved.py FOLDER [--wikitext-windows 8] [--threads 1]``

Loads FOLDER with :func:`galinear.compress.load` (the original model rebuilt from the source the
folder records, every tensor checked against its SHA-256, the replacements installed) and prints:
the ln PPL on the WikiText-2 test split (the same windows as ``galinear compress`` scores: 2,048
tokens, the tokenizer's BOS first, ``--wikitext-windows`` spread evenly, or the whole split), so
it can be set beside the run's own row; the parameters of the model and of its q/k/v
projections against the original's; and the bytes the folder takes on disk against the float32
bytes of the q/k/v weights it replaces and of the whole model.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--wikitext-windows", type=int, default=8,
                        help="windows spread evenly over the split (default 8; 0: the whole split)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import torch

    from galinear import _numba
    from galinear.compress import load
    from galinear.lm import wikitext, windows
    from galinear.lm.models import PROJECTIONS, attention, decoder_layers
    from galinear.lm.perplexity import stream_log_perplexity

    torch.set_num_threads(args.threads)
    _numba.set_threads(args.threads)
    model, tokenizer = load(args.folder, with_tokenizer=True)
    bos = windows.bos_token(tokenizer)
    ids = wikitext.token_ids(tokenizer, wikitext.load_text("file"))
    length = wikitext.window_length(model, wikitext.DEFAULT_WINDOW, bos)
    count = args.wikitext_windows or None
    with torch.inference_mode():
        result = stream_log_perplexity(model, ids, length, bos, windows=count)
    total = sum(p.numel() for p in model.parameters())
    qkv = sum(p.numel() for block in decoder_layers(model) for name in PROJECTIONS
              for p in getattr(attention(block), name).parameters())
    blocks = decoder_layers(model)
    config = model.config
    per_layer = config.hidden_size * (config.num_attention_heads + 2 * config.num_key_value_heads) * \
        (config.hidden_size // config.num_attention_heads)
    dense_qkv = len(blocks) * per_layer
    dense_total = total - qkv + dense_qkv
    replaced = sum(not isinstance(attention(b).q_proj, torch.nn.Linear) for b in blocks)
    size = folder_bytes(args.folder)
    print(f"{args.folder}: WikiText-2 ln PPL {result['log_ppl']:.4f} on {result['tokens']:,} tokens "
          f"({result['windows']} of {result['of']} windows of {length}), {result['seconds']:.0f} s")
    print(f"parameters: model {total:,} (original {dense_total:,}); q/k/v {qkv:,} (original {dense_qkv:,}, "
          f"{100 * qkv / dense_qkv:.3f} % kept)")
    print(f"on disk: {size:,} bytes for the folder (parameters and the rotor networks' permutation indices); "
          f"the q/k/v weights of the {replaced} layers it replaces take {4 * replaced * per_layer:,} bytes in "
          f"float32 ({4 * replaced * per_layer / size:.0f}x), the whole model {4 * dense_total:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
