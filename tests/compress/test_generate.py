"""galinear generate: greedy continuations of the original and of a kept compressed model."""
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from galinear.commands import generate  # noqa: E402
from galinear.compress import Study, load  # noqa: E402
from galinear.lm import models  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, DecodingCharTokenizer, tiny_llama  # noqa: E402


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    from galinear.lm.models import LoadedModel

    root = tmp_path_factory.mktemp("gen")
    config = tiny_config(root / "run", methods=("lr1-cf",), layer_sets=((1,),), datasets=("a",),
                         save_dir=str(root / "keep"))
    Study(config, LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama"), texts=TEXTS).run()
    names = json.loads((root / "keep" / "index.json").read_text())["models"]
    return str(root / "keep" / names[0])


def reference_greedy(model, ids, tokens):
    """Greedy decoding written independently: the whole sequence's logits, argmax of the last."""
    seq = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(tokens):
            nxt = model(input_ids=seq, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=1)
    return seq[0, len(ids):].tolist()


def test_round_trip_matches_the_original_and_the_loaded_compressed_model(kept):
    tokenizer = DecodingCharTokenizer()
    model = tiny_llama()
    out = generate.compare(model, tokenizer, kept, "abc def", tokens=12)
    ids = generate.prompt_ids(tokenizer, "abc def")
    assert out["prompt_ids"] == ids == [ord(c) % 64 for c in "abc def"]
    assert out["original"] == reference_greedy(tiny_llama(), ids, 12)
    assert out["compressed"] == reference_greedy(load(kept, tiny_llama()), ids, 12)
    assert type(models.projection(model, 1, "q_proj")).__name__ == "LowRankLinear"  # installed in place
    again = generate.compare(tiny_llama(), tokenizer, kept, "abc def", tokens=12)
    assert again == out  # deterministic
    diff = out["first_difference"]
    if diff is None:
        assert out["original"] == out["compressed"]
    else:
        assert out["original"][:diff] == out["compressed"][:diff] and out["original"][diff] != out["compressed"][diff]


def test_command_prints_both_columns(kept, monkeypatch, capsys):
    from galinear.cli import main
    from galinear.lm.models import LoadedModel

    monkeypatch.setattr(models, "load_model",
                        lambda source, gguf=None, **kw: LoadedModel(tiny_llama(), DecodingCharTokenizer(), source))
    assert main(["generate", kept, "--model", "tiny", "--prompt", "abc def", "--tokens", "6", "--width", "60"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    header = [line for line in lines if line.startswith("original")][0]
    assert header.split("|")[1].strip() == "compressed"
    want_left = DecodingCharTokenizer().decode(reference_greedy(tiny_llama(), generate.prompt_ids(
        DecodingCharTokenizer(), "abc def"), 6))
    assert lines[lines.index(header) + 2].split("|")[0].strip() == want_left
    assert "identical" in text or "first differ at new token" in text


def test_bad_input_is_named(tmp_path, capsys):
    from galinear.cli import main

    assert main(["generate", str(tmp_path)]) == 2
    assert "not a compressed model written by galinear" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"--tokens must be an integer in 1..4096"):
        generate.compare(tiny_llama(), DecodingCharTokenizer(), str(tmp_path), "ab", tokens=0)
    with pytest.raises(ValueError, match="the prompt is empty"):
        generate.prompt_ids(DecodingCharTokenizer(), "")


def test_side_by_side_wraps_each_column():
    text = generate.side_by_side("a " * 30, "b " * 10, width=30)
    lines = text.splitlines()
    assert all(len(line) <= 30 for line in lines)
    assert lines[:4] == ["original      | compressed", "--------------+--------------",
                         "a a a a a a a | b b b b b b b", "a a a a a a a | b b b"]
    assert lines[4:] == ["a a a a a a a |"] * 2 + ["a a           |"]


@pytest.mark.parametrize("option, value", [("--tokens", "-1"), ("--tokens", "0"), ("--tokens", "1000000000000"),
                                           ("--width", "0"), ("--width", "-5"), ("--width", "1000000000")])
def test_sizes_are_bounded_before_the_folder_or_model_is_read(tmp_path, capsys, no_loading, option, value):
    from galinear.cli import main

    with pytest.raises(SystemExit) as info:
        main(["generate", str(tmp_path), option, value])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"argument {option}: expected an integer in" in err and value in err


def test_prompt_and_context_checked(tmp_path, capsys, no_loading):
    from galinear.cli import main

    assert main(["generate", str(tmp_path), "--prompt", " "]) == 2
    assert "--prompt is empty" in capsys.readouterr().err
    assert main(["generate", str(tmp_path), "--gguf-file", "m.gguf"]) == 2
    assert "--gguf-file has no effect without --model" in capsys.readouterr().err
    with pytest.raises(ValueError, match="more than the model's context of 128 positions; give --tokens 121"):
        generate.compare(tiny_llama(), DecodingCharTokenizer(), str(tmp_path), "abc def", tokens=200)
