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


def _resident_kib_of_mapping(path) -> int | None:
    """Resident KiB of this process's memory map of `path` (/proc/self/smaps), None when it is not mapped."""
    resident, inside = None, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:  # a header: range perms offset dev inode [path]
                inside = head[-1] == str(path)
            elif inside and head[0] == "Rss:":
                resident = (resident or 0) + int(head[1])
    return resident


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/smaps"), reason="needs Linux /proc")
def test_scanning_a_file_keeps_only_the_current_chunk_of_it_mapped(tmp_path) -> None:
    """The main process finds chunk ends over a memory map of the file: the pages already scanned must leave
    the process, or its RSS grows by the whole of the largest file (GBs at 10,000 patients)."""
    path = tmp_path / "big.ndjson"
    line = b'{"resourceType":"Observation","id":"' + b"x" * 480 + b'"}\n'
    path.write_bytes(line * 16384)  # 8 MiB, 164 chunks of 100 lines (~51 KiB each)
    scanned = 0
    worst = 0
    for chunk in chunks(path, 100):
        scanned = chunk.end
        worst = max(worst, _resident_kib_of_mapping(path) or 0)
    assert scanned == path.stat().st_size
    assert 0 < worst <= 512, f"{worst} KiB of the file stayed mapped"  # a chunk and fault-around, not 8 MiB
