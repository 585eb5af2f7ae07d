"""The offline next-sentence task: each answer follows its context in the text, the distractors
come from other paragraphs at a similar length, and the set is reproducible."""
import json

import pytest

from galinear.data.choice import next_sentence_items, paragraphs, sentences, write_lm_eval_task

TEXT = "\n".join(
    [" = A heading = "]
    + [f"Paragraph {p} opens with a plain sentence of words. "
       + " ".join(f"Sentence {s} of paragraph {p} has {'many ' * (s % 4)}words in it." for s in range(1, 6))
       for p in range(12)])


def test_sentences_and_paragraphs():
    assert sentences("One two three. Four five six! Seven? 8 is a digit.") == [
        "One two three.", "Four five six!", "Seven?", "8 is a digit."]
    assert paragraphs(" = Title = \n first line , with @-@ tokens . \n\n second") == [
        "first line, with-tokens.", "second"]


def test_items_follow_the_text_and_draw_distractors_elsewhere():
    items = next_sentence_items(TEXT, 30, seed=3, context_sentences=2, length_ratio=1.5)
    assert len(items) == 30
    split = [sentences(p) for p in paragraphs(TEXT)]
    for item in items:
        assert len(item["choices"]) == 4 and len(set(item["choices"])) == 4
        answer = item["choices"][item["label"]]
        (home,) = [g for g in split if answer in g]
        j = home.index(answer)
        assert item["context"] == " ".join(home[max(0, j - 2):j])
        for k, other in enumerate(item["choices"]):
            if k != item["label"]:
                assert other not in home
                ratio = len(other.split()) / len(answer.split())
                assert 1 / 1.5 <= ratio <= 1.5
    assert len({item["label"] for item in items}) == 4  # every position is used
    assert next_sentence_items(TEXT, 30, seed=3) == items
    assert next_sentence_items(TEXT, 30, seed=4) != items


@pytest.mark.parametrize("kwargs, match", [
    ({"count": 10_000}, "fewer than the 10000 items"),
    ({"count": 0}, "count must be an integer >= 1"),
    ({"count": 3, "max_words": 2}, "max_words must be"),
    ({"count": 3, "length_ratio": 0.5}, "length_ratio must be"),
])
def test_bad_requests_name_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        next_sentence_items(TEXT, **kwargs)


def test_the_task_files(tmp_path):
    items = next_sentence_items(TEXT, 5)
    folder = write_lm_eval_task(str(tmp_path / "tasks"), items, name="next_sentence")
    lines = (tmp_path / "tasks" / "next_sentence.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == items
    yaml_text = (tmp_path / "tasks" / "next_sentence.yaml").read_text()
    assert "task: next_sentence" in yaml_text and "output_type: multiple_choice" in yaml_text
    assert folder == str(tmp_path / "tasks")
    with pytest.raises(ValueError, match="task name"):
        write_lm_eval_task(str(tmp_path), items, name="bad name")
