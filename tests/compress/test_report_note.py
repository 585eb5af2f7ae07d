"""The report names the built-in texts that a study used, not all three."""
from galinear.compress.report import texts_note


def test_note_names_only_the_texts_used():
    one = texts_note(["wikipedia"])
    assert "Wikipedia" in one and "Shakespeare" not in one and "King James" not in one and "stands in" in one
    two = texts_note(["wikipedia", "shakespeare"])
    assert "Wikipedia (lead paragraphs) and Shakespeare (modern spelling) stand in" in two
    assert "King James" not in two
    assert "the King James Bible" in texts_note(["wikipedia", "shakespeare", "kjv"])
    assert texts_note(["mytext"]) == ""
    assert "Wikipedia" in texts_note(["mytext", "wikipedia"])
