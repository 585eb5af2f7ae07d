"""``galinear generate``: a greedy continuation from the original and a compressed model, side by side."""
import os

from galinear.commands._config_options import int_in
from galinear.commands._report import fail

HELP = ("Print a greedy continuation of a prompt from the original model and from a compressed model kept with "
        "`galinear compress` (under OUT/models, or --save DIR), side by side")
DEFAULT_PROMPT = "The history of the printing press begins"
#: Most new tokens: each one runs the model over the whole sequence again (no cache), so the time grows
#: with the square of the count.
MAX_TOKENS = 4096
#: Output widths: two columns of at least 10 characters and " | " between them, up to a wide terminal's.
MIN_WIDTH, MAX_WIDTH = 23, 1000
_FIX = "check that the folder is the one `galinear compress` wrote, and write it again if it was changed"


def add_arguments(parser):
    parser.add_argument("folder", help="a compressed-model folder written by `galinear compress` (OUT/models/NAME "
                                       "or --save DIR/NAME; or the folder holding it when it holds one model)")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help=f"text to continue (default: {DEFAULT_PROMPT!r})")
    parser.add_argument("--tokens", type=int_in(1, MAX_TOKENS), default=40,
                        help=f"new tokens to generate, 1..{MAX_TOKENS} (default 40)")
    parser.add_argument("--model", default=None,
                        help="load the original model from here instead of the source recorded in the folder")
    parser.add_argument("--gguf-file", default=None, help="GGUF file name inside --model")
    parser.add_argument("--width", type=int_in(MIN_WIDTH, MAX_WIDTH), default=100,
                        help=f"line width of the side-by-side output, {MIN_WIDTH}..{MAX_WIDTH} (default 100)")


def check_tokens(tokens) -> None:
    """``--tokens`` in 1..MAX_TOKENS (the command line parses it so; this is for callers of :func:`compare`)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_TOKENS:
        raise ValueError(f"--tokens must be an integer in 1..{MAX_TOKENS}, got {tokens!r}")


def greedy(model, prompt_ids, tokens: int, eos=None) -> list:
    """``tokens`` new token ids, each the argmax of the next-token logits (ties: the lowest id);
    stops early after ``eos``. Deterministic: no sampling, no cache."""
    import torch

    ids = [int(t) for t in prompt_ids]
    new = []
    with torch.no_grad():
        for _ in range(tokens):
            logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
            token = int(torch.argmax(logits))
            ids.append(token)
            new.append(token)
            if eos is not None and token == eos:
                break
    return new


def prompt_ids(tokenizer, prompt: str) -> list:
    """The prompt's ids, with the BOS token in front where the tokenizer's convention wants one
    (the same convention as the compression windows)."""
    from galinear.lm.windows import bos_token

    if not prompt:
        raise ValueError("the prompt is empty; give --prompt TEXT")
    ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    bos = bos_token(tokenizer)
    return ([bos] if bos is not None else []) + ids


def compare(model, tokenizer, folder: str, prompt: str, tokens: int = 40) -> dict:
    """Greedy continuations of ``prompt`` by ``model`` and then by ``model`` with the replacements of
    ``folder`` installed (in place: ``model`` is the compressed one afterwards).

    Returns ``{"prompt_ids", "original", "compressed"}`` (new token ids) and ``first_difference``
    (index of the first differing new token, None if none).
    """
    from galinear.compress.storage import install

    check_tokens(tokens)
    ids = prompt_ids(tokenizer, prompt)
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(context, int) and len(ids) + tokens > context:
        raise ValueError(f"the prompt's {len(ids)} tokens and --tokens {tokens} make {len(ids) + tokens}, more than "
                         f"the model's context of {context} positions; give --tokens {max(1, context - len(ids))} or "
                         "fewer, or a shorter --prompt")
    eos = getattr(tokenizer, "eos_token_id", None)
    original = greedy(model, ids, tokens, eos)
    install.load(folder, model)
    compressed = greedy(model, ids, tokens, eos)
    first = next((i for i, (a, b) in enumerate(zip(original, compressed)) if a != b), None)
    if first is None and len(original) != len(compressed):
        first = min(len(original), len(compressed))
    return {"prompt_ids": ids, "original": original, "compressed": compressed, "first_difference": first}


def side_by_side(left: str, right: str, width: int = 100, titles=("original", "compressed")) -> str:
    """Two texts in two wrapped columns under their titles."""
    import itertools
    import textwrap

    col = max(10, (width - 3) // 2)
    a = textwrap.wrap(left, col) or [""]
    b = textwrap.wrap(right, col) or [""]
    lines = [f"{titles[0]:<{col}} | {titles[1]}", f"{'-' * col}-+-{'-' * col}"]
    lines += [f"{x:<{col}} | {y}" for x, y in itertools.zip_longest(a, b, fillvalue="")]
    return "\n".join(line.rstrip() for line in lines)


def run(args):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from galinear.compress.storage import folder_format, install
    from galinear.lm import models

    try:
        check_tokens(args.tokens)
        if not args.prompt.strip():
            raise ValueError("--prompt is empty; give the text to continue")
        if args.gguf_file and not args.model:
            raise ValueError("--gguf-file has no effect without --model, whose folder holds the file it names (the "
                             "folder's recorded source has its own); drop --gguf-file or add --model")
        config = folder_format.read_config(args.folder)
        folder_format.checked_replacements(config)  # the folder's own checks come before any model loads
        if args.model:
            loaded = models.load_model(args.model, args.gguf_file)
        else:
            loaded = install.load_source(config)  # recorded path, then the path from the folder
        out = compare(loaded.model, loaded.tokenizer, config["_folder"], args.prompt, args.tokens)
    except (ValueError, OSError) as exc:  # bad input, damaged folders and files: the message names them
        return fail("generate", " ".join(str(exc).split()))
    except Exception as exc:  # noqa: BLE001  (whatever else a damaged folder or model leads to: one line)
        return fail("generate", " ".join(f"{args.folder}: loading or running the compressed model failed "
                                         f"({type(exc).__name__}: {exc}); {_FIX}".split()))
    decode = loaded.tokenizer.decode
    print(f"prompt: {args.prompt}")
    print(f"model: {loaded.name}; compressed: {config['_folder']} ({config.get('method_tag', '?')}, layers "
          f"{','.join(map(str, config.get('layers', [])))}); greedy, {args.tokens} new tokens")
    print()
    print(side_by_side(decode(out["original"]), decode(out["compressed"]), args.width))
    print()
    first = out["first_difference"]
    print("the continuations are identical" if first is None else
          f"the continuations first differ at new token {first + 1}")
    return 0
