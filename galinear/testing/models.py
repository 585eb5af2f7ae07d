"""Tiny randomly initialised causal language models, character tokenizers, texts and a
token-by-token ln PPL for tests of :mod:`galinear.lm` and what uses it, and Gaussian-blob
classification data for tests of the MLP trainer: no download anywhere. torch and transformers
load on the first call that needs them."""
from __future__ import annotations

import numpy as np

__all__ = ["CharTokenizer", "DecodingCharTokenizer", "TEXTS", "gaussian_blobs", "random_text",
           "reference_log_likelihood", "reference_log_perplexity", "tiny_causal_lm", "tiny_gemma", "tiny_llama"]


class CharTokenizer:
    """Maps each character to (code point mod vocab): enough to tokenise test text."""

    def __init__(self, vocab: int = 64):
        self.vocab = vocab

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) % self.vocab for c in text]}


class DecodingCharTokenizer(CharTokenizer):
    """A :class:`CharTokenizer` that also decodes (ids to letters a..z) and has no end token."""

    eos_token_id = None

    def decode(self, ids):
        return "".join(chr(97 + int(i) % 26) for i in ids)


def tiny_llama(layers: int = 3, seed: int = 0, dtype=None):
    """A Llama of ``layers`` decoder layers (hidden size 32, 4 heads, 2 key-value heads, vocab
    64), initialised from torch seed ``seed``, in eval mode with every parameter frozen."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = LlamaForCausalLM(config).eval()
    if dtype is not None:
        model = model.to(dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def random_text(chars: int = 2400, seed: int = 0) -> str:
    """Letters with some structure (a repeated vocabulary of short words), so a model can do better than chance."""
    rng = np.random.default_rng(seed)
    words = ["".join(chr(97 + int(c)) for c in rng.integers(0, 26, rng.integers(2, 6))) for _ in range(40)]
    out = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(words[int(rng.integers(0, len(words)))])
    return " ".join(out)[:chars]


def gaussian_blobs(rng, n_train: int = 256, n_test: int = 128, features: int = 16, classes: int = 3):
    """(x_train, y_train, x_test, y_test) torch tensors: float32 standard normal rows whose
    coordinate ``label`` is raised by 3, so class c has mean 3 e_c (learnable well above chance).
    ``rng``: a numpy Generator; the train rows are drawn first."""
    import torch

    def draw(n):
        labels = rng.integers(0, classes, size=n)
        x = rng.standard_normal((n, features)).astype(np.float32)
        x[np.arange(n), labels] += 3.0
        return torch.from_numpy(x), torch.from_numpy(labels)

    return (*draw(n_train), *draw(n_test))


def reference_log_perplexity(model, windows) -> float:
    """ln PPL token by token: for each ``(tokens, score_from)`` of ``windows``, every label
    ``t >= score_from`` is scored by a forward pass over ``tokens[:t]`` alone, from the last
    position's distribution, in float64. Quadratic in the window length: a reference for tiny
    models, independent of the one-pass scoring of :mod:`galinear.lm.perplexity`."""
    import torch

    total, count = 0.0, 0
    for tokens, score_from in windows:
        for t in range(score_from, len(tokens)):
            with torch.no_grad():
                logits = model(input_ids=torch.as_tensor(tokens[:t]).reshape(1, -1), use_cache=False).logits
            total -= float(torch.log_softmax(logits[0, -1].double(), dim=-1)[int(tokens[t])])
            count += 1
    return total / count


def reference_log_likelihood(model, tokenizer, context: str, continuation: str) -> float:
    """Sum of ln p(token | everything before it) over the tokens ``context + continuation`` adds to
    ``context`` (no special tokens), in float64: what lm-eval's multiple-choice scoring computes."""
    import torch

    head = tokenizer(context, add_special_tokens=False).input_ids
    ids = tokenizer(context + continuation, add_special_tokens=False).input_ids
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
    return float(sum(logp[i - 1, ids[i]] for i in range(len(head), len(ids))))


#: Two short texts, "a" and "b" (the data sets of :func:`galinear.testing.compression.tiny_config`).
TEXTS = {"a": random_text(2400, 1), "b": random_text(2400, 2)}


def tiny_causal_lm(family: str, layers: int = 2, seed: int = 0):
    """A tiny random causal LM of ``family`` (hidden 32, MLP 64, 4 heads, 2 key-value heads,
    vocab 64), in eval mode with every parameter frozen: ``llama``, ``qwen2`` (q/k/v with bias),
    ``mistral``, ``gemma3`` (q/k norms, sandwich norms around the MLP) and, for the refusals, the
    fused layouts ``gpt2`` (``c_attn``) and ``phi3`` (``qkv_proj``, ``gate_up_proj``)."""
    import torch
    import transformers

    common = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    builders = {
        "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
        "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
        "mistral": ("MistralConfig", "MistralForCausalLM", {}),
        "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": 8, "sliding_window": 16}),
        "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}),
        "gpt2": ("GPT2Config", "GPT2LMHeadModel", None),
    }
    config_name, model_name, extra = builders[family]
    if extra is None:  # GPT-2 names its sizes its own way
        settings = dict(vocab_size=64, n_embd=32, n_layer=layers, n_head=4, n_positions=128, bos_token_id=1,
                        eos_token_id=2)
    else:
        settings = dict(common, **extra)
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**settings)).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def tiny_gemma(dtype=None, layers: int = 2, seed: int = 0):
    """A random Gemma3ForCausalLM: hidden 80 (20 x 4: a Paley base order and a fast transform), 4 heads
    of 16, 2 key-value heads, MLP 160, a sliding window shorter than the test windows, and every norm's
    weight (input, post-attention, pre- and post-feedforward, q/k, final) drawn away from 0."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    config = Gemma3TextConfig(vocab_size=64, hidden_size=80, intermediate_size=160, num_hidden_layers=layers,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
                              sliding_window=16)
    model = Gemma3ForCausalLM(config).eval().to(torch.float32 if dtype is None else dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.requires_grad_(False)
            if "norm" in name:
                p.uniform_(-0.5, 0.5)
    return model
