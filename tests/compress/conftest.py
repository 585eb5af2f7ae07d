"""The ``tiny`` fixture: a tiny randomly initialised Llama with a character tokenizer (no download;
builders in galinear.testing.models)."""
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture
def tiny():
    from galinear.lm.models import LoadedModel
    from galinear.testing.models import CharTokenizer, tiny_llama

    return LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama")
