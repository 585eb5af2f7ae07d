"""Tiny randomly initialised causal LMs and a character tokenizer: no download anywhere."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


class CharTokenizer:
    """Maps each character to (code point mod vocab): enough to tokenise test text."""

    def __init__(self, vocab: int = 64):
        self.vocab = vocab

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) % self.vocab for c in text]}


def tiny_llama(layers: int = 3, seed: int = 0, dtype=None):
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


@pytest.fixture
def tiny():
    from galinear.compress.models import LoadedModel

    return LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama")


def tiny_config(out_dir, **overrides):
    from galinear.compress import StudyConfig

    settings = dict(datasets=("a", "b"), layer_sets=((1,), (0, 2)), methods=("dense", "lr1"), seeds=(0,),
                    train_windows=3, eval_windows=2, group=2, mse_windows=1, window=32, stride=16, epochs=2.0,
                    out_dir=str(out_dir), progress=False, verbose=False)
    settings.update(overrides)
    return StudyConfig(**settings)


TEXTS = {"a": random_text(2400, 1), "b": random_text(2400, 2)}
