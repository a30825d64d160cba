"""The bulk load's chunks: every line once, in order, with its file line number, whatever the file's ends."""

from __future__ import annotations

import gzip

import pytest

from services.fhir_api.load_files import chunks


def _lines_of(path, batch):
    out = []
    for chunk in chunks(path, batch):
        lines = chunk.read()
        assert len(lines) <= batch
        out += [(chunk.first_line + i, line) for i, line in enumerate(lines)]
    return out


@pytest.mark.parametrize("batch", [1, 2, 3, 5000])
@pytest.mark.parametrize(
    "content",
    [
        b'{"a":1}\n{"b":2}\n\n{"c":3}\n',
        b'{"a":1}\n{"b":2}\n\n{"c":3}',  # no newline at the end
        b'{"a":1}\r\n  {"b":2}  \r\n\n{"c":3}\r\n',  # CRLF and padding, stripped
        b"\n\n",
        b'{"only":1}',
    ],
)
def test_plain_and_gzip_chunks_give_every_line_once_with_its_number(tmp_path, content, batch) -> None:
    expected = list(enumerate((line.strip() for line in content.split(b"\n")), 1))
    if content.endswith(b"\n"):
        expected.pop()
    plain = tmp_path / "x.ndjson"
    plain.write_bytes(content)
    packed = tmp_path / "x.ndjson.gz"
    packed.write_bytes(gzip.compress(content))
    assert _lines_of(plain, batch) == expected
    assert _lines_of(packed, batch) == expected


def test_plain_chunks_are_byte_ranges_and_an_empty_file_has_none(tmp_path) -> None:
    path = tmp_path / "x.ndjson"
    path.write_bytes(b"1\n22\n333\n")
    found = list(chunks(path, 2))
    assert [(c.first_line, c.start, c.end, c.lines) for c in found] == [(1, 0, 5, None), (3, 5, 9, None)]
    (tmp_path / "empty.ndjson").write_bytes(b"")
    assert list(chunks(tmp_path / "empty.ndjson", 2)) == []
