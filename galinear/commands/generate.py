"""``galinear generate``: a greedy continuation from the original and a compressed model, side by side.

The folder is either one `galinear compress` kept (galinear_compressed.json and the replacement
tensors, installed into the original model) or one `galinear quantize --save` wrote (a plain Hugging
Face safetensors folder with the rotations fused, beside galinear_quantize.json: loaded as it is,
pickled weights refused)."""
import os

from galinear.commands._config_options import int_in
from galinear.commands._report import fail

HELP = ("Print a greedy continuation of a prompt from the original model and from a compressed model kept with "
        "`galinear compress` (under OUT/models, or --save DIR) or a quantized model saved by `galinear quantize "
        "--save` (OUT/models/FAMILY-sSEED), side by side")
DEFAULT_PROMPT = "The history of the printing press begins"
#: Most new tokens: each one runs the model over the whole sequence again (no cache), so the time grows
#: with the square of the count.
MAX_TOKENS = 4096
#: Output widths: two columns of at least 10 characters and " | " between them, up to a wide terminal's.
MIN_WIDTH, MAX_WIDTH = 23, 1000
_FIX = "check that the folder is the one `galinear compress` wrote, and write it again if it was changed"
#: The settings file beside the weights of a folder `galinear quantize --save` writes, and its format tag.
QUANTIZE_RECORD = "galinear_quantize.json"
QUANTIZE_FORMAT = "galinear-quantize-v1"
_QUANTIZE_FIX = ("check that the folder is one `galinear quantize --save` wrote (OUT/models/FAMILY-sSEED), and write "
                 "it again if it was changed")
#: Largest galinear_quantize.json read (the settings of one study are a few kB).
_RECORD_BYTES = 1 << 20


def add_arguments(parser):
    parser.add_argument("folder", help="a compressed-model folder written by `galinear compress` (OUT/models/NAME "
                                       "or --save DIR/NAME; or the folder holding it when it holds one model), or a "
                                       "quantized-model folder written by `galinear quantize --save` "
                                       "(OUT/models/FAMILY-sSEED; or OUT/models when it holds one)")
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

    ids = _checked_prompt(model, tokenizer, prompt, tokens)
    eos = getattr(tokenizer, "eos_token_id", None)
    original = greedy(model, ids, tokens, eos)
    install.load(folder, model)
    compressed = greedy(model, ids, tokens, eos)
    return {"prompt_ids": ids, "original": original, "compressed": compressed,
            "first_difference": _first_difference(original, compressed)}


def compare_models(model, other, tokenizer, prompt: str, tokens: int = 40) -> dict:
    """Greedy continuations of ``prompt`` by ``model`` and by ``other`` (a quantized model loaded from its
    folder): ``{"prompt_ids", "original", "compressed", "first_difference"}`` as :func:`compare` returns."""
    ids = _checked_prompt(model, tokenizer, prompt, tokens)
    eos = getattr(tokenizer, "eos_token_id", None)
    original = greedy(model, ids, tokens, eos)
    changed = greedy(other, ids, tokens, eos)
    return {"prompt_ids": ids, "original": original, "compressed": changed,
            "first_difference": _first_difference(original, changed)}


def _checked_prompt(model, tokenizer, prompt: str, tokens: int) -> list:
    check_tokens(tokens)
    ids = prompt_ids(tokenizer, prompt)
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(context, int) and len(ids) + tokens > context:
        raise ValueError(f"the prompt's {len(ids)} tokens and --tokens {tokens} make {len(ids) + tokens}, more than "
                         f"the model's context of {context} positions; give --tokens {max(1, context - len(ids))} or "
                         "fewer, or a shorter --prompt")
    return ids


def _first_difference(a: list, b: list):
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    return first


# ------------------------------------------------------------------------------------ quantize folders
def quantize_folder(folder: str):
    """The quantized-model folder ``folder`` names: itself when it holds galinear_quantize.json; the one
    such folder inside it (OUT/models of a study that saved one model) when it is not a compressed-model
    folder; None when neither (a compressed-model folder, or not a galinear folder at all). A folder
    holding several quantized models raises, naming them."""
    from galinear.compress.storage import folder_format

    if not os.path.isdir(folder):
        return None
    if os.path.lexists(os.path.join(folder, QUANTIZE_RECORD)):
        return folder
    if any(os.path.lexists(os.path.join(folder, name)) for name in (folder_format.CONFIG, folder_format.INDEX)):
        return None
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    inner = [os.path.join(folder, n) for n in names
             if os.path.isdir(os.path.join(folder, n)) and os.path.lexists(os.path.join(folder, n, QUANTIZE_RECORD))]
    if len(inner) > 1:
        raise ValueError(f"{folder} holds {len(inner)} quantized models; load one of them: {', '.join(inner)}")
    return inner[0] if inner else None


