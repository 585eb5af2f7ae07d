"""User texts are checked whole before any model loads: a fault past the first bytes that
:func:`galinear.data.text.check_text_file` samples is still found by it, with the message that
:func:`~galinear.data.text.load_text_file` gives when it reads the file."""
import json

import pytest

from galinear.data.text import SAMPLE_BYTES, check_text_file, load_text_file


def _records(n, **fields):
    return [json.dumps(fields or {"text": "a few words of text " * 10})] * n


@pytest.fixture
def write(tmp_path):
    def write(name, data: bytes):
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)
    return write


def _both_refuse(path, field, match):
    with pytest.raises(ValueError, match=match):
        check_text_file(path, field)
    with pytest.raises(ValueError, match=match):
        load_text_file(path, field)


def test_a_record_without_the_field_past_the_sample(write):
    lines = _records(600) + [json.dumps({"body": "x"})]
    path = write("late.jsonl", "\n".join(lines).encode())
    assert len("\n".join(lines[:-1]).encode()) > SAMPLE_BYTES
    _both_refuse(path, "text", "line 601: no field 'text'")


def test_a_line_that_is_not_json_past_the_sample(write):
    lines = _records(600) + ["{not json"]
    path = write("broken.jsonl", "\n".join(lines).encode())
    _both_refuse(path, "text", "line 601 .*not valid JSON")


def test_records_whose_fields_are_all_empty(write):
    path = write("empty.jsonl", "\n".join([json.dumps({"text": "  "})] * 5000).encode())
    assert len(open(path, "rb").read()) > SAMPLE_BYTES
    with pytest.raises(ValueError, match="holds no text"):
        check_text_file(path, "text")


def test_white_space_only_past_the_sample(write):
    path = write("blank.txt", b" \n\t" * 50_000)
    with pytest.raises(ValueError, match="holds no text"):
        check_text_file(path)


def test_a_byte_that_is_not_utf8_past_the_sample(write):
    data = b"plain words " * 20_000
    path = write("late.txt", data + b"\xff tail")
    _both_refuse(path, None, f"byte 0xFF at byte offset {len(data)}")


def test_a_character_cut_by_a_block_boundary_is_text(write):
    data = b"a" * ((1 << 20) - 1) + "\u00e9".encode() + b" words"
    path = write("boundary.txt", data)
    check_text_file(path)
    assert load_text_file(path).endswith("\u00e9 words")


def test_a_large_good_jsonl_passes(write):
    path = write("good.jsonl", "\n".join(_records(2000, text="caf\u00e9 words " * 8)).encode())
    check_text_file(path, "text")
    assert load_text_file(path, "text").count("caf\u00e9") == 16_000


def test_a_record_nested_100000_deep_is_one_line(write):
    path = write("deep.jsonl", ("[" * 100_000 + "]" * 100_000).encode())
    _both_refuse(path, "text", r"deep\.jsonl, line 1.*: nests brackets more than 200 deep")