def read_quantize_record(folder: str) -> dict:
    """The settings of a quantized-model folder (galinear_quantize.json, parsed as JSON, never
    unpickled), checked field by field, with ``"_folder"`` added; the weights must be safetensors."""
    from galinear import _io
    from galinear.lm import models
    from galinear.quantize.rotations import FAMILIES

    path = os.path.join(folder, QUANTIZE_RECORD)
    record = _io.load_json(path, fix=_QUANTIZE_FIX, max_bytes=_RECORD_BYTES)

    def bad(why):
        return _io.CorruptFileError(path, why, _QUANTIZE_FIX)

    if not isinstance(record, dict):
        raise bad("it must hold a JSON object")
    if record.get("format") != QUANTIZE_FORMAT:
        raise bad(f"\"format\" must be {QUANTIZE_FORMAT!r}, found {record.get('format')!r}")
    if record.get("family") not in FAMILIES:
        raise bad(f"\"family\" must be one of {', '.join(FAMILIES)}, found {record.get('family')!r}")
    seed = record.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad(f"\"seed\" must be an integer, found {seed!r}")
    if not isinstance(record.get("source"), str) or not record["source"]:
        raise bad("\"source\" must name the original model")
    settings = record.get("settings")
    if not isinstance(settings, dict):
        raise bad("\"settings\" must be a JSON object")
    for key in ("wbits", "abits", "kvbits"):
        value = settings.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(f"\"settings\".{key} must be an integer, found {value!r}")
    if not isinstance(settings.get("method"), str):
        raise bad("\"settings\".method must be a string")
    gguf = settings.get("gguf_file")
    if gguf is not None and not isinstance(gguf, str):
        raise bad("\"settings\".gguf_file must be a string or null")
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise ValueError(f"{folder} holds no config.json beside {QUANTIZE_RECORD}; {_QUANTIZE_FIX}")
    models.check_safe_weights(folder)
    return dict(record, _folder=folder)


def load_quantized(record: dict):
    """The plain Hugging Face model of a quantized-model folder (safetensors only), float32, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(record["_folder"], dtype=torch.float32, use_safetensors=True).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def describe_quantized(record: dict) -> str:
    """One phrase: what a quantized-model folder holds."""
    s = record["settings"]
    seed = "" if record.get("seed") is None else f", seed {record['seed']}"
    rotation = "no rotation" if record["family"] == "none" else f"{record['family']} rotation{seed}"
    return (f"simulated quantization, {rotation}, W{s['wbits']}A{s['abits']}KV{s['kvbits']} {s['method'].upper()}; "
            "the weights on their grids with the rotations fused, a plain Hugging Face model: activation and KV "
            "cache quantization are simulated during the study only, not here")


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

    what, fix = "compressed", _FIX
    try:
        check_tokens(args.tokens)
        if not args.prompt.strip():
            raise ValueError("--prompt is empty; give the text to continue")
        if args.gguf_file and not args.model:
            raise ValueError("--gguf-file has no effect without --model, whose folder holds the file it names (the "
                             "folder's recorded source has its own); drop --gguf-file or add --model")
        quantized = quantize_folder(args.folder)
        what, fix = ("quantized", _QUANTIZE_FIX) if quantized else ("compressed", _FIX)
        if quantized:
            record = read_quantize_record(quantized)  # the folder's own checks come before any model loads
            source = (args.model, args.gguf_file) if args.model else (record["source"],
                                                                      record["settings"].get("gguf_file"))
            loaded = models.load_model(*source)
            out = compare_models(loaded.model, load_quantized(record), loaded.tokenizer, args.prompt, args.tokens)
            about = f"quantized: {quantized} ({describe_quantized(record)})"
        else:
            config = folder_format.read_config(args.folder)
            folder_format.checked_replacements(config)  # the folder's own checks come before any model loads
            if args.model:
                loaded = models.load_model(args.model, args.gguf_file)
            else:
                loaded = install.load_source(config)  # recorded path, then the path from the folder
            out = compare(loaded.model, loaded.tokenizer, config["_folder"], args.prompt, args.tokens)
            about = (f"compressed: {config['_folder']} ({config.get('method_tag', '?')}, layers "
                     f"{','.join(map(str, config.get('layers', [])))})")
    except (ValueError, OSError) as exc:  # bad input, damaged folders and files: the message names them
        return fail("generate", " ".join(str(exc).split()))
    except Exception as exc:  # noqa: BLE001  (whatever else a damaged folder or model leads to: one line)
        return fail("generate", " ".join(f"{args.folder}: loading or running the {what} model failed "
                                         f"({type(exc).__name__}: {exc}); {fix}".split()))
    decode = loaded.tokenizer.decode
    print(f"prompt: {args.prompt}")
    print(f"model: {loaded.name}; {about}; greedy, {args.tokens} new tokens")
    print()
    print(side_by_side(decode(out["original"]), decode(out["compressed"]), args.width, ("original", what)))
    print()
    first = out["first_difference"]
    print("the continuations are identical" if first is None else
          f"the continuations first differ at new token {first + 1}")
    return 0
